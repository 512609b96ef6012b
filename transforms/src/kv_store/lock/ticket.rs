//! The lock guarding one message, as the lock's acknowledgement tracker carries it (its
//! tag, see `sluice_engine::ack`), for the sends that message reaches.
//!
//! A send reads its items' tickets from their tokens ([`tickets`]) to do what only it can:
//! - `send_aws_kinesis_data_stream` reads the stream back for a record whose ticket says an
//!   earlier attempt may have delivered it ([`LockTicket::read_back_since`]: a takeover, or
//!   an uncertain failure of a send under this lock) before sending it again, and notes
//!   where each record landed ([`LockTicket::set_note`]), which the commit stores with the
//!   lock;
//! - `send_file` and `send_aws_s3` name a batch's object after its tickets' keys and first
//!   attempt ([`LockTicket::origin_ms`]), so a batch sent again replaces its object instead
//!   of adding another;
//! - `send_aws_dynamodb_put` (transactional) commits the lock in the same transaction as the
//!   message's items ([`LockTicket::mark_committed`]).
//!
//! A ticket lives as long as the tracker; what it holds is fixed when the key is taken,
//! except the note, the co-commit flag and whether a send may have delivered it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sluice_engine::ack::{AckSet, tags};

use super::LockStore;

/// The lock guarding one message (see the module documentation).
pub struct LockTicket {
    /// The lock key (prefix included).
    pub key: String,
    /// Epoch seconds: the TTL the lock gets when committed.
    pub ttl: i64,
    /// When this owner took the key (epoch ms).
    pub taken_ms: i64,
    /// Set when the key was pending before it was taken (another owner's lease ran out, or
    /// an earlier attempt of this owner failed uncertainly): since when (epoch ms) an
    /// earlier attempt may have delivered the message.
    pub prior_since_ms: Option<i64>,
    /// The store holding the lock.
    pub store: Arc<dyn LockStore>,
    /// The lock's owner name.
    pub owner: Arc<str>,
    committed: AtomicBool,
    maybe_delivered: AtomicBool,
    note: Mutex<Option<String>>,
}

impl LockTicket {
    /// A ticket for `owner`'s lock on `key`.
    pub fn new(
        key: String,
        ttl: i64,
        taken_ms: i64,
        prior_since_ms: Option<i64>,
        store: Arc<dyn LockStore>,
        owner: Arc<str>,
    ) -> LockTicket {
        LockTicket {
            key,
            ttl,
            taken_ms,
            prior_since_ms,
            store,
            owner,
            committed: AtomicBool::new(false),
            maybe_delivered: AtomicBool::new(false),
            note: Mutex::new(None),
        }
    }

    /// When the processing of this message began, the same for every attempt at it: the
    /// first attempt's acquisition time, which a takeover inherits.
    pub fn origin_ms(&self) -> i64 {
        self.prior_since_ms.unwrap_or(self.taken_ms)
    }

    /// Records that a send of this message failed in a way that may have delivered it
    /// (`SendError::uncertain`), so that a send trying again under this same lock checks
    /// first ([`LockTicket::read_back_since`]).
    pub fn mark_maybe_delivered(&self) {
        self.maybe_delivered.store(true, Ordering::Release);
    }

    /// Since when (epoch ms) an earlier attempt may have delivered the message, if one may
    /// have: the earlier owner's first attempt ([`LockTicket::prior_since_ms`]), else, after
    /// an uncertain failure under this lock, when this owner took the key.
    pub fn read_back_since(&self) -> Option<i64> {
        self.prior_since_ms.or_else(|| {
            self.maybe_delivered
                .load(Ordering::Acquire)
                .then_some(self.taken_ms)
        })
    }

    /// Records that a send committed the lock together with its own writes.
    pub fn mark_committed(&self) {
        self.committed.store(true, Ordering::Release);
    }

    /// Whether a send committed the lock already.
    pub fn is_committed(&self) -> bool {
        self.committed.load(Ordering::Acquire)
    }

    /// Notes where the message was delivered (kept with the committed lock).
    pub fn set_note(&self, note: String) {
        if let Ok(mut n) = self.note.lock() {
            *n = Some(note);
        }
    }

    /// What a send noted of the delivery.
    pub fn note(&self) -> Option<String> {
        self.note.lock().ok().and_then(|n| n.clone())
    }
}

impl std::fmt::Debug for LockTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockTicket")
            .field("key", &self.key)
            .field("owner", &self.owner)
            .field("taken_ms", &self.taken_ms)
            .field("prior_since_ms", &self.prior_since_ms)
            .field("committed", &self.is_committed())
            .finish_non_exhaustive()
    }
}

/// The lock tickets among a message's tokens (one per lock it went through).
pub fn tickets(acks: &AckSet) -> impl Iterator<Item = Arc<LockTicket>> + '_ {
    tags::<LockTicket>(acks)
}
