//! `utility_delay`: waits `duration` before passing each data message on.
//!
//! Substation compatibility: the same setting (a Go duration, required). The wait is a
//! `tokio` timer, so it holds no thread, and it is cancelled with the task running it
//! (Substation's sleep ignores its context). Being stateless, messages in different
//! chunks of a batch may wait at the same time; the order of outputs is kept regardless.

use serde::Deserialize;
use sluice_engine::settings::GoDuration;
use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};
use std::time::Duration;

/// Settings of `utility_delay`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// How long to wait per data message (required).
    pub duration: Option<GoDuration>,
}

/// The `utility_delay` transform.
pub(crate) struct UtilityDelay {
    duration: Duration,
}

impl UtilityDelay {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let duration = s.duration.ok_or_else(|| {
            b.field_error(
                "duration",
                "missing required option: how long to wait, e.g. \"500ms\" or \"1s\"",
            )
        })?;
        Ok(UtilityDelay {
            duration: duration.0,
        })
    }
}

#[async_trait]
impl StatelessTransform for UtilityDelay {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if !msg.is_ctrl() && !self.duration.is_zero() {
            tokio::time::sleep(self.duration).await;
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `utility_delay` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_delay",
    aliases: &[],
    library: "sub.tf.util.delay",
    summary: "waits before passing each data message on",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"duration": "1ms"}"#,
};

#[cfg(test)]
mod tests {
    use crate::meta::test_support::datas;
    use crate::registry;
    use sluice_engine::{Message, Pipeline, json, testing};

    #[tokio::test(start_paused = true)]
    async fn waits_per_data_message_and_keeps_order() {
        let t = testing::build(
            &registry(),
            json!({"type": "utility_delay", "settings": {"duration": "1.5s"}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![("delay", t)]);
        let start = tokio::time::Instant::now();
        let out = p
            .apply(vec![
                Message::new(&b"a"[..]),
                Message::new(&b"b"[..]),
                Message::ctrl(),
            ])
            .await
            .unwrap();
        assert_eq!(datas(&out), vec!["a", "b"]);
        assert!(out.last().unwrap().is_ctrl());
        assert_eq!(start.elapsed().as_millis(), 3000);
    }

    #[test]
    fn config_errors_name_the_field() {
        let r = registry();
        for (settings, want) in [
            (json!({}), "settings.duration: missing required option"),
            (
                json!({"duration": "1d"}),
                "settings.duration: invalid duration",
            ),
            (json!({"duration": 5}), "settings.duration"),
        ] {
            let err = testing::build(&r, json!({"type": "utility_delay", "settings": settings}))
                .err()
                .unwrap_or_else(|| panic!("{want} should fail"))
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }
}
