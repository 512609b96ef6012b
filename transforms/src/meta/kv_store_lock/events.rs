//! What the lock reports to the pipeline's telemetry ([`sluice_engine::telemetry`]): the
//! counter the adapters publish (the Lambda function's `DuplicatesSkipped` metric) and the
//! log line of each duplicate.

use sluice_engine::telemetry::{InternalEvent, Telemetry};

/// The counter of messages a lock found already processed (or on their way elsewhere), by
/// which the adapters read it.
pub(crate) const DUPLICATES_SKIPPED: &str = "duplicates_skipped";

/// A lock found a message's key held: the message was processed before (or is on its way
/// elsewhere), and its inner transforms were skipped.
#[derive(Debug)]
pub(crate) struct DuplicateSkipped<'a> {
    /// The lock's id.
    pub lock: &'a str,
    /// The message's key.
    pub key: &'a str,
    /// Who holds the key, if the store said.
    pub holder: Option<&'a dyn std::fmt::Debug>,
}

impl InternalEvent for DuplicateSkipped<'_> {
    fn emit(self, telemetry: &Telemetry) {
        telemetry.add(DUPLICATES_SKIPPED, 1);
        tracing::debug!(lock = %self.lock, key = %self.key, holder = ?self.holder, "duplicate: the key is held");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_counted_by_name() {
        let t = Telemetry::default();
        for key in ["a", "b"] {
            t.emit(DuplicateSkipped {
                lock: "lock",
                key,
                holder: None,
            });
        }
        assert_eq!(t.get(DUPLICATES_SKIPPED), 2);
        assert_eq!(t.take("duplicates_skipped"), 2);
        assert_eq!(t.get(DUPLICATES_SKIPPED), 0);
    }
}
