//! `lock_acquire: 'statements'`: the protocol's acquisitions and commits as PartiQL
//! single-item writes, which DynamoDB bills one write unit each, where a transaction's
//! items cost two. The records and rules are those of the other modes (`lock.rs`); only
//! the calls differ.
//!
//! A piece of up to 100 keys is first read, strongly consistent, with one `BatchGetItem`
//! (a read unit per key), unless few of the keys the store asked for lately existed: then
//! every key is written unread, as if the read had found it absent (`first_read.rs`).
//! From what it read, per key: absent, an `INSERT` (which fails
//! on an item that exists); not pending and past its TTL, a conditional `UPDATE` (the
//! condition of `ACQUIRE_FRESH_CONDITION` less absence, which an `UPDATE` cannot create);
//! held (committed and live, or another owner's live lease), `Held` with the record read;
//! pending and takeable (a lease that ended, this owner's own, a chain past the window),
//! taken alone with `UpdateItem` (`DynamoDbStore::acquire_one`), whose old item tells the
//! takeover. The writes go in `BatchExecuteStatement` calls of up to 25, in flight
//! together. Such a batch is not atomic: each statement succeeds or fails alone. Throttled
//! ones are sent again after a backoff; a refused one (`ValidationError`) is taken alone.
//! The keys whose statements found the item changed since the read (`DuplicateItem`,
//! `ConditionalCheckFailed`) are read again, together and strongly consistent, and
//! decided from that: exactly the record this acquisition writes, where a call that
//! carried the key's statement was sent more than once by the SDK (an earlier attempt
//! applied it and its answer was lost), is taken fresh (`lock::written_by`, the test a key
//! taken alone applies); held, `Held`; absent or committed and past its TTL, written again
//! with the next statements (a backoff between rounds, up to the store's attempts, then
//! alone); pending and takeable, alone. If that read fails, they are taken alone. A lost
//! answer thus costs one read, not an `UpdateItem` per key of its call.
//!
//! An `UPDATE` of several paths is written in AWS's documented form (repeated `SET` and
//! `REMOVE` clauses) until the service refuses one as a statement error (the emulator,
//! dynoxide, answers `ValidationError` "UPDATE requires a WHERE clause"); the store then
//! writes comma lists for the rest of its life and sends the refused statements again at
//! once, not alone. If both forms are refused, the store sends no `UPDATE` statement any
//! more: a committed key is taken alone, a commit goes in a transaction (`dialect.rs`).
//!
//! Commits are `UPDATE`s of the owner's pending records. One whose condition failed is
//! read back (strongly consistent): the owner's own commit (an earlier attempt's) is done,
//! another owner's record or none is `NotOwner` (`sluice_lock_protocol::change`); anything
//! the statements could not settle goes through the transactions of the other modes.
//! Renewals, releases and abandonments are those transactions.

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::{
    AttributeValue, BatchStatementErrorCodeEnum as Code, BatchStatementRequest,
    BatchStatementResponse, KeysAndAttributes, ReturnConsumedCapacity,
};
use futures::future::join_all;
use futures::stream::{self, StreamExt};
use sluice_lock_protocol::epoch::{EpochSlot, KeyRecord};
use sluice_lock_protocol::{Change, pending_ttl};
use sluice_platform::aws::describe_error;

use super::super::lock::{
    AcquireRequest, Acquired, CommitRequest, LockRecord, LockStatus, Settled, StoreError,
};
use super::dialect::{Form, Verdict};
use super::lock::{AttemptCounter, ChunkAnswer, Op, Retries, Written, written_by};
use super::{COMMITTED, DynamoDbStore, PENDING, epochs, number};

mod commit;

/// The most keys one `BatchGetItem` reads: the keys of one piece.
pub(super) const PIECE_KEYS: usize = 100;
/// The most statements one `BatchExecuteStatement` holds.
pub(super) const STATEMENTS_MAX: usize = 25;
/// The statement calls of one piece, in flight together.
pub(super) const CALLS_PER_PIECE: usize = PIECE_KEYS / STATEMENTS_MAX;

/// The calls of one acquisition in flight at once: at most the store's `concurrency`,
/// whichever pieces make them. A piece makes one call (its read), then up to
/// [`CALLS_PER_PIECE`] (its statements): counting calls, not pieces, keeps `concurrency`
/// calls in flight while some pieces read and others write, where a fixed number of pieces
/// left most of it idle during the reads. A call holds its permit only while it is in
/// flight, never while it waits for another, so pieces cannot wait on each other.
pub(super) struct CallGate(tokio::sync::Semaphore);

impl CallGate {
    pub(super) fn new(concurrency: usize) -> CallGate {
        CallGate(tokio::sync::Semaphore::new(concurrency.max(1)))
    }

    /// Runs `call` once a permit is free.
    pub(super) async fn run<F: std::future::Future>(&self, call: F) -> F::Output {
        // The semaphore is never closed; were it, the call would go ungated.
        let _permit = self.0.acquire().await.ok();
        call.await
    }
}

/// What a key's acquisition writes, from what the read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// Absent: `INSERT`.
    Insert,
    /// Not pending and past its TTL: conditional `UPDATE`.
    Fresh,
}

/// What a key's acquisition does with the record a consistent read found.
enum Plan {
    /// A statement.
    Write(Write),
    /// Held: what a failed condition would have said, read strongly consistent.
    Held(LockRecord),
    /// Pending and takeable (a takeover, a retake or a chain past the window): taken alone,
    /// whose old item tells it.
    Alone,
    /// Pending in an epoch: settled through it (`epochs.rs`).
    Resolve(KeyRecord),
}

/// Why a `BatchGetItem` or `BatchExecuteStatement` call settled nothing.
pub(super) enum CallFailed {
    /// The service refused the request as a whole (`ValidationException`: a key too long
    /// for the table, say): each key is asked for alone, so that only the bad one fails.
    Refused,
    /// Anything else, after the SDK's retries.
    Failed(String),
}

/// What a statement's error means for its key.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The item is not as the read found it (`DuplicateItem`, `ConditionalCheckFailed`).
    Changed,
    /// Throttling, a conflict, an internal error: send it again later.
    Transient,
    /// The statement was refused (`ValidationError`).
    Refused,
    /// Anything else: an error.
    Failed,
}

impl Outcome {
    fn of(code: Option<&Code>) -> Outcome {
        match code {
            Some(Code::DuplicateItem | Code::ConditionalCheckFailed) => Outcome::Changed,
            Some(
                Code::ProvisionedThroughputExceeded
                | Code::ThrottlingError
                | Code::InternalServerError
                | Code::TransactionConflict
                | Code::RequestLimitExceeded,
            ) => Outcome::Transient,
            Some(Code::ValidationError) => Outcome::Refused,
            _ => Outcome::Failed,
        }
    }
}

/// An attribute name as a PartiQL identifier (the settings refuse names with quotes).
fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

/// A statement error as text: its code and message.
fn statement_error(r: &BatchStatementResponse) -> String {
    let e = r.error();
    format!(
        "statement failed: {} {}",
        e.and_then(|e| e.code()).map_or("?", |c| c.as_str()),
        e.and_then(|e| e.message()).unwrap_or("")
    )
}

impl DynamoDbStore {
    /// The key part of a statement's `WHERE` clause and its parameters.
    fn key_condition(&self, key: &str) -> (String, Vec<AttributeValue>) {
        (self.key_text(), self.key_params(key))
    }

    /// The text of [`key_condition`](Self::key_condition).
    fn key_text(&self) -> String {
        let a = &self.table.attributes;
        let mut text = format!("{} = ?", quoted(&a.partition_key));
        if let Some(sk) = &a.sort_key {
            text.push_str(&format!(" AND {} = ?", quoted(sk)));
        }
        text
    }

    /// The parameters of [`key_condition`](Self::key_condition) for `key`.
    fn key_params(&self, key: &str) -> Vec<AttributeValue> {
        let mut params = vec![AttributeValue::S(key.to_string())];
        if self.table.attributes.sort_key.is_some() {
            params.push(AttributeValue::S(super::SORT_KEY_VALUE.to_string()));
        }
        params
    }

    /// The table as a PartiQL identifier.
    fn table_quoted(&self) -> String {
        quoted(&self.table.name)
    }

    /// The statement that takes `r`'s key as the read found it: the record
    /// `ACQUIRE_UPDATE` writes over an absent or committed item, with `since` now (an
    /// `UPDATE` written in `form`).
    /// In an epoch (`at`), the record is pending in it (`epochs.rs`).
    fn acquire_statement(
        &self,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
        write: Write,
        form: Form,
        at: Option<EpochSlot>,
    ) -> Result<BatchStatementRequest, StoreError> {
        let ttl = match at {
            Some(_) => epochs::key_ttl(r, now_ms),
            None => pending_ttl(r.ttl, r.lease_until_ms),
        };
        // In the order of `acquire_text`'s record.
        let mut record = Vec::with_capacity(12);
        record.extend([
            AttributeValue::S(owner.to_string()),
            AttributeValue::S(epochs::status(at).into()),
            number(r.lease_until_ms),
            number(ttl),
            number(now_ms),
        ]);
        if let Some(at) = at {
            record.push(number(at.epoch as i64));
            record.push(number(i64::from(at.slot)));
        }
        let key_params = self.key_params(&r.key);
        let params = match write {
            Write::Insert => {
                let mut params = key_params;
                params.append(&mut record);
                params
            }
            Write::Fresh => {
                let mut params = record;
                params.extend(key_params);
                params.push(AttributeValue::S(PENDING.into()));
                if at.is_some() {
                    params.push(AttributeValue::S(epochs::status(at).into()));
                }
                params.push(number(now_ms.div_euclid(1000)));
                params
            }
        };
        BatchStatementRequest::builder()
            .statement(self.acquire_text(write, form, at.is_some()))
            .set_parameters(Some(params))
            .build()
            .map_err(|e| self.fail(&format!("acquiring key {:?}", r.key), e))
    }

    /// The text of [`acquire_statement`](Self::acquire_statement)'s statements, the same
    /// for every key: made once per kind (a tenth of the CPU of taking a key was spent
    /// formatting it anew).
    fn acquire_text(&self, write: Write, form: Form, epoch: bool) -> &str {
        let slot = (write == Write::Fresh) as usize * 4
            + (form == Form::Comma) as usize * 2
            + epoch as usize;
        self.texts[slot].get_or_init(|| {
            let a = &self.table.attributes;
            let mut record: Vec<&str> = vec![&a.owner, &a.status, &a.lease_until, &a.ttl, &a.since];
            if epoch {
                record.extend([epochs::EPOCH_ATTRIBUTE, epochs::SLOT_ATTRIBUTE]);
            }
            match write {
                Write::Insert => {
                    let mut names = vec![format!("'{}': ?", a.partition_key)];
                    if let Some(sk) = &a.sort_key {
                        names.push(format!("'{sk}': ?"));
                    }
                    names.extend(record.iter().map(|name| format!("'{name}': ?")));
                    format!(
                        "INSERT INTO {} VALUE {{{}}}",
                        self.table_quoted(),
                        names.join(", ")
                    )
                }
                Write::Fresh => {
                    let set: Vec<String> = record.iter().map(|name| quoted(name)).collect();
                    // Taken as new: an earlier holding's progress goes (an epoch's records
                    // keep it until their TTL).
                    let mut remove = vec![quoted(&a.note)];
                    if epoch {
                        remove.push(quoted(&a.progress));
                    }
                    let key_text = self.key_text();
                    let status = quoted(&a.status);
                    // In an epoch, a key pending in one is only taken through it (`epochs.rs`).
                    let not_held = match epoch {
                        true => {
                            format!("({status} IS MISSING OR ({status} <> ? AND {status} <> ?))")
                        }
                        false => format!("({status} IS MISSING OR {status} <> ?)"),
                    };
                    format!(
                        "UPDATE {} {} WHERE {key_text} AND {not_held} AND {} <= ?",
                        self.table_quoted(),
                        form.clauses(&set, &remove),
                        quoted(&a.ttl),
                    )
                }
            }
        })
    }

    /// Reads the items of `keys` (distinct, at most [`PIECE_KEYS`]), strongly consistent:
    /// by partition key, the items that exist. Keys the service left unprocessed are asked
    /// for again after a backoff.
    /// `consistent: false` reads eventually consistent (half a read unit).
    pub(super) async fn read_items(
        &self,
        client: &Client,
        keys: &[&str],
        consistent: bool,
    ) -> Result<HashMap<String, HashMap<String, AttributeValue>>, CallFailed> {
        let pk = &self.table.attributes.partition_key;
        let mut found = HashMap::with_capacity(keys.len());
        let mut left: Vec<HashMap<String, AttributeValue>> =
            keys.iter().map(|k| self.key(k)).collect();
        let mut retries = Retries::default();
        while !left.is_empty() {
            let asked = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut left)))
                .consistent_read(consistent)
                .build()
                .map_err(|e| CallFailed::Failed(e.to_string()))?;
            let out = match client
                .batch_get_item()
                .request_items(&self.table.name, asked)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
            {
                Ok(out) => out,
                Err(err) => return Err(call_failed(&err)),
            };
            self.count_units("BatchGetItem", false, out.consumed_capacity());
            let items = out.responses().and_then(|r| r.get(&self.table.name));
            for item in items.into_iter().flatten() {
                if let Some(AttributeValue::S(key)) = item.get(pk) {
                    found.insert(key.clone(), item.clone());
                }
            }
            left = out
                .unprocessed_keys()
                .and_then(|u| u.get(&self.table.name))
                .map(|k| k.keys().to_vec())
                .unwrap_or_default();
            if !left.is_empty() && !retries.wait_before_next().await {
                return Err(CallFailed::Failed(format!(
                    "{} keys still unprocessed by BatchGetItem after {} attempts",
                    left.len(),
                    super::lock::STORE_ATTEMPTS
                )));
            }
        }
        Ok(found)
    }

    /// Sends `statements` in one `BatchExecuteStatement`: the answers, in order, and
    /// whether the SDK sent the call more than once.
    async fn execute(
        &self,
        client: &Client,
        statements: Vec<BatchStatementRequest>,
    ) -> Result<(Vec<BatchStatementResponse>, bool), CallFailed> {
        let asked = statements.len();
        let attempts = AttemptCounter::default();
        let sent = client
            .batch_execute_statement()
            .set_statements(Some(statements))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .customize()
            .interceptor(attempts.clone())
            .send()
            .await;
        match sent {
            Ok(out) => {
                self.count_units("BatchExecuteStatement", true, out.consumed_capacity());
                let responses = out.responses().to_vec();
                if responses.len() != asked {
                    return Err(CallFailed::Failed(format!(
                        "BatchExecuteStatement answered {} of {asked} statements",
                        responses.len()
                    )));
                }
                Ok((responses, attempts.get() > 1))
            }
            Err(err) => Err(call_failed(&err)),
        }
    }

    /// Takes up to [`PIECE_KEYS`] keys: a consistent read, then statements (see the
    /// module documentation). Keys it cannot settle are left `alone`. With an `epoch`
    /// (`lock_acquire: 'epochs'`), each key is taken pending in it, at its index.
    pub(super) async fn acquire_statements(
        &self,
        client: &Client,
        owner: &str,
        now_ms: i64,
        chunk: &[AcquireRequest],
        epoch: Option<u64>,
        gate: &CallGate,
    ) -> ChunkAnswer {
        let mut out: Vec<Option<Result<Acquired, StoreError>>> =
            (0..chunk.len()).map(|_| None).collect();
        let at = |i: usize| {
            epoch.map(|epoch| EpochSlot {
                epoch,
                slot: i as u32,
            })
        };
        // Taken: in an epoch, the owner's ledger learns the key's slot.
        let took = |i: usize| {
            if let Some(at) = at(i) {
                let r = &chunk[i];
                self.epochs
                    .taken(owner, &r.key, at, epochs::key_ttl(r, now_ms));
            }
            Some(Ok(Acquired::FRESH))
        };
        // Pending in another epoch: settled through it at the end.
        let mut resolve: Vec<(usize, KeyRecord)> = Vec::new();
        let mut alone: Vec<(usize, bool)> = Vec::new();
        let acquiring = |i: usize| format!("acquiring key {:?}", chunk[i].key);
        // A key twice in one call is refused: the second is asked for alone.
        let mut seen = HashSet::with_capacity(chunk.len());
        let mut ask = Vec::with_capacity(chunk.len());
        for (i, r) in chunk.iter().enumerate() {
            match seen.insert(r.key.as_str()) {
                true => ask.push(i),
                false => alone.push((i, false)),
            }
        }
        let keys: Vec<&str> = ask.iter().map(|&i| chunk[i].key.as_str()).collect();
        // In an epoch the first read is eventually consistent (half a read unit): every
        // write it leads to is conditional, and a key it finds changed is read again
        // strongly consistent; what it decides without a write holds from a stale answer
        // too (a commit, on a key record or in an epoch, is never undone inside its window,
        // and a live lease is waited for and asked again). While few keys exist, there is
        // no first read: every key is written as if read absent (`first_read.rs`).
        let consistent = epoch.is_none();
        let read_units = if consistent { 1.0 } else { 0.5 };
        let read_first = self.first_read.read_first(read_units);
        let items = if !read_first {
            HashMap::new()
        } else {
            match gate.run(self.read_items(client, &keys, consistent)).await {
                Ok(items) => {
                    self.first_read.observe(items.len(), keys.len());
                    items
                }
                Err(CallFailed::Refused) => {
                    alone.extend(ask.into_iter().map(|i| (i, false)));
                    return ChunkAnswer { out, alone };
                }
                Err(CallFailed::Failed(why)) => {
                    for i in ask {
                        out[i] = Some(Err(self.fail(&acquiring(i), &why)));
                    }
                    return ChunkAnswer { out, alone };
                }
            }
        };
        // Written unread: the keys found to exist are learnt from the first round's refusals.
        let mut first_round_unread = !read_first;
        let mut writes: Vec<(usize, Write)> = Vec::with_capacity(ask.len());
        for i in ask {
            let r = &chunk[i];
            match self.plan(owner, now_ms, r, items.get(&r.key), epoch.is_some()) {
                Plan::Write(w) => writes.push((i, w)),
                Plan::Held(rec) => out[i] = Some(Ok(Acquired::Held(Some(rec)))),
                Plan::Alone => alone.push((i, false)),
                Plan::Resolve(key) => resolve.push((i, key)),
            }
        }
        // Whether a call that carried the key's statement may have written it unseen.
        let mut maybe_written = vec![false; chunk.len()];
        let mut left = writes;
        let mut retries = Retries::default();
        while !left.is_empty() {
            let form = self.dialect.form();
            if form.is_none() {
                // Both forms of UPDATE refused: what one would take goes alone.
                let (fresh, rest): (Vec<_>, Vec<_>) =
                    left.into_iter().partition(|&(_, w)| w == Write::Fresh);
                alone.extend(fresh.into_iter().map(|(i, _)| (i, maybe_written[i])));
                left = rest;
            }
            let form = form.unwrap_or(Form::Documented);
            let mut calls = Vec::new();
            let mut sent: Vec<&[(usize, Write)]> = Vec::new();
            for part in left.chunks(STATEMENTS_MAX) {
                let built = part
                    .iter()
                    .map(|&(i, w)| self.acquire_statement(owner, now_ms, &chunk[i], w, form, at(i)))
                    .collect::<Result<Vec<_>, _>>();
                match built {
                    Ok(statements) => {
                        calls.push(gate.run(self.execute(client, statements)));
                        sent.push(part);
                    }
                    Err(e) => {
                        for &(i, _) in part {
                            out[i] = Some(Err(StoreError(e.0.clone())));
                        }
                    }
                }
            }
            let answers = join_all(calls).await;
            let mut again = Vec::new();
            // The item changed since the read: read again.
            let mut changed = Vec::new();
            // Refused in the form they were written in: sent again at once in the other.
            let mut rewritten = Vec::new();
            for (part, answer) in sent.into_iter().zip(answers) {
                let (responses, retried) = match answer {
                    Ok(a) => a,
                    Err(CallFailed::Refused) => {
                        alone.extend(part.iter().map(|&(i, _)| (i, maybe_written[i])));
                        continue;
                    }
                    Err(CallFailed::Failed(why)) => {
                        for &(i, _) in part {
                            out[i] = Some(Err(self.fail(&acquiring(i), &why)));
                        }
                        continue;
                    }
                };
                let updates = part.iter().zip(&responses);
                if updates
                    .filter(|((_, w), _)| *w == Write::Fresh)
                    .any(|(_, r)| read(r))
                {
                    self.dialect.read(form);
                }
                for (&(i, w), response) in part.iter().zip(&responses) {
                    maybe_written[i] |= retried;
                    let Some(error) = response.error() else {
                        out[i] = took(i);
                        continue;
                    };
                    match Outcome::of(error.code()) {
                        Outcome::Refused
                            if w == Write::Fresh
                                && self.dialect.refused(form, &self.table.name)
                                    == Verdict::Retry =>
                        {
                            rewritten.push((i, w));
                        }
                        Outcome::Changed => changed.push(i),
                        Outcome::Refused => alone.push((i, maybe_written[i])),
                        Outcome::Transient => {
                            // An internal error may have written it.
                            maybe_written[i] |= error.code() == Some(&Code::InternalServerError);
                            again.push((i, w));
                        }
                        Outcome::Failed => {
                            out[i] = Some(Err(self.fail(&acquiring(i), statement_error(response))));
                        }
                    }
                }
            }
            // Refused because nothing was read: no sign of a race, so no backoff for them.
            let unread = std::mem::take(&mut first_round_unread);
            if unread {
                self.first_read.observe(changed.len(), keys.len());
            }
            // Written again: found absent or committed and past its TTL by the re-read.
            let mut anew = Vec::new();
            if !changed.is_empty() {
                let keys: Vec<&str> = changed.iter().map(|&i| chunk[i].key.as_str()).collect();
                match gate.run(self.read_items(client, &keys, true)).await {
                    Ok(items) => {
                        for i in changed {
                            let r = &chunk[i];
                            let item = items.get(&r.key);
                            // An earlier attempt of a call that carried the key's statement
                            // wrote exactly this: the key is taken fresh (`written_by`).
                            // In an epoch, in this piece's epoch and slot too: another
                            // piece of the call may have written this owner, lease and
                            // instant in its own.
                            let ours = maybe_written[i]
                                && item.is_some_and(|item| {
                                    let key = self.decode_key(item);
                                    key.epoch == at(i)
                                        && written_by(owner, now_ms, r, &key.lock) == Written::Fresh
                                });
                            if ours {
                                tracing::debug!(
                                    table = %self.table.name,
                                    key = %r.key,
                                    "lock key taken by an earlier attempt of the same statement"
                                );
                                out[i] = took(i);
                                continue;
                            }
                            match self.plan(owner, now_ms, r, item, epoch.is_some()) {
                                Plan::Write(w) => anew.push((i, w)),
                                Plan::Held(rec) => out[i] = Some(Ok(Acquired::Held(Some(rec)))),
                                Plan::Alone => alone.push((i, maybe_written[i])),
                                Plan::Resolve(key) => resolve.push((i, key)),
                            }
                        }
                    }
                    Err(_) => alone.extend(changed.into_iter().map(|i| (i, maybe_written[i]))),
                }
            }
            let wait = !again.is_empty() || (!anew.is_empty() && !unread);
            if wait && !retries.wait_before_next().await {
                for (i, _) in again.drain(..) {
                    out[i] = Some(Err(self.fail(
                        &acquiring(i),
                        format!(
                            "statement still throttled after {} attempts",
                            super::lock::STORE_ATTEMPTS
                        ),
                    )));
                }
                // Changed at every attempt: taken alone.
                alone.extend(anew.drain(..).map(|(i, _)| (i, maybe_written[i])));
            }
            again.append(&mut anew);
            again.append(&mut rewritten);
            left = again;
        }
        if let (Some(epoch), false) = (epoch, resolve.is_empty()) {
            for (i, got) in self
                .resolve_epochs(client, owner, now_ms, chunk, resolve, epoch, gate)
                .await
            {
                out[i] = Some(got);
            }
        }
        ChunkAnswer { out, alone }
    }

    /// What `owner`'s acquisition of `r` at `now_ms` does with `item`, read strongly
    /// consistent (see the module documentation); a held key is logged. With `epochs`, a
    /// record pending in an epoch is settled through its epoch (`epochs.rs`).
    fn plan(
        &self,
        owner: &str,
        now_ms: i64,
        r: &AcquireRequest,
        item: Option<&HashMap<String, AttributeValue>>,
        epochs: bool,
    ) -> Plan {
        let Some(item) = item else {
            return Plan::Write(Write::Insert);
        };
        if epochs {
            // Committed or not, and its window, are in its epoch's record.
            let key = self.decode_key(item);
            if key.epoch_pending() {
                return Plan::Resolve(key);
            }
        }
        let rec = self.decode(item);
        if !rec.takeable_by(owner, now_ms, r.skew_ms) {
            self.log_held(r, Some(&rec));
            return Plan::Held(rec);
        }
        match rec.status {
            LockStatus::Committed => Plan::Write(Write::Fresh),
            LockStatus::Pending { .. } => Plan::Alone,
        }
    }
}

/// Whether the service read a statement: it was applied, or its condition evaluated.
fn read(r: &BatchStatementResponse) -> bool {
    r.error()
        .is_none_or(|e| Outcome::of(e.code()) == Outcome::Changed)
}

/// What a failed call means: refused as a whole, or failed.
fn call_failed<E>(err: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>) -> CallFailed
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
{
    match err.as_service_error() {
        Some(e) if e.code() == Some("ValidationException") => CallFailed::Refused,
        _ => CallFailed::Failed(describe_error(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_errors_are_classified() {
        assert_eq!(Outcome::of(Some(&Code::DuplicateItem)), Outcome::Changed);
        assert_eq!(
            Outcome::of(Some(&Code::ConditionalCheckFailed)),
            Outcome::Changed
        );
        for c in [
            Code::ProvisionedThroughputExceeded,
            Code::ThrottlingError,
            Code::InternalServerError,
            Code::TransactionConflict,
            Code::RequestLimitExceeded,
        ] {
            assert_eq!(Outcome::of(Some(&c)), Outcome::Transient, "{c:?}");
        }
        assert_eq!(Outcome::of(Some(&Code::ValidationError)), Outcome::Refused);
        assert_eq!(Outcome::of(Some(&Code::AccessDenied)), Outcome::Failed);
        assert_eq!(Outcome::of(None), Outcome::Failed);
    }

    /// However many pieces make them, no more calls than the gate's permits are in flight,
    /// and as many as that are.
    #[tokio::test]
    async fn the_gate_keeps_its_number_of_calls_in_flight() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for permits in [1, 3, 32] {
            let gate = CallGate::new(permits);
            let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let call = || async {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::task::yield_now().await;
                tokio::task::yield_now().await;
                now.fetch_sub(1, Ordering::SeqCst);
            };
            // Pieces of one read, then four calls together, as acquisition makes them.
            let pieces = (0..40).map(|_| async {
                gate.run(call()).await;
                join_all((0..4).map(|_| gate.run(call()))).await;
            });
            join_all(pieces).await;
            assert_eq!(most.load(Ordering::SeqCst), permits, "{permits} permits");
        }
        assert_eq!(CallGate::new(0).0.available_permits(), 1);
    }
}
