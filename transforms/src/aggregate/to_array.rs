//! `aggregate_to_array`: collects data messages into batches and emits each batch as one
//! JSON array (or as a new object holding the array at `object.target_key`).
//!
//! Substation compatibility: the same settings (`object.target_key`, `object.batch_key`,
//! `batch`) and output; JSON data goes into the array as JSON, other data as a string. A
//! batch is emitted when it is full, when it reaches `batch.duration` (a real maximum age,
//! enforced by a timer, where Substation's is an idle gap noticed on the next message), and,
//! for every key, on ctrl before the ctrl is passed on. Differences: batches come out in
//! the order they were opened (Substation: random), an empty message is never emitted, and
//! the output carries the acknowledgement tokens of all its inputs. Outputs have no
//! metadata, as in Substation.

use std::time::Instant;

use serde::Deserialize;
use sluice_engine::batch::Batch;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{
    Build, ConfigError, Key, Message, StatefulTransform, TransformError, Value, async_trait, value,
};

use super::buffer::{Buffers, carry_acks};

/// Settings of `aggregate_to_array`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `target_key` (where the array goes in a new object) and `batch_key`.
    pub object: ObjectSettings,
    /// Batch limits.
    pub batch: BatchSettings,
}

/// The `aggregate_to_array` transform.
pub(crate) struct AggregateToArray {
    target: Option<Key>,
    buffers: Buffers,
}

impl AggregateToArray {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(AggregateToArray {
            target: b.opt_key("object.target_key", &s.object.target_key)?,
            buffers: Buffers::new(b, s.batch, &s.object.batch_key)?,
        })
    }

    fn emit(&self, batch: Batch<Message>, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let array: Vec<Value> = batch
            .items
            .iter()
            .map(|m| {
                m.data_value()
                    .cloned()
                    .unwrap_or_else(|| value::from_bytes(m.data()))
            })
            .collect();
        let mut msg = match &self.target {
            Some(trg) => {
                let mut m = Message::from_value(Value::Object(Default::default()));
                m.set(trg, Value::Array(array.into()))?;
                m
            }
            None => Message::from_value(Value::Array(array.into())),
        };
        carry_acks(&mut msg, &batch);
        out.push(msg);
        Ok(())
    }

    /// Emits each batch; on error the items not emitted are marked failed, since dropping
    /// them would count them as delivered.
    fn emit_all(
        &self,
        batches: Vec<Batch<Message>>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut rest = batches.into_iter();
        while let Some(batch) = rest.next() {
            let acks: Vec<_> = batch.items.iter().map(|m| m.acks().clone()).collect();
            if let Err(e) = self.emit(batch, out) {
                let reason = e.to_string();
                for a in &acks {
                    sluice_engine::ack::fail_all(a, &reason);
                }
                for b in rest {
                    for m in &b.items {
                        m.fail_acks(&reason);
                    }
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl StatefulTransform for AggregateToArray {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let closed = if msg.is_ctrl() {
            self.buffers.take_all()
        } else {
            self.buffers.add(&msg, Instant::now())?
        };
        self.emit_all(closed, out)?;
        if msg.is_ctrl() {
            out.push(msg);
        }
        Ok(())
    }

    fn deadline(&self) -> Option<Instant> {
        self.buffers.deadline()
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.emit_all(self.buffers.take_expired(now), out)
    }

    async fn abort(&self, reason: &str) {
        self.buffers.abort(reason);
    }
}

/// What registers the `aggregate_to_array` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "aggregate_to_array",
    aliases: &[],
    library: "sub.tf.agg.to.arr",
    summary: "batches messages into one JSON array",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::{Message, json, testing};
    use std::time::{Duration, Instant};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "json and text",
                json!({}),
                vec![r#"{"a":1}"#, "b", "2"],
                vec![r#"[{"a":1},"b",2]"#],
            ),
            (
                "target key",
                json!({"object": {"target_key": "m.x"}}),
                vec!["a"],
                vec![r#"{"m":{"x":["a"]}}"#],
            ),
            (
                "count",
                json!({"batch": {"count": 2}}),
                vec!["1", "2", "3"],
                vec!["[1,2]", "[3]"],
            ),
            (
                "size",
                json!({"batch": {"size": 3}}),
                vec!["11", "22", "3"],
                vec!["[11]", "[22,3]"],
            ),
            (
                "batch key in open order",
                json!({"object": {"batch_key": "k"}}),
                vec![r#"{"k":"b"}"#, r#"{"k":"a"}"#, r#"{"k":"b","n":1}"#],
                vec![r#"[{"k":"b"},{"k":"b","n":1}]"#, r#"[{"k":"a"}]"#],
            ),
            ("nothing in, nothing out", json!({}), vec![], vec![]),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(
                &r,
                json!({"type": "aggregate_to_array", "settings": settings}),
            )
            .unwrap();
            assert_eq!(testing::run(t, &input).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn oversized_item_is_an_error() {
        let t = testing::build(
            &registry(),
            json!({"type": "aggregate_to_array", "settings": {"batch": {"size": 2}}}),
        )
        .unwrap();
        let e = testing::run(t, &["abc"]).unwrap_err().to_string();
        assert!(e.contains("batch size limit of 2 bytes"), "{e}");
    }

    #[test]
    fn expires_by_age_and_carries_acks() {
        let t = testing::build(
            &registry(),
            json!({"type": "aggregate_to_array", "settings": {"batch": {"duration": "50ms"}}}),
        )
        .unwrap();
        let (ta, tok_a) = AckTracker::new();
        let (tb, tok_b) = AckTracker::new();
        let mut a = Message::new(&b"1"[..]);
        a.add_ack(tok_a);
        a.set_metadata(&br#"{"m":1}"#[..]);
        let mut b = Message::new(&b"2"[..]);
        b.add_ack(tok_b);
        let mut out = Vec::new();
        testing::block_on(t.transform(a, &mut out)).unwrap();
        testing::block_on(t.transform(b, &mut out)).unwrap();
        assert!(out.is_empty());
        assert_eq!(ta.status(), AckStatus::Pending);
        let d = t.deadline().unwrap();
        assert!(d > Instant::now());
        testing::block_on(t.expire(d - Duration::from_millis(1), &mut out)).unwrap();
        assert!(out.is_empty());
        testing::block_on(t.expire(d, &mut out)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0].data()[..], b"[1,2]");
        assert!(out[0].metadata().is_empty(), "no metadata");
        assert_eq!(out[0].acks().len(), 2);
        assert_eq!(ta.status(), AckStatus::Pending, "held by the output");
        drop(out);
        assert_eq!(ta.status(), AckStatus::Delivered);
        assert_eq!(tb.status(), AckStatus::Delivered);
        assert_eq!(t.deadline(), None);
    }

    #[test]
    fn abort_fails_buffered_inputs() {
        let t = testing::build(&registry(), json!({"type": "aggregate_to_array"})).unwrap();
        let (tr, tok) = AckTracker::new();
        let mut m = Message::new(&b"1"[..]);
        m.add_ack(tok);
        testing::block_on(t.transform(m, &mut Vec::new())).unwrap();
        testing::block_on(t.abort("boom"));
        assert_eq!(tr.status(), AckStatus::Failed);
        let mut out = Vec::new();
        testing::block_on(t.transform(Message::ctrl(), &mut out)).unwrap();
        assert_eq!(
            out.len(),
            1,
            "only the ctrl: nothing was kept, no empty message"
        );
    }
}
