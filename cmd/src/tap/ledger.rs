//! What became of the records tap handed on, shard by shard: how many were delivered, and
//! where a consumer would resume each shard.
//!
//! Each record's messages carry the token of one [`AckTracker`] (a KPL aggregate's user
//! records share it, as the Lambda handler's do), so a record is delivered once every copy
//! of every one of its messages was delivered or dropped. The ledger keeps the trackers of
//! the records whose fate is not known yet, in shard order, and forgets a record once it
//! is known: memory follows what is in the pipeline, not what was read.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_engine::ack::{AckStatus, AckToken, AckTracker};

use super::seq_cmp;

/// The records handed on, by shard.
#[derive(Default)]
pub struct Ledger {
    shards: Mutex<BTreeMap<String, ShardLedger>>,
}

#[derive(Default)]
struct ShardLedger {
    /// Records handed on whose fate is not known yet, in order: sequence number, tracker.
    open: VecDeque<(String, Arc<AckTracker>)>,
    /// The last record handed on.
    last: Option<String>,
    delivered: u64,
    failed: u64,
    /// The earliest record that failed, and why.
    first_failed: Option<(String, String)>,
}

impl ShardLedger {
    /// Forgets the records whose fate is known, counting them.
    fn prune(&mut self) {
        let (delivered, failed, first_failed) = (
            &mut self.delivered,
            &mut self.failed,
            &mut self.first_failed,
        );
        self.open.retain(|(seq, t)| {
            if !t.is_done() && t.status() != AckStatus::Failed {
                return true;
            }
            if t.status() == AckStatus::Delivered {
                *delivered += 1;
                return false;
            }
            *failed += 1;
            if first_failed
                .as_ref()
                .is_none_or(|(f, _)| seq_cmp(seq, f).is_lt())
            {
                let why = t.failure_reason().unwrap_or_else(|| "not delivered".into());
                *first_failed = Some((seq.clone(), why));
            }
            // A failed record may still be held: its tracker is left to its last token.
            false
        });
    }
}

/// Where a consumer resumes a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// At this record (the first not known to be delivered).
    At(String),
    /// After this record (the last read; everything up to it was delivered).
    After(String),
}

/// What became of the records handed on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records handed on.
    pub read: u64,
    /// Of them, delivered (every message delivered or dropped).
    pub delivered: u64,
    /// Why the first record not delivered was not (`None` when all were).
    pub first_reason: Option<String>,
    /// Where each shard read resumes, by shard.
    pub resume: Vec<(String, Resume)>,
}

impl Summary {
    /// Records handed on and not known to be delivered.
    pub fn not_delivered(&self) -> u64 {
        self.read - self.delivered
    }

    /// `resume SHARD at sequence N, SHARD after sequence M` (nothing when no shard was read).
    pub fn resume_positions(&self) -> String {
        self.resume
            .iter()
            .map(|(shard, r)| match r {
                Resume::At(seq) => format!("{shard} at sequence {seq}"),
                Resume::After(seq) => format!("{shard} after sequence {seq}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Ledger {
    fn shards(&self) -> MutexGuard<'_, BTreeMap<String, ShardLedger>> {
        self.shards.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records of `shard` (their sequence numbers, in order) are handed on: the token each
    /// one's messages carry.
    pub fn hand_on<'a>(
        &self,
        shard: &str,
        sequence_numbers: impl IntoIterator<Item = &'a str>,
    ) -> Vec<AckToken> {
        let mut shards = self.shards();
        let ledger = shards.entry(shard.to_string()).or_default();
        ledger.prune();
        sequence_numbers
            .into_iter()
            .map(|seq| {
                let (tracker, token) = AckTracker::new();
                ledger.open.push_back((seq.to_string(), tracker));
                ledger.last = Some(seq.to_string());
                token
            })
            .collect()
    }

    /// What became of the records so far: a record whose fate is not known yet counts as
    /// not delivered (`not known to be delivered` is its reason when it is the first).
    pub fn summary(&self) -> Summary {
        let mut shards = self.shards();
        let mut s = Summary::default();
        let mut first: Option<(String, String)> = None;
        for (shard, ledger) in shards.iter_mut() {
            ledger.prune();
            let Some(last) = &ledger.last else { continue };
            s.read += ledger.delivered + ledger.failed + ledger.open.len() as u64;
            s.delivered += ledger.delivered;
            let pending = ledger
                .open
                .front()
                .map(|(seq, _)| (seq.clone(), "not known to be delivered".to_string()));
            let stop = [ledger.first_failed.clone(), pending]
                .into_iter()
                .flatten()
                .min_by(|a, b| seq_cmp(&a.0, &b.0));
            let resume = match stop {
                Some((seq, why)) => {
                    first.get_or_insert((shard.clone(), why));
                    Resume::At(seq)
                }
                None => Resume::After(last.clone()),
            };
            s.resume.push((shard.clone(), resume));
        }
        s.first_reason = first.map(|(_, why)| why);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shard_resumes_at_its_first_record_not_delivered_or_after_its_last() {
        let ledger = Ledger::default();
        let a = ledger.hand_on("shard-a", ["7", "8", "10"]);
        let b = ledger.hand_on("shard-b", ["5"]);
        assert_eq!(ledger.hand_on("shard-c", []).len(), 0);
        // shard-a: 7 delivered, 10 failed, 8 still held; shard-b: delivered.
        let [a7, a8, a10] = <[AckToken; 3]>::try_from(a).unwrap();
        drop(a7);
        a10.fail("refused");
        drop(a10);
        drop(b);
        let s = ledger.summary();
        assert_eq!((s.read, s.delivered, s.not_delivered()), (4, 2, 2));
        assert_eq!(s.first_reason.as_deref(), Some("not known to be delivered"));
        assert_eq!(
            s.resume_positions(),
            "shard-a at sequence 8, shard-b after sequence 5"
        );
        // 8 delivered: shard-a resumes at the failed one.
        drop(a8);
        let more = ledger.hand_on("shard-b", ["9"]);
        drop(more);
        let s = ledger.summary();
        assert_eq!((s.read, s.delivered), (5, 4));
        assert_eq!(s.first_reason.as_deref(), Some("refused"));
        assert_eq!(
            s.resume,
            [
                ("shard-a".to_string(), Resume::At("10".into())),
                ("shard-b".to_string(), Resume::After("9".into())),
            ]
        );
    }
}
