//! `aggregate_to_string`: collects data messages into batches and emits each batch as one
//! message whose data is the items joined with `separator`.
//!
//! Substation compatibility: the same settings (`separator`, required; `object.batch_key`;
//! `batch`, where the size counts the items without separators) and output. A batch is
//! emitted when it is full, when it reaches `batch.duration` (a real maximum age, enforced
//! by a timer), and, for every key, on ctrl before the ctrl is passed on. Differences:
//! batches come out in the order they were opened (Substation: random), an empty message is
//! never emitted, and the output carries the acknowledgement tokens of all its inputs.
//! Outputs have no metadata, as in Substation.

use std::time::Instant;

use serde::Deserialize;
use sluice_engine::batch::Batch;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Message, StatefulTransform, TransformError, async_trait};

use super::buffer::{Buffers, carry_acks};

/// Settings of `aggregate_to_string`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// What goes between items (required).
    pub separator: String,
    /// `batch_key`.
    pub object: ObjectSettings,
    /// Batch limits.
    pub batch: BatchSettings,
}

/// The `aggregate_to_string` transform.
pub(crate) struct AggregateToString {
    separator: Vec<u8>,
    buffers: Buffers,
}

impl AggregateToString {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.separator.is_empty() {
            return Err(b.field_error(
                "separator",
                "missing required option: separator (e.g. \"\\n\")",
            ));
        }
        Ok(AggregateToString {
            separator: s.separator.into_bytes(),
            buffers: Buffers::new(b, s.batch, &s.object.batch_key)?,
        })
    }

    fn emit(&self, batch: Batch<Message>, out: &mut Vec<Message>) {
        let len = batch.size + self.separator.len() * batch.items.len();
        let mut data = Vec::with_capacity(len);
        for (i, m) in batch.items.iter().enumerate() {
            if i > 0 {
                data.extend_from_slice(&self.separator);
            }
            data.extend_from_slice(m.data());
        }
        let mut msg = Message::new(data);
        carry_acks(&mut msg, &batch);
        out.push(msg);
    }
}

#[async_trait]
impl StatefulTransform for AggregateToString {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            for batch in self.buffers.take_all() {
                self.emit(batch, out);
            }
            out.push(msg);
            return Ok(());
        }
        for batch in self.buffers.add(&msg, Instant::now())? {
            self.emit(batch, out);
        }
        Ok(())
    }

    fn deadline(&self) -> Option<Instant> {
        self.buffers.deadline()
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        for batch in self.buffers.take_expired(now) {
            self.emit(batch, out);
        }
        Ok(())
    }

    async fn abort(&self, reason: &str) {
        self.buffers.abort(reason);
    }
}

/// What registers the `aggregate_to_string` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "aggregate_to_string",
    aliases: &[],
    library: "sub.tf.agg.to.str",
    summary: "batches messages into one message joined with `separator`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"separator": "\n"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::{Message, json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "newline",
                json!({"separator": "\n"}),
                vec!["a", "b"],
                vec!["a\nb"],
            ),
            (
                "multi-byte separator",
                json!({"separator": ", "}),
                vec!["a", "", "c"],
                vec!["a, , c"],
            ),
            (
                "count",
                json!({"separator": "|", "batch": {"count": 2}}),
                vec!["a", "b", "c"],
                vec!["a|b", "c"],
            ),
            (
                "size excludes separators",
                json!({"separator": "--", "batch": {"size": 2}}),
                vec!["a", "b", "c"],
                vec!["a--b", "c"],
            ),
            (
                "batch key",
                json!({"separator": "\n", "object": {"batch_key": "k"}}),
                vec![r#"{"k":1}"#, r#"{"k":2}"#, r#"{"k":1}"#],
                vec!["{\"k\":1}\n{\"k\":1}", r#"{"k":2}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(
                &r,
                json!({"type": "aggregate_to_string", "settings": settings}),
            )
            .unwrap();
            assert_eq!(testing::run(t, &input).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn separator_is_required() {
        let e = testing::build(&registry(), json!({"type": "aggregate_to_string"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("separator"), "{e}");
    }

    #[test]
    fn output_carries_every_input_ack() {
        let t = testing::build(
            &registry(),
            json!({"type": "aggregate_to_string", "settings": {"separator": ","}}),
        )
        .unwrap();
        let mut trackers = Vec::new();
        let mut out = Vec::new();
        for d in ["a", "b", "c"] {
            let (tr, tok) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(tok);
            trackers.push(tr);
            testing::block_on(t.transform(m, &mut out)).unwrap();
        }
        testing::block_on(t.transform(Message::ctrl(), &mut out)).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(&out[0].data()[..], b"a,b,c");
        assert!(out[1].is_ctrl());
        assert!(trackers.iter().all(|t| t.status() == AckStatus::Pending));
        out[0].fail_acks("downstream send failed");
        drop(out);
        assert!(trackers.iter().all(|t| t.status() == AckStatus::Failed));
    }
}
