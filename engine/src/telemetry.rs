//! Typed internal events, after Vector's `internal_events`: a transform reports what it did
//! by emitting an event value, and the event decides what that means for the counters the
//! adapters publish (the Lambda function's metrics, `sluice run`'s summary) and for the
//! log. Nothing is counted in process globals: the counters live in the [`Telemetry`] of the
//! pipeline's [`crate::context::Context`], which the adapter reads after a run.

use std::sync::atomic::{AtomicU64, Ordering};

/// Something a transform did that the adapters count.
pub trait InternalEvent {
    /// Records the event in `telemetry` (and logs it, if it is worth a line).
    fn emit(self, telemetry: &Telemetry);
}

/// The counters of one pipeline.
#[derive(Debug, Default)]
pub struct Telemetry {
    duplicates_skipped: AtomicU64,
}

impl Telemetry {
    /// Records `event`.
    pub fn emit(&self, event: impl InternalEvent) {
        event.emit(self);
    }

    /// Messages a `meta_kv_store_lock` found already processed (or on their way), so far.
    pub fn duplicates_skipped(&self) -> u64 {
        self.duplicates_skipped.load(Ordering::Relaxed)
    }

    /// [`Telemetry::duplicates_skipped`], and starts counting again from 0 (the Lambda
    /// function reports each invocation's).
    pub fn take_duplicates_skipped(&self) -> u64 {
        self.duplicates_skipped.swap(0, Ordering::Relaxed)
    }
}

/// A lock found a message's key held: the message was processed before (or is on its way
/// elsewhere), and its inner transforms were skipped.
#[derive(Debug)]
pub struct DuplicateSkipped<'a> {
    /// The lock's id.
    pub lock: &'a str,
    /// The message's key.
    pub key: &'a str,
    /// Who holds the key, if the store said.
    pub holder: Option<&'a dyn std::fmt::Debug>,
}

impl InternalEvent for DuplicateSkipped<'_> {
    fn emit(self, telemetry: &Telemetry) {
        telemetry.duplicates_skipped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(lock = %self.lock, key = %self.key, holder = ?self.holder, "duplicate: the key is held");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_counted_and_taken() {
        let t = Telemetry::default();
        for key in ["a", "b"] {
            t.emit(DuplicateSkipped {
                lock: "lock",
                key,
                holder: None,
            });
        }
        assert_eq!(t.duplicates_skipped(), 2);
        assert_eq!(t.take_duplicates_skipped(), 2);
        assert_eq!(t.duplicates_skipped(), 0);
    }
}
