//! `utility_control`: cuts a long stream of data messages into batches by emitting a ctrl
//! message at each boundary, so that every stateful transform after it (aggregates, sends,
//! the lock's checkpoint) flushes periodically instead of only at the end of the input.
//!
//! It counts data messages the way a batch does (`batch.count` messages, `batch.size` bytes
//! of data, `batch.duration` of age). When the next message would overflow the window, a
//! ctrl is emitted *before* that message, which then opens the next window. The emitted
//! ctrl only reaches the transforms after this one. A ctrl arriving from upstream resets
//! the window and passes on. A message larger than `batch.size` is not an error: it fills a
//! window on its own.
//!
//! Substation compatibility: the same settings and placement of the ctrl. Differences: the
//! age is a real maximum enforced by the pipeline's timer (`deadline`/`expire`), so a quiet
//! stream still gets its ctrl when the window is `batch.duration` old; Substation's is an
//! idle gap noticed only when the next message arrives. Go's defaults apply when a setting
//! is absent (1000 messages, 1 MiB, 1 minute); Substation's library uses 1,000,000 bytes.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use serde::Deserialize;
use sluice_engine::batch::BatchLimits;
use sluice_engine::settings::BatchSettings;
use sluice_engine::{Build, ConfigError, Message, StatefulTransform, TransformError, async_trait};

/// Settings of `utility_control`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The window: `count`, `size` (bytes of data), `duration` (maximum age).
    pub batch: BatchSettings,
}

#[derive(Debug, Default)]
struct Window {
    count: usize,
    size: usize,
    opened: Option<Instant>,
}

/// The `utility_control` transform.
pub(crate) struct UtilityControl {
    limits: BatchLimits,
    window: Mutex<Window>,
}

impl UtilityControl {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(UtilityControl {
            limits: BatchLimits::from(s.batch),
            window: Mutex::new(Window::default()),
        })
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expires(&self, w: &Window) -> Option<Instant> {
        if self.limits.max_age.is_zero() {
            return None;
        }
        w.opened.map(|t| t + self.limits.max_age)
    }
}

#[async_trait]
impl StatefulTransform for UtilityControl {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            *self.window() = Window::default();
            out.push(msg);
            return Ok(());
        }
        let now = Instant::now();
        let size = msg.data().len();
        let boundary = {
            let mut w = self.window();
            let full = w.count > 0
                && (w.count + 1 > self.limits.count
                    || w.size + size > self.limits.size
                    || self.expires(&w).is_some_and(|d| d <= now));
            if full {
                *w = Window::default();
            }
            w.count += 1;
            w.size += size;
            w.opened.get_or_insert(now);
            full
        };
        if boundary {
            out.push(Message::checkpoint());
        }
        out.push(msg);
        Ok(())
    }

    fn deadline(&self) -> Option<Instant> {
        self.expires(&self.window())
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let due = {
            let mut w = self.window();
            let due = self.expires(&w).is_some_and(|d| d <= now);
            if due {
                *w = Window::default();
            }
            due
        };
        if due {
            out.push(Message::checkpoint());
        }
        Ok(())
    }
}

/// What registers the `utility_control` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_control",
    aliases: &[],
    library: "sub.tf.util.control",
    summary: "inserts a ctrl message at batch boundaries",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"batch": {"count": 1}}"#,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::meta::test_support::{journal, registry};
    use sluice_engine::{Message, json, testing};

    /// Runs `input` ("<ctrl>" for a ctrl) through utility_control then a recorder, and
    /// returns what the recorder saw.
    fn seen(name: &str, batch: sluice_engine::Value, input: &[&str]) -> Vec<String> {
        let p = testing::build_pipeline(
            &registry(),
            json!([
                {"type": "utility_control", "settings": {"batch": batch}},
                {"type": "fixture_record", "settings": {"name": name}},
            ]),
        )
        .unwrap();
        let msgs = input
            .iter()
            .map(|s| match *s {
                "<ctrl>" => Message::ctrl(),
                s => Message::new(s.as_bytes().to_vec()),
            })
            .collect();
        testing::block_on(p.apply(msgs)).unwrap();
        journal(name)
    }

    #[test]
    fn cases() {
        let cases = [
            (
                "count: the ctrl comes before the overflowing message",
                json!({"count": 2}),
                vec!["a", "b", "c", "d", "e", "<ctrl>"],
                vec!["a", "b", "<ctrl>", "c", "d", "<ctrl>", "e", "<ctrl>"],
            ),
            (
                "count 1",
                json!({"count": 1}),
                vec!["a", "b", "<ctrl>"],
                vec!["a", "<ctrl>", "b", "<ctrl>"],
            ),
            (
                "size in bytes",
                json!({"size": 4}),
                vec!["aa", "bb", "c", "dd", "<ctrl>"],
                vec!["aa", "bb", "<ctrl>", "c", "dd", "<ctrl>"],
            ),
            (
                "an oversized message fills a window on its own",
                json!({"size": 2}),
                vec!["a", "toolarge", "b", "<ctrl>"],
                vec!["a", "<ctrl>", "toolarge", "<ctrl>", "b", "<ctrl>"],
            ),
            (
                "an incoming ctrl resets the window",
                json!({"count": 2}),
                vec!["a", "<ctrl>", "b", "c", "d", "<ctrl>"],
                vec!["a", "<ctrl>", "b", "c", "<ctrl>", "d", "<ctrl>"],
            ),
            (
                "under the limits only the final ctrl",
                json!({}),
                vec!["a", "b", "<ctrl>"],
                vec!["a", "b", "<ctrl>"],
            ),
        ];
        for (i, (name, batch, input, want)) in cases.into_iter().enumerate() {
            assert_eq!(seen(&format!("control-{i}"), batch, &input), want, "{name}");
        }
    }

    #[test]
    fn age_is_enforced_by_the_timer_and_on_arrival() {
        let t = testing::build(
            &registry(),
            json!({"type": "utility_control", "settings": {"batch": {"duration": "1s"}}}),
        )
        .unwrap();
        testing::block_on(async {
            assert_eq!(t.deadline(), None);
            let mut out = Vec::new();
            t.transform(Message::new(&b"a"[..]), &mut out)
                .await
                .unwrap();
            let d = t.deadline().expect("a window is open");
            let mut expired = Vec::new();
            t.expire(d - Duration::from_millis(1), &mut expired)
                .await
                .unwrap();
            assert!(expired.is_empty());
            t.expire(d, &mut expired).await.unwrap();
            assert!(expired.len() == 1 && expired[0].is_ctrl());
            assert_eq!(t.deadline(), None, "the window was reset");
        });

        let t = testing::build(
            &registry(),
            json!({"type": "utility_control", "settings": {"batch": {"duration": "1ms"}}}),
        )
        .unwrap();
        testing::block_on(async {
            let mut out = Vec::new();
            t.transform(Message::new(&b"a"[..]), &mut out)
                .await
                .unwrap();
            std::thread::sleep(Duration::from_millis(5));
            t.transform(Message::new(&b"b"[..]), &mut out)
                .await
                .unwrap();
            let kinds: Vec<bool> = out.iter().map(|m| m.is_ctrl()).collect();
            assert_eq!(kinds, vec![false, true, false]);
        });
    }

    #[test]
    fn config_errors_name_the_field() {
        let err = testing::build(
            &registry(),
            json!({"type": "utility_control", "settings": {"batch": {"count": "ten"}}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.batch.count"), "{err}");
    }
}
