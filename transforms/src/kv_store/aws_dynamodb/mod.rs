//! The `aws_dynamodb` lock store: locks in a DynamoDB table, shared by every process and
//! machine that uses the table — the store for pipelines that run more than once at a
//! time (Lambda, several hosts). Its settings are Substation's (`aws.arn`,
//! `aws.assume_role_arn`, `attributes.*`), plus three attribute names of sluice's own lock
//! record; `reference/substation.md` §2.4 and §5.2 describe Substation's store.
//!
//! # The table
//!
//! Create it once, outside sluice:
//!
//! - partition key: type `S`, named as `attributes.partition_key`;
//! - sort key (optional): type `S`, named as `attributes.sort_key`; sluice always writes
//!   the value `substation:kv_store` there, as Substation does, so a table shared with
//!   Substation's kv store keeps working;
//! - TTL enabled on the `attributes.ttl` attribute (default `ttl`), so DynamoDB deletes old
//!   locks (lazily: every condition also compares the TTL with the current time, so a lock
//!   past its TTL never blocks, deleted or not);
//! - on-demand billing (`PAY_PER_REQUEST`), or provisioned capacity that covers the
//!   writes: per message, two write units to take its lock (one with `lock_acquire:
//!   'items'` or `'statements'`) and two to commit it (one with `'statements'`, which
//!   also reads a unit per message).
//!
//! ```text
//! aws dynamodb create-table --table-name sluice-locks --billing-mode PAY_PER_REQUEST \
//!   --attribute-definitions AttributeName=PK,AttributeType=S \
//!   --key-schema AttributeName=PK,KeyType=HASH
//! aws dynamodb update-time-to-live --table-name sluice-locks \
//!   --time-to-live-specification Enabled=true,AttributeName=ttl
//! ```
//!
//! # What it writes
//!
//! One item per lock key: the partition key (the lock key, prefix included; the lock makes
//! every key fit DynamoDB's 2,048 bytes, `meta/kv_store_lock/keys.rs`), the sort key
//! when configured, `ttl` (epoch seconds, number), and sluice's lock attributes, named in
//! the same `attributes` object: `owner` (default `lock_owner`, string), `status` (default
//! `lock_status`: `pending` or `committed`), `lease_until` (default `lock_lease_until`,
//! epoch milliseconds, number; pending locks only), `since` (default `lock_since`, epoch
//! milliseconds; pending locks only: when the first attempt at the message began) and
//! `note` (default `lock_note`; committed locks: where the send delivered the message,
//! when it says). An item without a status (a lock taken by Substation) counts as
//! committed. The rules are `sluice_lock_protocol`'s, written as condition expressions:
//!
//! - Acquire, by default (`lock_acquire: 'transactions'`): `TransactWriteItems` of up to
//!   100 conditional `Update`s (up to `concurrency` in flight), each taking a key that is
//!   absent or committed and past its TTL. A held key cancels its transaction; the
//!   cancellation reasons name the held keys with their items (who holds them), and the
//!   transaction is sent again without them. A key pending with an expired lease or under
//!   the same owner is then taken alone, as below, so that its old item says it was a
//!   takeover. One call per 100 keys instead of one per key, at two write units per key
//!   instead of one: DynamoDB bills a transactional write twice.
//! - Acquire with `lock_acquire: 'items'`: a conditional `UpdateItem` per key (up to
//!   `concurrency` in flight), which succeeds when the key is absent, committed and past
//!   its TTL, or pending with an expired lease or under the same owner, and keeps `since`
//!   across a takeover; the old item comes back (`ALL_OLD`) either way, telling a takeover
//!   from a fresh key, or who holds it (logged at debug level).
//! - Acquire with `lock_acquire: 'statements'` (`statements/`): a strongly consistent
//!   `BatchGetItem` of up to 100 keys, then PartiQL `BatchExecuteStatement`s of up to 25
//!   single-item writes (four calls in flight per 100 keys): an `INSERT` for an absent
//!   key, a conditional `UPDATE` for a committed one past its TTL; a key the read found
//!   held is answered with the record read, a pending one this owner may take is taken
//!   alone, as above. The read is left out while few keys exist (`first_read.rs`): every
//!   key is then written as if read absent. One write unit per key taken and one read
//!   unit per key read, a duplicate only the read. Commits are `UPDATE` statements on the same condition as
//!   below (one write unit); one whose condition failed is read back. `UPDATE`s are
//!   written in AWS's documented form, or in comma lists where the service refuses it
//!   (`dialect.rs`).
//! - Commit: `TransactWriteItems` of up to 100 conditional `Update`s (status `committed`,
//!   the final TTL, lease and `since` removed, only where the owner is ours and the status
//!   pending): one call per 100 messages. A key that is not ours any more is reported with
//!   its holder's item and the rest of its transaction is sent again.
//! - Renew, release and abandon: the same, with `Update`s of the lease, `Delete`s, and
//!   `Update`s that end the lease.
//!
//! Throttling, 5xx and network errors are retried by the SDK (see [`sluice_platform::aws`]);
//! transaction conflicts and throttling reported inside a cancelled transaction are
//! retried here, with exponential backoff and jitter, a bounded number of times. What
//! still fails is an error naming the table and the key.
//!
//! # Permissions
//!
//! `dynamodb:UpdateItem` and `dynamodb:DeleteItem` on the table (a transaction needs the
//! permissions of the writes it contains; the item kv store also needs `dynamodb:PutItem`
//! and `dynamodb:GetItem`; `lock_acquire: 'statements'` also `dynamodb:BatchGetItem`,
//! `dynamodb:PartiQLInsert` and `dynamodb:PartiQLUpdate`); `sts:AssumeRole` on
//! `aws.assume_role_arn` when set.
//!
//! # Connecting
//!
//! The region comes from the table ARN (a bare table name uses `AWS_REGION`), credentials
//! and the endpoint from the SDK's default chains; `AWS_ENDPOINT_URL_DYNAMODB` points the
//! store at a local emulator (`scripts/emulators.sh`). The client is made on first use.

#[cfg(test)]
mod acquire_tests;
mod clock;
mod dialect;
#[cfg(test)]
mod epoch_tests;
mod epochs;
mod first_read;
pub use first_read::FirstReadRule;
mod item;
mod lock;
#[cfg(test)]
mod statement_tests;
mod statements;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, ConsumedCapacity, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use serde::Deserialize;
use sluice_engine::{ConfigError, Value};
use tokio::sync::OnceCell;

pub use lock::Cancel;

use super::{KvPlace, LockRecord, LockStatus, LockTicket, Progress, StoreError};
use sluice_platform::aws::{AwsSettings, AwsTarget, check_role, non_empty, parse_dynamodb_table};

/// The sort key's value when a sort key is configured (Substation's constant).
pub const SORT_KEY_VALUE: &str = "substation:kv_store";
const PENDING: &str = "pending";
const COMMITTED: &str = "committed";
/// The status of a key pending in an epoch (`lock_acquire: 'epochs'`, `epochs.rs`): a
/// status of its own, so that no process of the other modes takes it over or commits it
/// without its epoch.
const EPOCH: &str = "epoch";

/// The settings, as Substation spells them.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Settings {
    aws: AwsSettings,
    attributes: AttributeSettings,
    /// Strongly consistent item reads (`enrich_kv_store_item_get`); lock operations are
    /// writes, which are always consistent.
    consistent_read: Option<bool>,
    /// How locks are taken: `transactions` (the default), `items` or `statements`
    /// ([`AcquireMode`]).
    lock_acquire: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AttributeSettings {
    partition_key: Option<String>,
    sort_key: Option<String>,
    ttl: Option<String>,
    /// Where an item's value is kept (items only; locks have none).
    value: Option<String>,
    owner: Option<String>,
    status: Option<String>,
    lease_until: Option<String>,
    since: Option<String>,
    note: Option<String>,
    progress: Option<String>,
}

/// The attribute names of a lock item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Attributes {
    pub(super) partition_key: String,
    pub(super) sort_key: Option<String>,
    pub(super) ttl: String,
    pub(super) value: Option<String>,
    pub(super) owner: String,
    pub(super) status: String,
    pub(super) lease_until: String,
    pub(super) since: String,
    pub(super) note: String,
    pub(super) progress: String,
}

/// How the store takes locks: the trade between DynamoDB calls and write units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AcquireMode {
    /// `TransactWriteItems` of up to 100 conditional updates: one call per 100 keys, two
    /// write units per key (DynamoDB bills transactional writes twice). A transaction that a
    /// held key cancels is sent again without it.
    Transactions,
    /// One conditional `UpdateItem` per key: one write unit per key, one call per key.
    Items,
    /// A strongly consistent `BatchGetItem` of up to 100 keys (while enough keys exist:
    /// `first_read.rs`), then PartiQL `BatchExecuteStatement`s of up to 25 single-item
    /// conditional writes (one write unit each) for the keys it found free; commits the
    /// same way (`statements/commit.rs`).
    Statements,
    /// As `Statements`, with each piece's keys written pending in an epoch and committed
    /// with one `UpdateItem` of the epoch's record (`epochs.rs`).
    Epochs,
}

impl AcquireMode {
    /// Whether keys are taken with a read, then PartiQL statements.
    pub(super) fn statements(self) -> bool {
        matches!(self, AcquireMode::Statements | AcquireMode::Epochs)
    }
}

/// Where the locks are and how they are spelled: the decoded settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Table {
    pub(super) name: String,
    /// From the ARN.
    pub(super) region: Option<String>,
    pub(super) assume_role_arn: Option<String>,
    pub(super) attributes: Attributes,
    pub(super) consistent_read: bool,
    pub(super) acquire: AcquireMode,
}

/// A settings error: the field (below the store's settings) and what is wrong.
type FieldError = (String, String);

impl Table {
    fn from_settings(s: Settings) -> Result<Table, FieldError> {
        let err = |f: &str, m: String| (f.to_string(), m);
        let arn = non_empty(s.aws.arn).ok_or_else(|| {
            err(
                "aws.arn",
                "missing required option: the lock table's ARN \
                 (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME) or its name"
                    .into(),
            )
        })?;
        let (name, region) = parse_dynamodb_table(&arn).map_err(|m| err("aws.arn", m))?;
        let assume_role_arn = non_empty(s.aws.assume_role_arn);
        check_role(&assume_role_arn).map_err(|m| err("aws.assume_role_arn", m))?;
        let a = s.attributes;
        let partition_key = non_empty(a.partition_key).ok_or_else(|| {
            err(
                "attributes.partition_key",
                "missing required option: the name of the table's partition key attribute".into(),
            )
        })?;
        let attributes = Attributes {
            partition_key,
            sort_key: non_empty(a.sort_key),
            ttl: non_empty(a.ttl).unwrap_or_else(|| "ttl".into()),
            value: non_empty(a.value),
            owner: non_empty(a.owner).unwrap_or_else(|| "lock_owner".into()),
            status: non_empty(a.status).unwrap_or_else(|| "lock_status".into()),
            lease_until: non_empty(a.lease_until).unwrap_or_else(|| "lock_lease_until".into()),
            since: non_empty(a.since).unwrap_or_else(|| "lock_since".into()),
            note: non_empty(a.note).unwrap_or_else(|| "lock_note".into()),
            progress: non_empty(a.progress).unwrap_or_else(|| "lock_progress".into()),
        };
        // Two roles in one attribute would overwrite each other.
        let named = [
            ("partition_key", Some(&attributes.partition_key)),
            ("sort_key", attributes.sort_key.as_ref()),
            ("ttl", Some(&attributes.ttl)),
            ("value", attributes.value.as_ref()),
            ("owner", Some(&attributes.owner)),
            ("status", Some(&attributes.status)),
            ("lease_until", Some(&attributes.lease_until)),
            ("since", Some(&attributes.since)),
            ("note", Some(&attributes.note)),
            ("progress", Some(&attributes.progress)),
        ];
        for (i, (field, name)) in named.iter().enumerate() {
            let Some(name) = name else { continue };
            if let Some((other, _)) = named[..i].iter().find(|(_, n)| *n == Some(*name)) {
                return Err(err(
                    &format!("attributes.{field}"),
                    format!("attribute name {name:?} is also used by attributes.{other}"),
                ));
            }
        }
        let acquire = match s.lock_acquire.as_deref() {
            None | Some("transactions") => AcquireMode::Transactions,
            Some("items") => AcquireMode::Items,
            Some("statements") => AcquireMode::Statements,
            Some("epochs") => AcquireMode::Epochs,
            Some(other) => {
                return Err(err(
                    "lock_acquire",
                    format!(
                        "{other:?} is not a way to take locks: use \"transactions\" (TransactWriteItems of up to 100 keys, 2 write units per key), \"items\" (one UpdateItem per key, 1 write unit), \"statements\" (a consistent BatchGetItem, then BatchExecuteStatement of up to 25 keys, 1 read and 1 write unit per key) or \"epochs\" (as statements, committing each piece of up to 100 keys with one write)"
                    ),
                ));
            }
        };
        // PartiQL statements name attributes between quotes, and parameters cannot name
        // them: a name with a quote in it cannot be written there.
        if acquire.statements()
            && let Some((field, name)) = named
                .iter()
                .filter_map(|(f, n)| n.map(|n| (f, n)))
                .find(|(_, n)| n.contains(['"', '\'']) || n.chars().any(char::is_control))
        {
            return Err(err(
                &format!("attributes.{field}"),
                format!(
                    "attribute name {name:?} has a quote or control character, which lock_acquire \"statements\" and \"epochs\" cannot write in a PartiQL statement"
                ),
            ));
        }
        Ok(Table {
            name,
            region,
            assume_role_arn,
            attributes,
            consistent_read: s.consistent_read.unwrap_or(false),
            acquire,
        })
    }
}

/// The DynamoDB table behind a lock store, when it is one: a DynamoDB send can then
/// record its deliveries in the same transaction as its items.
pub fn table_of(store: &dyn super::LockStore) -> Option<&DynamoDbStore> {
    (store as &dyn std::any::Any).downcast_ref()
}

/// Locks in a DynamoDB table (see the module documentation).
pub struct DynamoDbStore {
    pub(super) table: Table,
    target: AwsTarget,
    client: OnceCell<Client>,
    /// This host's clock against the table's, from the answers' `Date` headers.
    clock: Arc<clock::StoreClock>,
    /// The capacity units DynamoDB reported for the lock's calls.
    consumed: Consumed,
    /// How `lock_acquire: 'statements'` writes its `UPDATE`s (`dialect.rs`).
    dialect: dialect::Dialect,
    /// What `lock_acquire: 'epochs'` knows of its owners' open epochs (`epochs.rs`).
    epochs: epochs::Ledger,
    /// The texts of the acquisitions' statements, made on first use (`statements/`).
    texts: [std::sync::OnceLock<String>; 8],
    /// Whether statement acquisitions read their keys before writing them (`first_read.rs`).
    first_read: first_read::FirstRead,
}

/// Capacity units, as DynamoDB reports them (`ReturnConsumedCapacity`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Units {
    /// Read units.
    pub read: f64,
    /// Write units.
    pub write: f64,
}

/// What [`DynamoDbStore::consumed_units`] adds up, in thousandths of a unit.
#[derive(Debug, Default)]
struct Consumed {
    read: AtomicU64,
    write: AtomicU64,
}

impl std::fmt::Debug for DynamoDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoDbStore")
            .field("table", &self.table)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// The store configured by `settings` for the `enrich_kv_store_*` transforms, which must
/// name the attribute that holds an item's value (its descriptor's item constructor:
/// [`super::AWS_DYNAMODB`]).
pub(crate) fn items(
    place: &KvPlace<'_, '_>,
    settings: &Value,
) -> Result<Arc<dyn super::item::ItemStore>, ConfigError> {
    let st = DynamoDbStore::shared(place, settings)?;
    if st.table.attributes.value.is_none() {
        return Err(place.error(
            "attributes.value",
            "missing required option: the attribute that holds an item's value",
        ));
    }
    Ok(st)
}

impl DynamoDbStore {
    /// The store configured by `settings` (a kv store's `settings` object), shared with
    /// every other lock configured with the same table and attributes in this scope.
    pub fn shared(
        place: &KvPlace<'_, '_>,
        settings: &Value,
    ) -> Result<Arc<DynamoDbStore>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let table = Table::from_settings(s).map_err(|(f, m)| place.error(&f, m))?;
        place.shared(format!("aws_dynamodb:{table:?}"), || {
            Ok(DynamoDbStore::new(table))
        })
    }

    /// A store from a kv store's `settings` object, outside a config build (tests, tools).
    /// Errors name the field as `kv_store.settings.FIELD`; unknown settings are ignored.
    pub fn from_settings(settings: &Value) -> Result<DynamoDbStore, String> {
        let (s, _unknown) = sluice_engine::settings::decode::<Settings>(&settings.clone().into())
            .map_err(|(f, m)| field_message(&f, &m))?;
        let table = Table::from_settings(s).map_err(|(f, m)| field_message(&f, &m))?;
        Ok(DynamoDbStore::new(table))
    }

    fn new(table: Table) -> DynamoDbStore {
        let target = AwsTarget {
            region: table.region.clone(),
            assume_role_arn: table.assume_role_arn.clone(),
            ..Default::default()
        };
        DynamoDbStore {
            table,
            target,
            client: OnceCell::new(),
            clock: Arc::default(),
            consumed: Consumed::default(),
            dialect: dialect::Dialect::default(),
            epochs: epochs::Ledger::default(),
            texts: Default::default(),
            first_read: Default::default(),
        }
    }

    /// The capacity units DynamoDB reported consumed by this store's acquisitions and
    /// commits so far (every call asks for them: `ReturnConsumedCapacity: TOTAL`). Only
    /// answers that succeed report them: a condition that failed alone (`UpdateItem`) or
    /// a cancelled transaction is billed but reports nothing; a failed statement of a
    /// `BatchExecuteStatement` is counted in its call's total.
    pub fn consumed_units(&self) -> Units {
        let units = |n: &AtomicU64| n.load(Ordering::Relaxed) as f64 / 1000.0;
        Units {
            read: units(&self.consumed.read),
            write: units(&self.consumed.write),
        }
    }

    /// Adds what one call reported to [`Self::consumed_units`], and logs it at debug
    /// level.
    pub(super) fn count_units<'a>(
        &self,
        call: &'static str,
        write: bool,
        reported: impl IntoIterator<Item = &'a ConsumedCapacity>,
    ) {
        let units: f64 = reported
            .into_iter()
            .filter_map(ConsumedCapacity::capacity_units)
            .sum();
        if units <= 0.0 {
            return;
        }
        let counter = match write {
            true => &self.consumed.write,
            false => &self.consumed.read,
        };
        counter.fetch_add((units * 1000.0).round() as u64, Ordering::Relaxed);
        tracing::debug!(table = %self.table.name, call, units, write, "lock store capacity consumed");
    }

    /// Connects to a local DynamoDB emulator at `endpoint_url` with placeholder
    /// credentials (`test`/`test`), and region `us-east-1` unless the ARN names one,
    /// whatever the environment says. For tests and local experiments.
    pub fn with_local_endpoint(mut self, endpoint_url: impl Into<String>) -> DynamoDbStore {
        self.target.endpoint_url = Some(endpoint_url.into());
        self.target.static_credentials = Some(("test".into(), "test".into()));
        if self.target.region.is_none() {
            self.target.region = Some("us-east-1".into());
        }
        self.client = OnceCell::new();
        self
    }

    /// Reads a piece's keys before writing them as `rule` says, rather than as the share
    /// of keys that exist makes cheaper (`lock_acquire: 'statements'` and `'epochs'`; for
    /// tests of each path).
    pub fn with_first_read(mut self, rule: FirstReadRule) -> DynamoDbStore {
        self.first_read.rule = rule;
        self
    }

    /// Uses `client` instead of making one (tests with mocked responses, or an
    /// application that configures its own client).
    pub fn with_client(mut self, client: Client) -> DynamoDbStore {
        self.client = OnceCell::new_with(Some(client));
        self
    }

    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.table.name
    }

    /// The table's region, when its ARN names one.
    pub fn region(&self) -> Option<&str> {
        self.table.region.as_deref()
    }

    /// The transaction write that records, with other writes, that a send delivered
    /// `progress` of the message guarded by `ticket` (`send_aws_dynamodb_put`'s
    /// transactional mode): added to the lock's progress, conditional on the owner's
    /// pending lock, so that a lock another owner took over cancels the transaction. The
    /// lock is committed later, when every send of the message delivered it; a crash in
    /// between leaves the progress for the next taker, who then skips this send.
    pub fn co_progress_write(
        &self,
        ticket: &LockTicket,
        progress: &Progress,
    ) -> Result<TransactWriteItem, StoreError> {
        let a = &self.table.attributes;
        let what = || format!("recording progress of key {:?}", ticket.key);
        if progress.is_empty() {
            // Nothing to record (DynamoDB takes no empty set): the owner's lock is still
            // checked, so that a takeover cancels the transaction.
            return epochs::owned_by!(
                ConditionCheck::builder()
                    .table_name(&self.table.name)
                    .set_key(Some(self.key(&ticket.key))),
                self.owned(&ticket.owner, &ticket.key)
            )
            .expression_attribute_names("#owner", &a.owner)
            .expression_attribute_names("#status", &a.status)
            .expression_attribute_values(":me", AttributeValue::S(ticket.owner.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map(|c| TransactWriteItem::builder().condition_check(c).build())
            .map_err(|e| self.fail(&what(), e));
        }
        epochs::owned_by!(
            Update::builder()
                .table_name(&self.table.name)
                .set_key(Some(self.key(&ticket.key)))
                .update_expression("ADD #progress :progress"),
            self.owned(&ticket.owner, &ticket.key)
        )
        .expression_attribute_names("#owner", &a.owner)
        .expression_attribute_names("#status", &a.status)
        .expression_attribute_names("#progress", &a.progress)
        .expression_attribute_values(":me", AttributeValue::S(ticket.owner.to_string()))
        .expression_attribute_values(":progress", AttributeValue::Ss(progress.entries()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .map(|u| TransactWriteItem::builder().update(u).build())
        .map_err(|e| self.fail(&what(), e))
    }

    /// Reads the holder of a lock out of the item a cancelled transaction returned.
    pub fn holder(&self, item: &HashMap<String, AttributeValue>) -> LockRecord {
        self.decode(item)
    }

    pub(super) async fn client(&self) -> Result<&Client, StoreError> {
        self.client
            .get_or_try_init(|| async {
                let conf = sluice_platform::aws::load(&self.target).await;
                if conf.region().is_none() {
                    return Err(self.fail(
                        "connecting",
                        "no AWS region: give the table's ARN in aws.arn or set AWS_REGION",
                    ));
                }
                let mut b = aws_sdk_dynamodb::config::Builder::from(&conf)
                    .interceptor(clock::ClockWatch(self.clock.clone()));
                if let Some(url) = &self.target.endpoint_url {
                    // Explicit, so that it wins over AWS_ENDPOINT_URL_DYNAMODB.
                    b = b.endpoint_url(url);
                }
                Ok(Client::from_conf(b.build()))
            })
            .await
    }

    pub(super) fn fail(&self, what: &str, why: impl std::fmt::Display) -> StoreError {
        StoreError(format!(
            "aws_dynamodb table {}: {what}: {why}",
            self.table.name
        ))
    }

    pub(super) fn sdk_fail<E>(
        &self,
        what: &str,
        err: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
    ) -> StoreError
    where
        E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    {
        self.fail(what, sluice_platform::aws::describe_error(err))
    }

    /// The item key of lock `key`.
    pub(super) fn key(&self, key: &str) -> HashMap<String, AttributeValue> {
        let a = &self.table.attributes;
        let mut k = HashMap::with_capacity(2);
        k.insert(a.partition_key.clone(), AttributeValue::S(key.to_string()));
        if let Some(sk) = &a.sort_key {
            k.insert(sk.clone(), AttributeValue::S(SORT_KEY_VALUE.to_string()));
        }
        k
    }

    /// Reads a lock record out of an item (an item without a status is a lock taken by
    /// Substation: committed; a missing TTL or lease never expires, as in the conditions).
    /// A key pending in an epoch reads as pending with a lease that never ends: only
    /// `epochs.rs` (`decode_key`) knows whether its epoch committed it, so to everything
    /// else it blocks until its TTL passes.
    pub(super) fn decode(&self, item: &HashMap<String, AttributeValue>) -> LockRecord {
        let a = &self.table.attributes;
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        let number = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_n().ok())
                .map(|n| parse_number(n))
        };
        let status = match text(&a.status).as_deref() {
            Some(PENDING) => LockStatus::Pending {
                lease_until_ms: number(&a.lease_until).unwrap_or(i64::MAX),
            },
            Some(EPOCH) => LockStatus::Pending {
                lease_until_ms: i64::MAX,
            },
            _ => LockStatus::Committed,
        };
        // A string set as this store writes it; a list of strings is read too.
        let progress = match item.get(&a.progress) {
            Some(AttributeValue::Ss(entries)) => Progress::from_entries(entries),
            Some(AttributeValue::L(list)) => {
                Progress::from_entries(list.iter().filter_map(|v| v.as_s().ok()))
            }
            _ => Progress::default(),
        };
        LockRecord {
            owner: text(&a.owner).unwrap_or_default(),
            status,
            ttl: number(&a.ttl).unwrap_or(i64::MAX),
            since_ms: number(&a.since),
            progress,
        }
    }
}

fn field_message(field: &str, message: &str) -> String {
    if field.is_empty() {
        format!("kv_store.settings: {message}")
    } else {
        format!("kv_store.settings.{field}: {message}")
    }
}

pub(super) fn number(n: i64) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

/// A DynamoDB number as an integer (fractions truncated; nonsense is 0).
pub(super) fn parse_number(n: &str) -> i64 {
    n.parse::<i64>()
        .or_else(|_| n.parse::<f64>().map(|f| f as i64))
        .unwrap_or(0)
}
