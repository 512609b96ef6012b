//! What the lock reports to the pipeline's telemetry ([`sluice_engine::telemetry`]): the
//! counter the adapters publish (the Lambda function's `DuplicatesSkipped` metric) and the
//! log line of each duplicate.

use sluice_engine::telemetry::{InternalEvent, Telemetry};

use crate::kv_store::{LockRecord, LockStatus};

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
    pub holder: Option<&'a LockRecord>,
    /// The lock's owner (this process).
    pub owner: &'a str,
}

impl InternalEvent for DuplicateSkipped<'_> {
    fn emit(self, telemetry: &Telemetry) {
        telemetry.add(DUPLICATES_SKIPPED, 1);
        tracing::debug!(
            lock = %self.lock, key = %self.key,
            holder = %self.holder.map_or_else(|| "not told by the store".to_string(), |r| holder_text(Some(r), self.owner)),
            "duplicate: the key is held"
        );
    }
}

/// Who holds a key a renewal or a commit found taken, for a log line: its owner, "this
/// process", or that no record is left.
pub(crate) fn holder_text(rec: Option<&LockRecord>, owner: &str) -> String {
    match rec {
        Some(r) if *r.owner == *owner => format!("this process ({})", r.owner),
        Some(r) if r.status == LockStatus::Committed => format!("{} (committed)", r.owner),
        Some(r) => format!("{} (pending)", r.owner),
        None => "none (no record left)".to_string(),
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
                owner: "me",
            });
        }
        assert_eq!(t.get(DUPLICATES_SKIPPED), 2);
        assert_eq!(t.take("duplicates_skipped"), 2);
        assert_eq!(t.get(DUPLICATES_SKIPPED), 0);
    }

    #[test]
    fn the_holder_of_a_key_found_taken_is_named_in_words() {
        let rec = |owner: &str, status| LockRecord {
            owner: owner.into(),
            status,
            ttl: 0,
            since_ms: None,
            progress: Default::default(),
        };
        let pending = LockStatus::Pending { lease_until_ms: 0 };
        for (found, want) in [
            (Some(rec("me", pending)), "this process (me)"),
            (Some(rec("me", LockStatus::Committed)), "this process (me)"),
            (Some(rec("them", pending)), "them (pending)"),
            (Some(rec("them", LockStatus::Committed)), "them (committed)"),
            (None, "none (no record left)"),
        ] {
            assert_eq!(holder_text(found.as_ref(), "me"), want, "{found:?}");
        }
    }
}
