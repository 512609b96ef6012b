//! Lock stores: where `meta_kv_store_lock` keeps its locks.
//!
//! Three stores can hold locks: `aws_dynamodb` (shared between processes and machines),
//! `memory` (one process) and `sqlite` (an embedded database file: shared between the
//! processes of one machine and kept across runs, with no server). Each keeps one record
//! per key and applies the rules of `sluice-lock-protocol` to it: the record, what each
//! operation does, and when a record blocks another owner are defined there once, checked
//! by a model of the whole protocol, and tested here for every store by [`contract`].
//!
//! Times are passed in by the caller (`now_ms`), which keeps every store's conditions
//! testable without waiting.

#[cfg(any(test, feature = "test-support"))]
pub mod contract;
pub mod sqlite;
#[cfg(test)]
pub(crate) mod test_faulty;
pub mod ticket;

use sluice_engine::async_trait;
pub use sluice_lock_protocol::{
    AcquireRequest, Acquired, Change, LockRecord, LockStatus, Prior, Progress, Settled,
};

pub use ticket::LockTicket;

/// The stores of this family, which hold locks only, by their descriptors (`memory` and
/// `aws_dynamodb` hold items too: [`super::STORES`]).
pub(crate) const STORES: &[&super::stores::KvStoreInfo] = &[&sqlite::INFO];

/// A lock store's failure, after its own retries.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// One key to commit: its message was delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRequest {
    /// The lock key.
    pub key: String,
    /// Epoch seconds: how long the committed lock deduplicates.
    pub ttl: i64,
    /// What the send said of the delivery (e.g. a Kinesis shard and sequence number),
    /// kept with the committed lock for whoever traces the message.
    pub note: Option<String>,
}

/// One key whose lease to extend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewRequest {
    /// The lock key.
    pub key: String,
    /// Epoch seconds: the TTL the lock gets when committed (kept past the lease).
    pub ttl: i64,
    /// Epoch milliseconds: the new end of the lease.
    pub lease_until_ms: i64,
}

/// One key to abandon: its message may have been delivered, or was delivered by some sends
/// and not others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbandonRequest {
    /// The lock key.
    pub key: String,
    /// What this attempt delivered, added to the record's progress for the next taker.
    pub progress: Progress,
}

/// One key whose record's progress to add to while it stays held (its lease goes on): where
/// a send is about to place a copy of its message (see [`Progress::place`]).
pub type RecordRequest = AbandonRequest;

/// How far this host's clock is from a lock store's, as measured (ms, this host's less the
/// store's): somewhere between `lo_ms` and `hi_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// The least the offset can be.
    pub lo_ms: i64,
    /// The most it can be.
    pub hi_ms: i64,
}

/// Where locks are kept. Every method takes the owner (unique per lock instance and
/// process) and answers one result per key, in order; an `Err` of a whole call means the
/// store failed after its retries and nothing can be assumed about what it applied.
#[async_trait]
pub trait LockStore: std::any::Any + Send + Sync {
    /// A short description for logs and errors, e.g. `aws_dynamodb table locks`.
    fn describe(&self) -> String;

    /// Tries to take each key for `owner` (see `sluice_lock_protocol::acquire`), with at
    /// most `concurrency` store calls in flight. Keys in one call are distinct.
    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>>;

    /// Marks `owner`'s pending locks committed.
    async fn commit(
        &self,
        owner: &str,
        requests: &[CommitRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// Extends the leases of `owner`'s pending locks.
    async fn renew(
        &self,
        owner: &str,
        requests: &[RenewRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// Deletes `owner`'s pending locks: their messages were certainly not delivered.
    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// Ends the leases of `owner`'s pending locks and leaves them pending, with what each
    /// attempt delivered added to their progress: their messages may have been delivered,
    /// or were delivered by some sends, and whoever takes them next is told so.
    async fn abandon(
        &self,
        owner: &str,
        requests: &[AbandonRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// Adds each request's progress to `owner`'s pending lock, whose lease goes on
    /// (`sluice_lock_protocol::Change::Record`): a send records where it places a copy
    /// before it writes it.
    async fn record(
        &self,
        owner: &str,
        requests: &[RecordRequest],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError>;

    /// How far this host's clock is from the store's, when the store tells its time
    /// (DynamoDB's answers do) and an answer was seen.
    fn clock_offset(&self) -> Option<ClockOffset> {
        None
    }

    /// Makes sure [`LockStore::clock_offset`] has a measurement, with a call that changes
    /// nothing if none was made yet (a store that tells no time does nothing).
    async fn measure_clock(&self) {}
}
