//! What `aggregate_to_array` and `aggregate_to_string` share: per-batch-key buffers of the
//! messages they consume, and the rules for turning a closed batch into one message.
//!
//! A buffered item is a copy of the input's data and acknowledgement tokens (no metadata,
//! as in Substation, whose aggregates emit no metadata). The message made from a batch
//! carries the tokens of all its inputs, so an input counts as delivered only once the
//! aggregate that holds it is. Batches come out in the order they were opened (Substation's
//! come out in random map order) and empty batches never produce a message (Substation can
//! emit empty messages for keys it saw earlier).

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use sluice_engine::batch::{Batch, BatchBuffer, BatchLimits};
use sluice_engine::settings::BatchSettings;
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, value};

/// Per-key buffers of consumed messages.
pub(crate) struct Buffers {
    batch_key: Option<Key>,
    state: Mutex<BatchBuffer<Message>>,
}

impl Buffers {
    /// Buffers with these limits, partitioned by `object.batch_key`.
    pub(crate) fn new(
        b: &Build<'_>,
        batch: BatchSettings,
        batch_key: &Option<String>,
    ) -> Result<Self, ConfigError> {
        Ok(Buffers {
            batch_key: b.opt_key("object.batch_key", batch_key)?,
            state: Mutex::new(BatchBuffer::new(BatchLimits::from(batch))),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BatchBuffer<Message>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Consumes a data message; returns the batches that closed.
    pub(crate) fn add(
        &self,
        msg: &Message,
        now: Instant,
    ) -> Result<Vec<Batch<Message>>, TransformError> {
        let key = match &self.batch_key {
            Some(k) => msg
                .get(k)
                .map(|v| value::to_text(&v).into_owned())
                .unwrap_or_default(),
            None => String::new(),
        };
        let data = msg.data().clone();
        let size = data.len();
        let mut held = Message::new(data);
        held.extend_acks(msg.acks());
        self.lock()
            .push(&key, held, size, now)
            .map_err(|e| TransformError::failed(e.to_string()))
    }

    /// Every open batch, oldest first.
    pub(crate) fn take_all(&self) -> Vec<Batch<Message>> {
        self.lock().take_all()
    }

    /// The batches that reached their maximum age by `now`.
    pub(crate) fn take_expired(&self, now: Instant) -> Vec<Batch<Message>> {
        self.lock().take_expired(now)
    }

    /// When the oldest batch expires.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.lock().deadline()
    }

    /// Drops every batch, marking the tokens of what it held failed.
    pub(crate) fn abort(&self, reason: &str) {
        let dropped = self.lock().take_all();
        for b in &dropped {
            for m in &b.items {
                m.fail_acks(reason);
            }
        }
    }
}

/// Gives `out` the tokens of every item of `batch`.
pub(crate) fn carry_acks(out: &mut Message, batch: &Batch<Message>) {
    for m in &batch.items {
        out.extend_acks(m.acks());
    }
}
