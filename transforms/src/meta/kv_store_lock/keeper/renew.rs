//! The renewal lane: keeps the leases of the keys this process still answers for, apart
//! from the commits, releases and abandonments, so that none of those holds a renewal up.
//!
//! Three kinds of key are renewed once a third of their lease is gone: a key whose message
//! is still on its way (a send holds it), a delivered key whose commit has not gone through
//! (the commit failed and waits for its retry, or its call hangs until its attempt times
//! out), and a key owed an abandonment that has not gone through: its progress (what some
//! sends delivered) lives only here until it does, and a takeover before would send those
//! copies again. Before this lane, a delivered key was never renewed, and every store call
//! waited for the one before it: a commit outage, or one commit held for its 5 s attempt
//! timeout, outlived a short lease, another worker took the delivered keys over, and a sink
//! that cannot be read back got the messages twice.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::kv_store::{LockStatus, LockTicket, RenewRequest, Settled, StoreError};

use super::{Entry, Owed, Resolved, Retry, Shared, TAKEN_OVER, sleep_until};

impl Entry {
    /// When this key's lease is to be renewed next (`None`: it is not renewed): a third of
    /// the way through it.
    fn renewal_due(&self) -> Option<Instant> {
        let lease = self.lease?;
        if self.lost || !matches!(self.owed, Owed::Lease | Owed::Commit | Owed::Abandon) {
            return None;
        }
        Some(self.lease_start + lease / 3)
    }
}

impl Shared {
    /// When the renewal lane has work next: the first renewal due, or, after a failed
    /// call, the end of its backoff when that is later.
    pub(super) fn next_renewal(&self) -> Option<Instant> {
        let retry = self
            .renew_retry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .at;
        let due = self
            .entries()
            .values()
            .filter_map(Entry::renewal_due)
            .min()?;
        Some(retry.map_or(due, |r| r.max(due)))
    }

    /// Renews the leases due now, in one call (unless a failed call's backoff still runs,
    /// and not `force`).
    pub(super) async fn renew_due(&self, force: bool) {
        let _lane = self.renewing.lock().await;
        self.take_resolved();
        let started = Instant::now();
        if !force
            && self
                .renew_retry
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .waiting(started)
        {
            return;
        }
        let now_ms = self.clock.now_ms();
        let mut requests = Vec::new();
        let mut tickets = Vec::new();
        {
            let entries = self.entries();
            for (key, e) in entries.iter() {
                let (Some(due), Some(lease)) = (e.renewal_due(), e.lease) else {
                    continue;
                };
                if due > started {
                    continue;
                }
                requests.push(RenewRequest {
                    key: key.clone(),
                    ttl: e.ticket.ttl,
                    lease_until_ms: now_ms + lease.as_millis() as i64,
                });
                tickets.push(e.ticket.clone());
            }
        }
        if requests.is_empty() {
            return;
        }
        let result = self
            .store
            .renew(&self.owner, &requests, self.concurrency)
            .await;
        let now = Instant::now();
        let mut entries = self.entries();
        self.apply_renewals(&mut entries, &requests, &tickets, result, started, now);
    }

    /// Records a renewal call's outcome for the entries it was made for (the same tickets:
    /// a key released and taken again meanwhile is a new entry, which this answer does not
    /// speak for).
    fn apply_renewals(
        &self,
        entries: &mut HashMap<String, Entry>,
        requests: &[RenewRequest],
        tickets: &[Arc<LockTicket>],
        result: Result<Vec<Settled>, StoreError>,
        started: Instant,
        now: Instant,
    ) {
        let (outcomes, error) = match result {
            Ok(o) => (o, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let mut failed = 0;
        for (i, (r, ticket)) in requests.iter().zip(tickets).enumerate() {
            let Some(en) = entries
                .get_mut(&r.key)
                .filter(|en| Arc::ptr_eq(&en.ticket, ticket) && en.renewal_due().is_some())
            else {
                continue;
            };
            match outcomes.get(i) {
                // The store failed, or did not answer for this key: tried again later.
                None => failed += 1,
                Some(Settled::Ok) => {
                    en.lease_start = started;
                    en.ticket.renewed(started, en.lease);
                    self.counts.renewed.fetch_add(1, Ordering::Relaxed);
                }
                // Committed by this owner meanwhile (its commit landed): nothing to keep
                // alive.
                Some(Settled::NotOwner(Some(rec)))
                    if *rec.owner == *self.owner && rec.status == LockStatus::Committed =>
                {
                    en.lease_start = started;
                }
                Some(Settled::NotOwner(rec)) => {
                    en.lost = true;
                    en.ticket.mark_lost();
                    self.counts.lost.fetch_add(1, Ordering::Relaxed);
                    let delivered = en.owed == Owed::Commit;
                    // This process itself, when a later copy of the message took the key
                    // again once this one's lease had ended.
                    let own = rec.as_ref().is_some_and(|r| *r.owner == *self.owner);
                    let holder = super::super::events::holder_text(rec.as_ref(), &self.owner);
                    tracing::warn!(
                        lock = %self.lock_id, key = %r.key, holder = %holder,
                        "{TAKEN_OVER}: the message {} (the store was unreachable for a whole lease; lengthen `lease`)",
                        match (delivered, own) {
                            (true, _) => "may have been processed twice",
                            (false, true) => "is not sent here any more: a later copy of it, in this process, took its key again",
                            (false, false) => "is not sent here any more: the other owner processes it",
                        }
                    );
                }
            }
        }
        let mut retry = self.renew_retry.lock().unwrap_or_else(|p| p.into_inner());
        if failed == 0 {
            *retry = Retry::default();
        } else {
            let attempts = retry.failed(now);
            drop(retry);
            let error = error.map_or_else(
                || "the store did not answer for every key".to_string(),
                |e| e.to_string(),
            );
            tracing::warn!(
                lock = %self.lock_id,
                keys = failed,
                attempts,
                error = %error,
                "lease renewal of lock keys failed; trying again"
            );
        }
    }
}

/// The renewal lane's loop: renews when a lease is a third gone or a failed renewal's
/// backoff ended, and works out its wake-up again when a key due sooner is tracked.
pub(super) async fn renew_loop(shared: Weak<Shared>, resolved: Arc<Resolved>) {
    loop {
        let due = match shared.upgrade() {
            Some(s) => s.next_renewal(),
            None => return,
        };
        *resolved
            .next_renewal
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = due;
        tokio::select! {
            _ = sleep_until(due) => {}
            _ = resolved.reschedule.notified() => continue,
        }
        let Some(s) = shared.upgrade() else { return };
        s.renew_due(false).await;
    }
}
