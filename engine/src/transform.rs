//! The `Transform` and `Condition` traits: the one abstraction everything is built from.
//!
//! As in Substation, sources' records, enrichment, routing, error handling, deduplication and
//! sends are all transforms in one flat, ordered list. A transform takes a message and emits
//! zero (drop), one, or many (fan-out) messages.
//!
//! Two kinds exist because of ordering and concurrency. A *stateless* transform treats each
//! data message on its own, so the pipeline may run it on many messages at once and never
//! hands it ctrl messages (they pass it unchanged). A *stateful* transform (batches, sends,
//! aggregates, the lock) sees every message, ctrl included, one at a time and in input
//! order, so what it emits or sends keeps the order of its input.

use std::time::Instant;

use async_trait::async_trait;

use crate::error::TransformError;
use crate::message::Message;

/// Whether a transform keeps state across messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Each data message on its own; never sees ctrl; may run concurrently.
    Stateless,
    /// Sees data and ctrl messages, one at a time, in order.
    Stateful,
}

/// What an in-place transform did with a message (see [`Transform::transform_in_place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// The message (possibly changed) goes on.
    Keep,
    /// The message is dropped.
    Drop,
}

/// A step of a pipeline.
#[async_trait]
pub trait Transform: Send + Sync + 'static {
    /// Processes one message, pushing what it emits to `out`.
    ///
    /// Stateless transforms are only given data messages. Stateful ones get ctrl messages
    /// too and must emit the ctrl (after anything they flush) so it reaches later stages.
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError>;

    /// The synchronous fast path of a stateless transform that changes one message in place
    /// and does no I/O: the pipeline calls it directly, without an async call or output list.
    /// `None` means the transform has no such path and [`Transform::transform`] is used. A
    /// transform that has it implements `transform` with [`transform_via_in_place`].
    fn transform_in_place(&self, _msg: &mut Message) -> Option<Result<InPlace, TransformError>> {
        None
    }

    /// Whether [`Transform::transform_in_place`] always returns `Some` for data messages.
    /// A transform that overrides one overrides both.
    fn supports_in_place(&self) -> bool {
        false
    }

    /// Whether the transform keeps state; see [`Kind`].
    fn kind(&self) -> Kind {
        Kind::Stateless
    }

    /// Processes messages in order. The lock overrides this to overlap its lock-store calls;
    /// the default calls [`Transform::transform`] on each message in turn. On error, the
    /// messages not yet processed are marked failed.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut rest = msgs.into_iter();
        while let Some(m) = rest.next() {
            let acks = m.acks().clone();
            if let Err(e) = self.transform(m, out).await {
                let reason = e.to_string();
                crate::ack::fail_all(&acks, &reason);
                for r in rest {
                    r.fail_acks(&reason);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// When the oldest batch this transform holds reaches its maximum age.
    fn deadline(&self) -> Option<Instant> {
        None
    }

    /// Flushes (or emits) every batch whose maximum age has passed by `now`.
    async fn expire(&self, _now: Instant, _out: &mut Vec<Message>) -> Result<(), TransformError> {
        Ok(())
    }

    /// Discards everything held (batches, retry queues), marking those messages failed.
    ///
    /// Called when an error has escaped the pipeline (or the lock's inner list): the source
    /// will redeliver those messages, so sending them later would duplicate them. A send
    /// whose flush failed keeps the undelivered items so that `meta_retry` can retry the
    /// flush; `abort` is what drops them when nothing retries.
    async fn abort(&self, _reason: &str) {}

    /// Finishes what the transform owes for messages that already left it, waiting at most
    /// until `until`: `meta_kv_store_lock` commits the keys of messages delivered after it
    /// (a send later in the pipeline) and releases those of messages that failed there.
    ///
    /// Input adapters call it (through [`crate::Pipeline::settle`]) after the ctrl that ends
    /// their input went through the whole pipeline and its outputs were dropped, before
    /// they report to the source. It never fails: what it could not finish it logs, and the
    /// transform keeps trying on later calls.
    async fn settle(&self, _until: Instant) {}
}

/// `Transform::transform` for a transform whose work is in
/// [`Transform::transform_in_place`].
pub fn transform_via_in_place<T: Transform + ?Sized>(
    t: &T,
    mut msg: Message,
    out: &mut Vec<Message>,
) -> Result<(), TransformError> {
    match t.transform_in_place(&mut msg) {
        Some(Ok(InPlace::Keep)) => {
            out.push(msg);
            Ok(())
        }
        Some(Ok(InPlace::Drop)) => Ok(()),
        Some(Err(e)) => Err(e),
        None => Err(TransformError::failed(
            "transform_via_in_place on a transform without an in-place path",
        )),
    }
}

/// A predicate over messages, used by `meta_switch`, `meta_retry` and config tests.
pub trait Condition: Send + Sync + 'static {
    /// Whether the message satisfies the condition. Leaf conditions are false on ctrl.
    fn test(&self, msg: &Message) -> Result<bool, TransformError>;
}
