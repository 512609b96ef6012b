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
//! - on-demand billing (`PAY_PER_REQUEST`), or provisioned capacity that covers one write
//!   per message and two per hundred messages at checkpoints.
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
//! One item per lock key: the partition key (the lock key, prefix included), the sort key
//! when configured, `ttl` (epoch seconds, number), and sluice's lock attributes, named in
//! the same `attributes` object: `owner` (default `lock_owner`, string), `status` (default
//! `lock_status`: `pending` or `committed`) and `lease_until` (default `lock_lease_until`,
//! epoch milliseconds, number; pending locks only). An item without a status (a lock taken
//! by Substation) counts as committed.
//!
//! - Acquire: a conditional `PutItem` per key (up to `concurrency` in flight), which
//!   succeeds when the key is absent, its TTL has passed, or it is pending with an expired
//!   lease; when it fails, DynamoDB returns the holder's item (`ALL_OLD`), which is logged
//!   at debug level.
//! - Commit: `TransactWriteItems` of up to 100 conditional `Update`s (status `committed`,
//!   lease removed, only where the owner is ours and the status pending): one call per 100
//!   messages. A key that is not ours any more is reported with its holder's item and the
//!   rest of its transaction is sent again.
//! - Release: the same, with conditional `Delete`s.
//!
//! Throttling, 5xx and network errors are retried by the SDK (see [`crate::aws`]);
//! transaction conflicts and throttling reported inside a cancelled transaction are
//! retried here, with exponential backoff and jitter, a bounded number of times. What
//! still fails is an error naming the table and the key.
//!
//! # Permissions
//!
//! `dynamodb:PutItem`, `dynamodb:UpdateItem` and `dynamodb:DeleteItem` on the table (a
//! transaction needs the permissions of the writes it contains); `sts:AssumeRole` on
//! `aws.assume_role_arn` when set.
//!
//! # Connecting
//!
//! The region comes from the table ARN (a bare table name uses `AWS_REGION`), credentials
//! and the endpoint from the SDK's default chains; `AWS_ENDPOINT_URL_DYNAMODB` points the
//! store at a local emulator (`scripts/emulators.sh`). The client is made on first use.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, Delete, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use futures::stream::{self, StreamExt};
use serde::Deserialize;
use sluice_engine::{ConfigError, Value};
use tokio::sync::OnceCell;

use super::{
    AcquireRequest, Acquired, KvPlace, LockRecord, LockStatus, LockStore, Settled, StoreError,
};
use crate::aws::{AwsSettings, AwsTarget, check_role, non_empty, parse_dynamodb_table};

/// The sort key's value when a sort key is configured (Substation's constant).
pub const SORT_KEY_VALUE: &str = "substation:kv_store";
/// The most writes one `TransactWriteItems` call may hold.
const TRANSACTION_MAX: usize = 100;
/// Attempts of this store's own retry loops (cancelled transactions, transaction
/// conflicts on a put); the SDK's retries of each call come on top.
const STORE_ATTEMPTS: u32 = 8;
const PENDING: &str = "pending";
const COMMITTED: &str = "committed";

/// The settings, as Substation spells them.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Settings {
    aws: AwsSettings,
    attributes: AttributeSettings,
    /// Strongly consistent item reads (`enrich_kv_store_item_get`); lock operations are
    /// writes, which are always consistent.
    consistent_read: Option<bool>,
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
        Ok(Table {
            name,
            region,
            assume_role_arn,
            attributes,
            consistent_read: s.consistent_read.unwrap_or(false),
        })
    }
}

/// Locks in a DynamoDB table (see the module documentation).
pub struct DynamoDbStore {
    pub(super) table: Table,
    target: AwsTarget,
    client: OnceCell<Client>,
}

impl std::fmt::Debug for DynamoDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoDbStore")
            .field("table", &self.table)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
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
        super::shared(format!("aws_dynamodb:{table:?}"), || {
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
        }
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

    /// The transaction write that commits `owner`'s lock on `key` together with other
    /// writes (`send_aws_dynamodb_put`'s transactional mode): conditional on the owner
    /// only, so that committing a key twice (a message whose items took two transactions)
    /// is harmless, while a lock another owner took over cancels the transaction.
    pub fn co_commit_write(&self, owner: &str, key: &str) -> Result<TransactWriteItem, StoreError> {
        let a = &self.table.attributes;
        Update::builder()
            .table_name(&self.table.name)
            .set_key(Some(self.key(key)))
            .update_expression("SET #status = :committed REMOVE #lease")
            .condition_expression("#owner = :me")
            .expression_attribute_names("#owner", &a.owner)
            .expression_attribute_names("#status", &a.status)
            .expression_attribute_names("#lease", &a.lease_until)
            .expression_attribute_values(":me", AttributeValue::S(owner.to_string()))
            .expression_attribute_values(":committed", AttributeValue::S(COMMITTED.into()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map(|u| TransactWriteItem::builder().update(u).build())
            .map_err(|e| self.fail(&format!("committing key {key:?}"), e))
    }

    /// Reads the holder of a lock out of the item a cancelled transaction returned.
    pub fn holder(&self, item: &HashMap<String, AttributeValue>) -> LockRecord {
        self.decode(item)
    }

    pub(super) async fn client(&self) -> Result<&Client, StoreError> {
        self.client
            .get_or_try_init(|| async {
                let conf = crate::aws::load(&self.target).await;
                if conf.region().is_none() {
                    return Err(self.fail(
                        "connecting",
                        "no AWS region: give the table's ARN in aws.arn or set AWS_REGION",
                    ));
                }
                let mut b = aws_sdk_dynamodb::config::Builder::from(&conf);
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

    pub(super) fn sdk_fail<E, R>(&self, what: &str, err: &SdkError<E, R>) -> StoreError
    where
        E: std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        self.fail(what, DisplayErrorContext(err))
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
    fn decode(&self, item: &HashMap<String, AttributeValue>) -> LockRecord {
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
            _ => LockStatus::Committed,
        };
        LockRecord {
            owner: text(&a.owner).unwrap_or_default(),
            status,
            ttl: number(&a.ttl).unwrap_or(i64::MAX),
        }
    }

    async fn acquire_one(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
    ) -> Result<Acquired, StoreError> {
        let a = &self.table.attributes;
        let mut item = self.key(&r.key);
        item.insert(a.ttl.clone(), number(r.ttl));
        item.insert(a.owner.clone(), AttributeValue::S(owner.to_string()));
        item.insert(a.status.clone(), AttributeValue::S(PENDING.into()));
        item.insert(a.lease_until.clone(), number(r.lease_until_ms));
        let mut attempt = 0;
        loop {
            let attempts = AttemptCounter::default();
            let sent = client
                .put_item()
                .table_name(&self.table.name)
                .set_item(Some(item.clone()))
                .condition_expression(
                    "attribute_not_exists(#pk) OR #ttl <= :now_s \
                     OR (#status = :pending AND #lease < :now_ms)",
                )
                .expression_attribute_names("#pk", &a.partition_key)
                .expression_attribute_names("#ttl", &a.ttl)
                .expression_attribute_names("#status", &a.status)
                .expression_attribute_names("#lease", &a.lease_until)
                .expression_attribute_values(":now_s", number(now_ms.div_euclid(1000)))
                .expression_attribute_values(":now_ms", number(now_ms))
                .expression_attribute_values(":pending", AttributeValue::S(PENDING.into()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .customize()
                .interceptor(attempts.clone())
                .send()
                .await;
            let err = match sent {
                Ok(_) => return Ok(Acquired::Taken),
                Err(err) => err,
            };
            match err.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    let record = failed.item().map(|i| self.decode(i));
                    return Ok(self.held(owner, r, record, attempts.get() > 1));
                }
                // A commit transaction on the same item is under way.
                Some(PutItemError::TransactionConflictException(_))
                    if attempt + 1 < STORE_ATTEMPTS =>
                {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                _ => return Err(self.sdk_fail(&format!("acquiring key {:?}", r.key), &err)),
            }
        }
    }

    /// What a failed acquisition means, given the holder's record and whether the SDK
    /// sent the put more than once.
    fn held(
        &self,
        owner: &str,
        r: &AcquireRequest,
        record: Option<LockRecord>,
        retried: bool,
    ) -> Acquired {
        match &record {
            // The SDK retried (after a timeout, a 5xx or a lost response) and the holder is
            // exactly what this request writes: an earlier attempt of this very call took
            // the key. Calling that a duplicate would drop the message. (Without a retry,
            // the same record is an earlier request's: a duplicate, as for anyone.)
            Some(rec)
                if retried
                    && rec.owner == owner
                    && rec.ttl == r.ttl
                    && rec.status
                        == (LockStatus::Pending {
                            lease_until_ms: r.lease_until_ms,
                        }) =>
            {
                tracing::debug!(
                    table = %self.table.name,
                    key = %r.key,
                    "lock key taken by an earlier attempt of the same request"
                );
                Acquired::Taken
            }
            Some(rec) => {
                let (status, lease_until_ms) = match rec.status {
                    LockStatus::Committed => (COMMITTED, None),
                    LockStatus::Pending { lease_until_ms } => (PENDING, Some(lease_until_ms)),
                };
                tracing::debug!(
                    table = %self.table.name,
                    key = %r.key,
                    holder = %rec.owner,
                    status,
                    lease_until_ms = ?lease_until_ms,
                    ttl = rec.ttl,
                    "lock key already held: the message is a duplicate"
                );
                Acquired::Held(record)
            }
            None => {
                tracing::debug!(
                    table = %self.table.name,
                    key = %r.key,
                    "lock key already held (the holder's item was not returned)"
                );
                Acquired::Held(None)
            }
        }
    }

    /// One transaction write of `op` on `key`, conditional on `owner`'s pending lock.
    fn transact_item(
        &self,
        op: Op,
        owner: &str,
        key: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let a = &self.table.attributes;
        let condition = "#owner = :me AND #status = :pending";
        let me = AttributeValue::S(owner.to_string());
        let pending = AttributeValue::S(PENDING.into());
        let built = match op {
            Op::Commit => Update::builder()
                .table_name(&self.table.name)
                .set_key(Some(self.key(key)))
                .update_expression("SET #status = :committed REMOVE #lease")
                .condition_expression(condition)
                .expression_attribute_names("#owner", &a.owner)
                .expression_attribute_names("#status", &a.status)
                .expression_attribute_names("#lease", &a.lease_until)
                .expression_attribute_values(":me", me)
                .expression_attribute_values(":pending", pending)
                .expression_attribute_values(":committed", AttributeValue::S(COMMITTED.into()))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map(|u| TransactWriteItem::builder().update(u).build()),
            Op::Release => Delete::builder()
                .table_name(&self.table.name)
                .set_key(Some(self.key(key)))
                .condition_expression(condition)
                .expression_attribute_names("#owner", &a.owner)
                .expression_attribute_names("#status", &a.status)
                .expression_attribute_values(":me", me)
                .expression_attribute_values(":pending", pending)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map(|d| TransactWriteItem::builder().delete(d).build()),
        };
        built.map_err(|e| self.fail(&format!("{} key {key:?}", op.verb()), e))
    }

    /// Commits or releases `keys` in transactions of up to 100, one result per key.
    async fn settle(
        &self,
        op: Op,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        // Made up front, as in `acquire` (a closure in the stream trips lifetime inference).
        let calls: Vec<_> = keys
            .chunks(TRANSACTION_MAX)
            .map(|chunk| self.settle_chunk(client, op, owner, chunk))
            .collect();
        let parts: Vec<Result<Vec<Settled>, StoreError>> = stream::iter(calls)
            .buffered(concurrency.max(1))
            .collect()
            .await;
        let mut out = Vec::with_capacity(keys.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    /// Settles up to [`TRANSACTION_MAX`] keys in one transaction, sent again without the
    /// keys that are not ours (and after a backoff when a conflict or throttling cancelled
    /// it) until every key is settled.
    async fn settle_chunk(
        &self,
        client: &Client,
        op: Op,
        owner: &str,
        chunk: &[String],
    ) -> Result<Vec<Settled>, StoreError> {
        let mut out: Vec<Option<Settled>> = vec![None; chunk.len()];
        let what = |left: &[usize]| {
            format!(
                "{} {} keys ({:?}, ...)",
                op.verb(),
                left.len(),
                chunk[left[0]]
            )
        };
        let mut left: Vec<usize> = (0..chunk.len()).collect();
        let mut attempt = 0;
        while !left.is_empty() {
            let items = left
                .iter()
                .map(|&i| self.transact_item(op, owner, &chunk[i]))
                .collect::<Result<Vec<_>, _>>()?;
            let err = match client
                .transact_write_items()
                .set_transact_items(Some(items))
                .send()
                .await
            {
                Ok(_) => {
                    for i in left.drain(..) {
                        out[i] = Some(Settled::Ok);
                    }
                    break;
                }
                Err(err) => err,
            };
            let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
                err.as_service_error()
            else {
                return Err(self.sdk_fail(&what(&left), &err));
            };
            let reasons = cancelled.cancellation_reasons();
            if reasons.len() != left.len() {
                return Err(self.fail(
                    &what(&left),
                    format!(
                        "transaction cancelled with {} reasons for {} writes: {}",
                        reasons.len(),
                        left.len(),
                        DisplayErrorContext(&err)
                    ),
                ));
            }
            let mut again = Vec::with_capacity(left.len());
            let mut transient = false;
            for (&i, reason) in left.iter().zip(reasons) {
                match Cancel::of(reason) {
                    Cancel::NotOurs => {
                        let record = reason.item().map(|item| self.decode(item));
                        out[i] = Some(Settled::NotOwner(record));
                    }
                    Cancel::NotApplied => again.push(i),
                    Cancel::Transient => {
                        transient = true;
                        again.push(i);
                    }
                    Cancel::Failed => {
                        return Err(self.fail(
                            &format!("{} key {:?}", op.verb(), chunk[i]),
                            format!(
                                "transaction cancelled: {} {}",
                                reason.code().unwrap_or("?"),
                                reason.message().unwrap_or("")
                            ),
                        ));
                    }
                }
            }
            let progressed = again.len() < left.len();
            if transient || !progressed {
                attempt += 1;
                if attempt >= STORE_ATTEMPTS {
                    return Err(self.fail(
                        &what(&left),
                        format!(
                            "transaction still cancelled after {STORE_ATTEMPTS} attempts: {}",
                            DisplayErrorContext(&err)
                        ),
                    ));
                }
                tracing::debug!(
                    table = %self.table.name,
                    attempt,
                    reasons = ?reasons.iter().map(|r| r.code().unwrap_or("?")).collect::<Vec<_>>(),
                    "lock transaction cancelled by a conflict or throttling; retrying"
                );
                tokio::time::sleep(backoff(attempt - 1)).await;
            }
            left = again;
        }
        Ok(out
            .into_iter()
            .map(|s| s.expect("every key is settled or the call failed"))
            .collect())
    }
}

/// Counts the attempts the SDK makes for one operation (its retries included).
#[derive(Debug, Clone, Default)]
struct AttemptCounter(Arc<AtomicU32>);

impl AttemptCounter {
    fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Intercept for AttemptCounter {
    fn name(&self) -> &'static str {
        "sluice-attempt-counter"
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A transaction's operation on each of its keys.
#[derive(Debug, Clone, Copy)]
enum Op {
    Commit,
    Release,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Op::Commit => "committing",
            Op::Release => "releasing",
        }
    }
}

/// What one cancellation reason of a transaction means for its write.
#[derive(Debug, PartialEq, Eq)]
pub enum Cancel {
    /// The condition failed: the lock is not ours (or not pending).
    NotOurs,
    /// Another write cancelled the transaction; this one was fine.
    NotApplied,
    /// A conflict with another transaction or throttling: try again later.
    Transient,
    /// Anything else (validation, item size): an error.
    Failed,
}

impl Cancel {
    /// The meaning of `reason`.
    pub fn of(reason: &CancellationReason) -> Cancel {
        match reason.code() {
            Some("ConditionalCheckFailed") => Cancel::NotOurs,
            None | Some("None") => Cancel::NotApplied,
            Some(
                "TransactionConflict"
                | "ThrottlingError"
                | "ProvisionedThroughputExceeded"
                | "RequestLimitExceeded"
                | "ThrottlingException",
            ) => Cancel::Transient,
            Some(_) => Cancel::Failed,
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

/// The pause before retry `attempt` (0-based): exponential from 50 ms up to 2 s, with
/// jitter (half of it random), so that contending writers spread out.
fn backoff(attempt: u32) -> Duration {
    let cap = (50u64 << attempt.min(6)).min(2_000);
    Duration::from_millis(cap / 2 + fastrand::u64(0..=cap / 2))
}

#[sluice_engine::async_trait]
impl LockStore for DynamoDbStore {
    fn describe(&self) -> String {
        match &self.table.region {
            Some(r) => format!("aws_dynamodb table {} ({r})", self.table.name),
            None => format!("aws_dynamodb table {}", self.table.name),
        }
    }

    async fn acquire(
        &self,
        owner: &str,
        now_ms: i64,
        requests: &[AcquireRequest],
        concurrency: usize,
    ) -> Vec<Result<Acquired, StoreError>> {
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => {
                return requests
                    .iter()
                    .map(|_| Err(StoreError(e.0.clone())))
                    .collect();
            }
        };
        // The futures are made up front (they do nothing until polled): a closure making
        // them inside the stream trips the compiler's higher-ranked lifetime inference in
        // this Send future.
        let calls: Vec<_> = requests
            .iter()
            .map(|r| self.acquire_one(client, owner, now_ms, r))
            .collect();
        stream::iter(calls)
            .buffered(concurrency.max(1))
            .collect()
            .await
    }

    async fn commit(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle(Op::Commit, owner, keys, concurrency).await
    }

    async fn release(
        &self,
        owner: &str,
        keys: &[String],
        concurrency: usize,
    ) -> Result<Vec<Settled>, StoreError> {
        self.settle(Op::Release, owner, keys, concurrency).await
    }

    fn dynamodb(&self) -> Option<&DynamoDbStore> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::operation::put_item::PutItemOutput;
    use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
    use aws_sdk_dynamodb::types::error::{
        ConditionalCheckFailedException, InternalServerError, TransactionCanceledException,
    };
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};

    const NOW_MS: i64 = 1_800_000_000_123;
    const ARN: &str = "arn:aws:dynamodb:eu-west-1:123456789012:table/locks";

    fn value(json: &str) -> Value {
        serde_json::from_str(json).expect("test JSON")
    }

    fn settings() -> Value {
        value(&format!(
            r#"{{"aws": {{"arn": "{ARN}"}}, "attributes": {{"partition_key": "PK"}}}}"#
        ))
    }

    /// A store whose client answers with `rules`, in order, retrying up to `attempts`
    /// times per call without waiting long.
    fn store(rules: &[&Rule], attempts: u32) -> DynamoDbStore {
        store_with(RuleMode::Sequential, rules, attempts)
    }

    fn store_with(mode: RuleMode, rules: &[&Rule], attempts: u32) -> DynamoDbStore {
        let client = mock_client!(aws_sdk_dynamodb, mode, rules, |b| b.retry_config(
            RetryConfig::standard()
                .with_max_attempts(attempts)
                .with_initial_backoff(Duration::from_millis(1))
        ));
        DynamoDbStore::from_settings(&settings())
            .unwrap()
            .with_client(client)
    }

    fn req(key: &str) -> AcquireRequest {
        AcquireRequest {
            key: key.into(),
            ttl: NOW_MS / 1000 + 600,
            lease_until_ms: NOW_MS + 60_000,
        }
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("k{i}")).collect()
    }

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    fn n(v: i64) -> AttributeValue {
        number(v)
    }

    /// A lock item as another owner's store wrote it.
    fn held_item(owner: &str, status: &str) -> HashMap<String, AttributeValue> {
        let mut item = HashMap::new();
        item.insert("PK".to_string(), s("k1"));
        item.insert("ttl".to_string(), n(1_800_000_600));
        item.insert("lock_owner".to_string(), s(owner));
        item.insert("lock_status".to_string(), s(status));
        if status == PENDING {
            item.insert("lock_lease_until".to_string(), n(1_800_000_060_000));
        }
        item
    }

    fn meta(code: &str) -> aws_sdk_dynamodb::error::ErrorMetadata {
        aws_sdk_dynamodb::error::ErrorMetadata::builder()
            .code(code)
            .message("from the mock")
            .build()
    }

    fn cancelled(
        codes: &[(&str, Option<HashMap<String, AttributeValue>>)],
    ) -> TransactWriteItemsError {
        let reasons = codes
            .iter()
            .map(|(code, item)| {
                CancellationReason::builder()
                    .code(*code)
                    .set_item(item.clone())
                    .build()
            })
            .collect();
        TransactWriteItemsError::TransactionCanceledException(
            TransactionCanceledException::builder()
                .set_cancellation_reasons(Some(reasons))
                .meta(meta("TransactionCanceledException"))
                .build(),
        )
    }

    #[tokio::test]
    async fn a_throttled_acquire_is_retried_and_then_succeeds() {
        let throttled = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#;
        let rule = mock!(Client::put_item)
            .sequence()
            .http_status(400, Some(throttled.into()))
            .times(2)
            .output(|| PutItemOutput::builder().build())
            .build();
        let store = store(&[&rule], 3);
        let got = store.acquire("me", NOW_MS, &[req("k1")], 4).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ref().unwrap(), &Acquired::Taken);
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn the_acquire_request_is_a_conditional_put_of_the_whole_record() {
        let rule = mock!(Client::put_item)
            .match_requests(|r| {
                let item = r.item().unwrap();
                let names = r.expression_attribute_names().unwrap();
                let values = r.expression_attribute_values().unwrap();
                r.table_name() == Some("locks")
                    && item.get("PK") == Some(&s("k1"))
                    && item.get("ttl") == Some(&n(NOW_MS / 1000 + 600))
                    && item.get("lock_owner") == Some(&s("me"))
                    && item.get("lock_status") == Some(&s("pending"))
                    && item.get("lock_lease_until") == Some(&n(NOW_MS + 60_000))
                    && item.len() == 5
                    && r.condition_expression()
                        == Some(
                            "attribute_not_exists(#pk) OR #ttl <= :now_s \
                             OR (#status = :pending AND #lease < :now_ms)",
                        )
                    && names.get("#ttl").map(String::as_str) == Some("ttl")
                    && names.get("#status").map(String::as_str) == Some("lock_status")
                    && values.get(":now_s") == Some(&n(NOW_MS / 1000))
                    && values.get(":now_ms") == Some(&n(NOW_MS))
                    && r.return_values_on_condition_check_failure()
                        == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
            })
            .then_output(|| PutItemOutput::builder().build());
        let store = store(&[&rule], 1);
        let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
        assert_eq!(got[0].as_ref().unwrap(), &Acquired::Taken);
    }

    #[tokio::test]
    async fn a_failed_condition_on_acquire_returns_the_holders_record() {
        let rule = mock!(Client::put_item).then_error(|| {
            PutItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .set_item(Some(held_item("them", PENDING)))
                    .meta(meta("ConditionalCheckFailedException"))
                    .build(),
            )
        });
        let bare = mock!(Client::put_item).then_error(|| {
            PutItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .meta(meta("ConditionalCheckFailedException"))
                    .build(),
            )
        });
        let store = store(&[&rule, &bare], 1);
        let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
        assert_eq!(
            got[0].as_ref().unwrap(),
            &Acquired::Held(Some(LockRecord {
                owner: "them".into(),
                status: LockStatus::Pending {
                    lease_until_ms: 1_800_000_060_000
                },
                ttl: 1_800_000_600,
            }))
        );
        let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
        assert_eq!(got[0].as_ref().unwrap(), &Acquired::Held(None));
    }

    /// A condition failure whose holder is exactly what `req("k1")` by "me" writes.
    fn mine_failed() -> PutItemError {
        let mut mine = held_item("me", PENDING);
        mine.insert("ttl".into(), n(NOW_MS / 1000 + 600));
        mine.insert("lock_lease_until".into(), n(NOW_MS + 60_000));
        PutItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .set_item(Some(mine))
                .meta(meta("ConditionalCheckFailedException"))
                .build(),
        )
    }

    #[tokio::test]
    async fn our_own_earlier_attempt_is_not_a_duplicate() {
        // The SDK retried a put whose first attempt was applied but answered with a 500:
        // the "holder" the retry finds is exactly what this request writes.
        let rule = mock!(Client::put_item)
            .sequence()
            .http_status(
                500,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#.into()),
            )
            .error(mine_failed)
            .build();
        let store = store(&[&rule], 2);
        let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
        assert_eq!(got[0].as_ref().unwrap(), &Acquired::Taken);
        assert_eq!(rule.num_calls(), 2);
        // Without a retry, the same record is an earlier request's: a duplicate.
        let rule = mock!(Client::put_item).then_error(mine_failed);
        let store = super::tests::store(&[&rule], 2);
        let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
        assert!(matches!(got[0].as_ref().unwrap(), Acquired::Held(Some(r)) if r.owner == "me"));
    }

    #[tokio::test]
    async fn substations_own_locks_count_as_committed() {
        let mut item = HashMap::new();
        item.insert("PK".to_string(), s("k1"));
        item.insert("ttl".to_string(), n(1_800_000_600));
        let store = DynamoDbStore::from_settings(&settings()).unwrap();
        assert_eq!(
            store.decode(&item),
            LockRecord {
                owner: String::new(),
                status: LockStatus::Committed,
                ttl: 1_800_000_600
            }
        );
        // No TTL, no lease: never expires, as in the conditions.
        let mut item = held_item("x", PENDING);
        item.remove("ttl");
        item.remove("lock_lease_until");
        let r = store.decode(&item);
        assert_eq!(r.ttl, i64::MAX);
        assert!(r.blocks(NOW_MS));
    }

    #[tokio::test]
    async fn acquire_errors_name_the_table_and_key_after_the_sdks_retries() {
        let rule = mock!(Client::put_item)
            .sequence()
            .http_status(
                500,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}"#.into()),
            )
            .repeatedly()
            .build();
        let store = store(&[&rule], 3);
        let got = store
            .acquire("me", NOW_MS, &[req("k1"), req("k2")], 2)
            .await;
        assert_eq!(got.len(), 2);
        for r in &got {
            let e = r.as_ref().unwrap_err().to_string();
            assert!(
                e.starts_with("aws_dynamodb table locks: acquiring key "),
                "{e}"
            );
            assert!(e.contains("InternalServerError"), "{e}");
        }
        assert!(got[0].as_ref().unwrap_err().0.contains("\"k1\""));
        assert!(got[1].as_ref().unwrap_err().0.contains("\"k2\""));
        assert_eq!(rule.num_calls(), 6, "3 attempts per key");
    }

    #[tokio::test]
    async fn acquire_keeps_request_order_with_calls_in_flight() {
        // Answers depend on the key, and earlier keys answer later.
        let rule = mock!(Client::put_item).then_compute_response(|r| {
            let key = r.item().unwrap()["PK"].as_s().unwrap().clone();
            let i: u64 = key[1..].parse().unwrap();
            std::thread::sleep(Duration::from_millis(20u64.saturating_sub(i)));
            if i.is_multiple_of(3) {
                aws_smithy_mocks::MockResponse::Error(
                    PutItemError::ConditionalCheckFailedException(
                        ConditionalCheckFailedException::builder()
                            .meta(meta("ConditionalCheckFailedException"))
                            .build(),
                    ),
                )
            } else {
                aws_smithy_mocks::MockResponse::Output(PutItemOutput::builder().build())
            }
        });
        let store = store_with(RuleMode::MatchAny, &[&rule], 1);
        let reqs: Vec<_> = keys(12).iter().map(|k| req(k)).collect();
        let got = store.acquire("me", NOW_MS, &reqs, 4).await;
        for (i, r) in got.iter().enumerate() {
            let want = if i.is_multiple_of(3) {
                Acquired::Held(None)
            } else {
                Acquired::Taken
            };
            assert_eq!(r.as_ref().unwrap(), &want, "key {i}");
        }
    }

    #[tokio::test]
    async fn commit_is_one_transaction_per_hundred_keys() {
        let rule = mock!(Client::transact_write_items)
            .match_requests(|r| {
                let items = r.transact_items();
                let u = items[0].update().unwrap();
                (items.len() == 100 || items.len() == 30)
                    && items.iter().all(|i| i.update().is_some())
                    && u.update_expression() == "SET #status = :committed REMOVE #lease"
                    && u.condition_expression() == Some("#owner = :me AND #status = :pending")
                    && u.expression_attribute_values().unwrap().get(":me") == Some(&s("me"))
                    && u.return_values_on_condition_check_failure()
                        == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
            })
            .sequence()
            .output(|| TransactWriteItemsOutput::builder().build())
            .times(3)
            .build();
        let store = store(&[&rule], 1);
        let got = store.commit("me", &keys(230), 4).await.unwrap();
        assert_eq!(got, vec![Settled::Ok; 230]);
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn a_foreign_key_in_a_commit_is_reported_and_the_rest_retried() {
        let first = mock!(Client::transact_write_items)
            .match_requests(|r| r.transact_items().len() == 3)
            .then_error(|| {
                cancelled(&[
                    ("None", None),
                    ("ConditionalCheckFailed", Some(held_item("them", PENDING))),
                    ("None", None),
                ])
            });
        let second = mock!(Client::transact_write_items)
            .match_requests(|r| {
                let pks: Vec<_> = r
                    .transact_items()
                    .iter()
                    .map(|i| i.update().unwrap().key()["PK"].as_s().unwrap().clone())
                    .collect();
                pks == ["k0", "k2"]
            })
            .then_output(|| TransactWriteItemsOutput::builder().build());
        let store = store(&[&first, &second], 1);
        let got = store.commit("me", &keys(3), 4).await.unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], Settled::Ok);
        assert!(
            matches!(&got[1], Settled::NotOwner(Some(r)) if r.owner == "them"),
            "{:?}",
            got[1]
        );
        assert_eq!(got[2], Settled::Ok);
        assert_eq!((first.num_calls(), second.num_calls()), (1, 1));
    }

    #[tokio::test]
    async fn release_deletes_conditionally_and_reports_absent_keys() {
        let rule = mock!(Client::transact_write_items)
            .match_requests(|r| {
                let d = r.transact_items()[0].delete().unwrap();
                d.condition_expression() == Some("#owner = :me AND #status = :pending")
                    && d.key().len() == 1
            })
            .then_error(|| cancelled(&[("ConditionalCheckFailed", None)]));
        let store = store(&[&rule], 1);
        let got = store.release("me", &keys(1), 4).await.unwrap();
        assert_eq!(got, vec![Settled::NotOwner(None)]);
    }

    #[tokio::test]
    async fn conflicting_or_throttled_transactions_are_retried() {
        let rule = mock!(Client::transact_write_items)
            .sequence()
            .error(|| cancelled(&[("TransactionConflict", None), ("None", None)]))
            .error(|| cancelled(&[("None", None), ("ThrottlingError", None)]))
            .output(|| TransactWriteItemsOutput::builder().build())
            .build();
        let throttled = mock!(Client::transact_write_items)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}"#.into()),
            )
            .output(|| TransactWriteItemsOutput::builder().build())
            .build();
        let store = store(&[&rule, &throttled], 2);
        assert_eq!(
            store.release("me", &keys(2), 4).await.unwrap(),
            vec![Settled::Ok; 2]
        );
        assert_eq!(rule.num_calls(), 3);
        assert_eq!(
            store.commit("me", &keys(2), 4).await.unwrap(),
            vec![Settled::Ok; 2]
        );
        assert_eq!(
            throttled.num_calls(),
            2,
            "the SDK retried the throttled call"
        );
    }

    #[tokio::test]
    async fn a_transaction_that_keeps_conflicting_fails_naming_the_table() {
        let rule = mock!(Client::transact_write_items)
            .sequence()
            .error(|| cancelled(&[("TransactionConflict", None)]))
            .repeatedly()
            .build();
        let store = store(&[&rule], 1);
        tokio::time::pause();
        let err = store
            .commit("me", &keys(1), 4)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("aws_dynamodb table locks: committing 1 keys (\"k0\", ...): transaction still cancelled after 8 attempts"),
            "{err}"
        );
        assert_eq!(rule.num_calls(), STORE_ATTEMPTS as usize);
    }

    #[tokio::test]
    async fn other_transaction_failures_are_errors() {
        let rule = mock!(Client::transact_write_items)
            .then_error(|| cancelled(&[("ValidationError", None)]));
        let store = store(&[&rule], 1);
        let err = store
            .commit("me", &keys(1), 4)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("aws_dynamodb table locks: committing key \"k0\": transaction cancelled: ValidationError"),
            "{err}"
        );
        let rule = mock!(Client::transact_write_items).then_error(|| {
            TransactWriteItemsError::InternalServerError(
                InternalServerError::builder()
                    .message("boom")
                    .meta(meta("InternalServerError"))
                    .build(),
            )
        });
        let store = super::tests::store(&[&rule], 1);
        let err = store
            .release("me", &keys(2), 4)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("aws_dynamodb table locks: releasing 2 keys (\"k0\", ...): "),
            "{err}"
        );
        assert!(store.commit("me", &[], 4).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_silent_endpoint_times_out_as_an_error_naming_the_table() {
        // A loopback server that accepts connections and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                held.push(sock);
            }
        });
        let conf = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::for_tests())
            .http_client(crate::aws::https_client())
            .endpoint_url(format!("http://{addr}"))
            .retry_config(RetryConfig::standard().with_max_attempts(2))
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_millis(200))
                    .operation_timeout(Duration::from_millis(300))
                    .build(),
            )
            .build();
        let store = DynamoDbStore::from_settings(&settings())
            .unwrap()
            .with_client(Client::from_conf(conf));
        let got = store.acquire("me", NOW_MS, &[req("k1")], 1).await;
        let e = got[0].as_ref().unwrap_err().to_string();
        assert!(
            e.starts_with("aws_dynamodb table locks: acquiring key \"k1\": "),
            "{e}"
        );
        assert!(e.contains("timeout") || e.contains("timed out"), "{e}");
        server.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn acquisitions_are_concurrent_up_to_the_bound() {
        let delay = Duration::from_millis(20);
        for (concurrency, want_most) in [(1usize, 1usize), (8, 8), (32, 32)] {
            let (endpoint, most, server) = crate::aws::test_support::slow_endpoint(
                delay,
                "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 2\r\n\r\n{}",
            )
            .await;
            let store = DynamoDbStore::from_settings(&settings())
                .unwrap()
                .with_local_endpoint(endpoint);
            let reqs: Vec<_> = keys(64).iter().map(|k| req(k)).collect();
            let started = std::time::Instant::now();
            let got = store.acquire("me", NOW_MS, &reqs, concurrency).await;
            let took = started.elapsed();
            assert!(got.iter().all(|r| r.as_ref().unwrap() == &Acquired::Taken));
            assert_eq!(
                most.load(Ordering::SeqCst),
                want_most,
                "requests in flight at concurrency {concurrency}"
            );
            // 64 requests in waves of `concurrency`, each wave at least `delay`.
            let waves = 64 / concurrency as u32;
            assert!(took >= delay * waves, "{concurrency}: {took:?}");
            server.abort();
        }
    }

    fn config_error(json: &str) -> String {
        DynamoDbStore::from_settings(&value(json)).unwrap_err()
    }

    #[test]
    fn settings_name_the_table_by_arn_or_by_name() {
        let s = DynamoDbStore::from_settings(&settings()).unwrap();
        assert_eq!(s.table.name, "locks");
        assert_eq!(s.table.region.as_deref(), Some("eu-west-1"));
        assert_eq!(s.describe(), "aws_dynamodb table locks (eu-west-1)");
        assert_eq!(
            s.table.attributes,
            Attributes {
                partition_key: "PK".into(),
                sort_key: None,
                ttl: "ttl".into(),
                value: None,
                owner: "lock_owner".into(),
                status: "lock_status".into(),
                lease_until: "lock_lease_until".into(),
            }
        );
        let s = DynamoDbStore::from_settings(&value(
            r#"{"aws": {"arn": "my-locks.v2", "assume_role_arn": "arn:aws:iam::123456789012:role/sluice"},
                "attributes": {"partition_key": "pk", "sort_key": "sk", "ttl": "expires", "value": "v",
                               "owner": "o", "status": "st", "lease_until": "lu"},
                "consistent_read": true}"#,
        ))
        .unwrap();
        assert_eq!(s.table.name, "my-locks.v2");
        assert_eq!(s.table.region, None);
        assert_eq!(
            s.table.assume_role_arn.as_deref(),
            Some("arn:aws:iam::123456789012:role/sluice")
        );
        assert_eq!(s.describe(), "aws_dynamodb table my-locks.v2");
        let key = s.key("x");
        assert_eq!(key.get("pk"), Some(&s_("x")));
        assert_eq!(key.get("sk"), Some(&s_(SORT_KEY_VALUE)));
        assert_eq!(
            (
                s.table.attributes.ttl.as_str(),
                s.table.attributes.owner.as_str(),
                s.table.attributes.status.as_str(),
                s.table.attributes.lease_until.as_str()
            ),
            ("expires", "o", "st", "lu")
        );
        // Empty strings (Substation's library defaults) are absent.
        let s = DynamoDbStore::from_settings(&value(
            r#"{"aws": {"arn": "locks", "assume_role_arn": ""},
                "attributes": {"partition_key": "PK", "sort_key": "", "ttl": null}}"#,
        ))
        .unwrap();
        assert_eq!(s.table.attributes.sort_key, None);
        assert_eq!(s.table.attributes.ttl, "ttl");
        assert_eq!(s.table.assume_role_arn, None);
    }

    fn s_(v: &str) -> AttributeValue {
        s(v)
    }

    #[test]
    fn bad_settings_name_the_field() {
        let cases = [
            (
                r#"{}"#,
                "kv_store.settings.aws.arn: missing required option",
            ),
            (
                r#"{"aws": {"arn": ""}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: missing required option",
            ),
            (
                r#"{"aws": {"arn": "locks"}}"#,
                "kv_store.settings.attributes.partition_key: missing required option",
            ),
            (
                r#"{"aws": {"arn": "arn:aws:s3:::bucket"}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: \"arn:aws:s3:::bucket\" is not a DynamoDB table ARN",
            ),
            (
                r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:1:table/t/stream/x"}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: \"arn:aws:dynamodb:us-east-1:1:table/t/stream/x\" is not a DynamoDB table ARN",
            ),
            (
                r#"{"aws": {"arn": "arn:aws:dynamodb::1:table/locks"}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: \"arn:aws:dynamodb::1:table/locks\" is not a DynamoDB table ARN",
            ),
            (
                r#"{"aws": {"arn": "arn:nope"}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: \"arn:nope\" is not an ARN",
            ),
            (
                r#"{"aws": {"arn": "my table"}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: \"my table\" is neither a DynamoDB table ARN",
            ),
            (
                r#"{"aws": {"arn": "locks", "assume_role_arn": "sluice"}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.assume_role_arn: \"sluice\" is not an IAM role ARN",
            ),
            (
                r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "ttl"}}"#,
                "kv_store.settings.attributes.ttl: attribute name \"ttl\" is also used by attributes.partition_key",
            ),
            (
                r#"{"aws": {"arn": "locks"}, "attributes": {"partition_key": "PK", "status": "lock_owner"}}"#,
                "kv_store.settings.attributes.status: attribute name \"lock_owner\" is also used by attributes.owner",
            ),
            (
                r#"{"aws": {"arn": 7}, "attributes": {"partition_key": "PK"}}"#,
                "kv_store.settings.aws.arn: invalid type",
            ),
        ];
        for (json, want) in cases {
            let got = config_error(json);
            assert!(
                got.starts_with(want),
                "{json}\n got: {got}\nwant: {want}..."
            );
        }
    }

    #[test]
    fn backoff_grows_and_stays_bounded() {
        for attempt in 0..20 {
            let cap = (50u64 << attempt.min(6)).min(2_000);
            let d = backoff(attempt).as_millis() as u64;
            assert!((cap / 2..=cap).contains(&d), "attempt {attempt}: {d} ms");
        }
    }

    #[test]
    fn cancellation_reasons_are_classified() {
        let r = |c: &str| CancellationReason::builder().code(c).build();
        assert_eq!(Cancel::of(&r("ConditionalCheckFailed")), Cancel::NotOurs);
        assert_eq!(Cancel::of(&r("None")), Cancel::NotApplied);
        assert_eq!(
            Cancel::of(&CancellationReason::builder().build()),
            Cancel::NotApplied
        );
        for c in [
            "TransactionConflict",
            "ThrottlingError",
            "ProvisionedThroughputExceeded",
        ] {
            assert_eq!(Cancel::of(&r(c)), Cancel::Transient, "{c}");
        }
        assert_eq!(
            Cancel::of(&r("ItemCollectionSizeLimitExceeded")),
            Cancel::Failed
        );
        assert_eq!(parse_number("17"), 17);
        assert_eq!(parse_number("17.9"), 17);
        assert_eq!(parse_number("x"), 0);
    }
}
