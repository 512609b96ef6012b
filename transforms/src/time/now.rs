//! `time_now`: the current time as epoch nanoseconds.
//!
//! Substation compatibility: with `object.target_key` the time is set there as a JSON
//! integer; without it the data is replaced by the integer's text. `object.source_key` has
//! no meaning here: Substation ignores it, sluice ignores it with a warning.

use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::context::Clock;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, Key, MapTransform, Message, TransformError, Value,
};

/// Settings of `time_now`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `target_key`: where the time goes (default: it replaces the data).
    pub object: ObjectSettings,
}

/// The `time_now` transform.
pub(crate) struct TimeNow {
    target: Option<Key>,
    /// The build context's clock.
    clock: Arc<dyn Clock>,
}

impl TimeNow {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.object
            .source_key
            .as_deref()
            .is_some_and(|k| !k.is_empty())
        {
            b.warn("setting \"object.source_key\" is ignored by time_now (only object.target_key is used)".into());
        }
        Ok(TimeNow {
            target: b.opt_key("object.target_key", &s.object.target_key)?,
            clock: b.context().clock().clone(),
        })
    }
}

impl MapTransform for TimeNow {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl TimeNow {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let ns = super::to_nanos(&chrono::DateTime::<chrono::Utc>::from(self.clock.now()))?;
        match &self.target {
            Some(trg) => msg.set(trg, Value::from(ns))?,
            None => msg.set_data(ns.to_string().into_bytes()),
        }
        Ok(())
    }
}

/// What registers the `time_now` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "time_now",
    aliases: &[],
    library: "sub.tf.time.now",
    summary: "the current time as epoch nanoseconds",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Value, json, testing};

    const TYPE: &str = "time_now";

    fn now() -> i64 {
        chrono::Utc::now().timestamp_nanos_opt().unwrap()
    }

    #[test]
    fn cases() {
        let r = registry();
        // (name, settings, input, where the time is in the output, the output without it)
        let cases = [
            ("data mode", json!({}), "anything", None, json!(null)),
            (
                "object mode",
                json!({"object": {"target_key": "now"}}),
                r#"{"a":1}"#,
                Some("now"),
                json!({"a": 1}),
            ),
            (
                "nested target on empty data",
                json!({"object": {"target_key": "t.now"}}),
                "",
                Some("t"),
                json!({}),
            ),
            (
                "target replaces a value",
                json!({"object": {"target_key": "now"}}),
                r#"{"now":"x","b":2}"#,
                Some("now"),
                json!({"b": 2}),
            ),
        ];
        for (name, settings, input, key, rest) in cases {
            let t = testing::build(&r, json!({"type": TYPE, "settings": settings})).unwrap();
            let before = now();
            let out = testing::run(t, &[input]).unwrap();
            let after = now();
            assert_eq!(out.len(), 1, "{name}");
            let got: i64 = match key {
                None => out[0].parse().unwrap(),
                Some(k) => {
                    let mut v: Value = serde_json::from_str(&out[0]).unwrap();
                    let mut t = v.as_object_mut().unwrap().shift_remove(k).unwrap();
                    assert_eq!(v, rest, "{name}");
                    if let Some(inner) = t.get("now") {
                        t = inner.clone();
                    }
                    t.as_i64().unwrap()
                }
            };
            assert!(before <= got && got <= after, "{name}: {got}");
        }
    }

    #[test]
    fn the_time_is_the_build_contexts_clock() {
        use sluice_engine::Context;
        use sluice_engine::context::FixedClock;
        use std::sync::Arc;
        use std::time::{Duration, UNIX_EPOCH};
        let t = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let ctx = Arc::new(Context::default().with_clock(Arc::new(FixedClock(t))));
        let built = registry()
            .build_transform_in(&ctx, &json!({"type": TYPE}), "transforms[0]")
            .ok()
            .unwrap();
        let out = testing::run(built.value, &["x"]).unwrap();
        assert_eq!(out, ["1700000000123456789"]);
    }

    #[test]
    fn errors() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"target_key": "now"}}}),
        )
        .unwrap();
        let err = testing::run(t, &["not json"]).unwrap_err().to_string();
        assert!(err.contains("not JSON"), "{err}");
        let err = testing::build(
            &r,
            json!({"type": TYPE, "settings": {"object": {"target_key": 5}}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.object.target_key"), "{err}");
        let built = r
            .build_transform(
                &json!({"type": TYPE, "settings": {"object": {"source_key": "a"}}}),
                "transforms[0]",
            )
            .ok()
            .unwrap();
        assert!(
            built
                .warnings
                .iter()
                .any(|w| w.message.contains("source_key")),
            "a warning about source_key"
        );
    }
}
