//! The machinery every `send_*` transform shares: batching, auxiliary transforms and
//! delivery tracking. A send is a [`Sender`] around a [`Destination`], which only knows how
//! to deliver one batch of byte items and say which of them it could not deliver.
//!
//! Data flow. A data message passes through the send unchanged (sending is a side effect);
//! a copy of it (its data and its acknowledgement tokens, no metadata) goes into a per-batch-key
//! [`BatchBuffer`] (the key is the text of the value at `object.batch_key`, `""` when it is
//! absent). A batch closes when it is full (count or size), when it reaches its maximum age
//! (`batch.duration`, enforced by the pipeline's timer through [`Transform::deadline`] and
//! [`Transform::expire`]), or on a ctrl message, which closes every batch in the order they
//! were opened before the ctrl is passed on. With `auxiliary_transforms`, a closed batch's
//! items become fresh data messages (no metadata), followed by one ctrl, and run through that
//! list; the data of what comes out (ctrl aside) is what is sent.
//!
//! Delivery tracking (where sluice differs from Substation). Substation resets every batch
//! after a successful flush and keeps them all after a failed one, so a retry re-sends what
//! was already delivered. Here each closed batch waits in a queue until the destination has
//! accepted it: accepted items are dropped (their tokens resolve as delivered); undelivered
//! ones stay queued, in order and ahead of anything newer, and the error is returned, so a
//! `meta_retry` around the send re-sends exactly what was not delivered. A destination with
//! per-item results (Kinesis PutRecords) reports the indexes that failed; with auxiliary
//! transforms the item↔message mapping is lost, so such a batch succeeds or fails as a whole.
//! [`Transform::abort`] drops everything held and marks those tokens failed.
//!
//! Under `meta_kv_store_lock` (a message carrying lock tickets, inside the lock or after
//! it), a send does three things more, so that a message is delivered once at every send
//! however its attempts go (see `crate::kv_store::lock::ticket`): it numbers the copies of
//! each message it holds, per lock, and does not hold a copy an earlier attempt recorded as
//! delivered by this send (the copy passes on as delivered); it records each copy it
//! delivers in the message's ticket, which the lock keeps with the key when another send
//! of the message fails; and right before a destination call it checks each item's lease,
//! failing (certainly, unsent) the items whose key may have been taken over. A send is
//! known across processes by its progress id: a hash of where it is in the config, its
//! type and its settings, so the same config run again finds its own records, and a
//! changed send starts afresh (it sends again rather than skip what it never sent).
//!
//! A data message whose data the destination cannot take at all (over its item size limit,
//! or against a rule of its own, [`Destination::check`]: SQS takes only XML characters,
//! EventBridge only JSON objects) is refused with an error naming the rule when it arrives,
//! and never held, so it cannot block a batch. With auxiliary transforms the rules apply to
//! their outputs, and an output that breaks one fails its batch.
//!
//! When a data message arrives while undelivered items are queued, they are retried first;
//! if they still fail the message is refused with that error (it is not held, so a retry of
//! the same message adds it once). A batch that closes *because* a message was accepted and
//! then fails cannot refuse that message any more (it is already held): the failure stays
//! queued and is retried, and reported if it persists, by the next call — the pipeline's
//! timer asks for it at once through [`Transform::deadline`], and the ctrl that ends every
//! input always does. So an error never leaves the send holding a copy it will send again,
//! and no failure is swallowed.
//!
//! The state sits behind a std mutex that is never held across an `.await`. Deliveries of one
//! send are serialised by an async gate, so batches reach the destination in the order they
//! closed and the auxiliary list sees one batch at a time. The messages a pipeline hands over
//! together ([`StatefulTransform::transform_batch`]) are taken under one hold of the gate, and
//! a send holds of each only its data and tokens ([`Held`]): with several workers this runs
//! on the driver's one thread for every message, so what it does per message bounds them all.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use sluice_engine::TransformName;
use sluice_engine::ack::AckSet;
use sluice_engine::batch::{Batch, BatchBuffer, BatchLimits};
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{
    Build, ConfigError, FAILURES_IN_A_ROW_TO_STOP, Key, LineSink, Message, OutputsReach, Pipeline,
    StatefulTransform, TransformError, Value, async_trait, value,
};

use crate::kv_store::LockTicket;
use crate::kv_store::lock::ticket::{Copies, tickets};

/// One closed batch, as a destination sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outgoing {
    /// The batch key (`""` when no `object.batch_key` is configured or the value is absent).
    pub key: String,
    /// The items, in order.
    pub items: Vec<Bytes>,
    /// The `meta_kv_store_lock` locks guarding the items (see [`ItemLocks`]).
    pub locks: ItemLocks,
    /// The send's progress id (see the module documentation).
    // Read by the transactional DynamoDB send, which records its progress itself.
    #[cfg_attr(not(feature = "aws"), allow(dead_code))]
    pub send: Arc<str>,
    /// Which copy of each locked message the batch holds at this send: per item, or with
    /// auxiliary transforms (which lose the mapping to items) per message they were made
    /// from; empty when no item went through a lock.
    #[cfg_attr(not(feature = "aws"), allow(dead_code))]
    pub copies: Vec<Copies>,
}

/// The locks guarding a batch's items: the lock tickets among their messages' tokens
/// ([`crate::kv_store::lock::ticket`]). Empty when no item went through a lock.
#[derive(Debug, Clone, Default)]
pub(crate) enum ItemLocks {
    /// No item carries a lock.
    #[default]
    None,
    /// Item `i`'s locks are `[i]` (without auxiliary transforms).
    PerItem(Vec<Vec<Arc<LockTicket>>>),
    /// The locks of the batch's messages, which auxiliary transforms turned into items
    /// that no longer map one to one.
    Batch(Vec<Arc<LockTicket>>),
}

impl ItemLocks {
    /// Every lock of the batch, in item order (an item's first).
    pub(crate) fn all(&self) -> Vec<Arc<LockTicket>> {
        match self {
            ItemLocks::None => Vec::new(),
            ItemLocks::PerItem(per) => per.iter().flatten().cloned().collect(),
            ItemLocks::Batch(all) => all.clone(),
        }
    }

    /// Item `i`'s locks, when the mapping is known (the AWS sends write per item).
    #[cfg(feature = "aws")]
    pub(crate) fn of(&self, i: usize) -> Option<&[Arc<LockTicket>]> {
        match self {
            ItemLocks::PerItem(per) => per.get(i).map(Vec::as_slice),
            _ => None,
        }
    }

    /// Whether every item carries a lock (only known without auxiliary transforms).
    pub(crate) fn every_item_locked(&self) -> bool {
        matches!(self, ItemLocks::PerItem(per) if per.iter().all(|l| !l.is_empty()))
    }

    fn of_held(held: &[Held], per_item: bool) -> ItemLocks {
        if held.iter().all(|h| tickets(&h.acks).next().is_none()) {
            return ItemLocks::None;
        }
        let per: Vec<Vec<Arc<LockTicket>>> =
            held.iter().map(|h| tickets(&h.acks).collect()).collect();
        if per_item {
            ItemLocks::PerItem(per)
        } else {
            ItemLocks::Batch(per.into_iter().flatten().collect())
        }
    }
}

impl Outgoing {
    /// The total size of the items in bytes.
    pub(crate) fn size(&self) -> usize {
        self.items.iter().map(|i| i.len()).sum()
    }
}

/// A message as a send holds it until the destination accepts it: its data and its
/// acknowledgement tokens (the metadata and any parsed form are not needed to send it), and,
/// per lock it carries, which copy of the locked message it is at this send.
#[derive(Debug)]
struct Held {
    data: Bytes,
    acks: AckSet,
    copies: Copies,
    /// The send holding it, and the copies it marked held there (let go of when the item
    /// goes, delivered, failed or dropped: see [`LockTicket::hold`]).
    holds: Option<(Arc<str>, Copies)>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some((send, holds)) = &self.holds {
            for (t, c) in holds {
                t.unhold(send, *c);
            }
        }
    }
}

impl Held {
    fn fail_acks(&self, reason: &str) {
        sluice_engine::ack::fail_all(&self.acks, reason);
    }
}

/// Which items of a batch the destination did not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undelivered {
    /// None of them (or it cannot tell which).
    All,
    /// The items at these indexes; the others were accepted. An empty list is read as
    /// [`Undelivered::All`], since an error with no failed item cannot be trusted.
    Items(Vec<usize>),
}

/// A failed delivery: what was not delivered and why.
#[derive(Debug)]
pub(crate) struct SendError {
    /// The items that were not accepted.
    pub undelivered: Undelivered,
    /// Why.
    pub error: TransformError,
    /// Whether the destination may have applied them anyway: it answered with an error (a
    /// 5xx, a timeout) after the request went out. The messages' acknowledgements then say
    /// so if they end up failed, and a lock leaves their keys for the next attempt to check
    /// instead of releasing them.
    pub uncertain: bool,
}

impl SendError {
    /// Only the items at `indexes` failed.
    pub(crate) fn items(indexes: Vec<usize>, error: TransformError) -> Self {
        SendError {
            undelivered: Undelivered::Items(indexes),
            error,
            uncertain: false,
        }
    }

    /// The same failure, which may have been applied (a call whose answer was lost).
    pub(crate) fn uncertain(mut self, uncertain: bool) -> Self {
        self.uncertain = uncertain;
        self
    }
}

impl From<TransformError> for SendError {
    fn from(error: TransformError) -> Self {
        SendError {
            undelivered: Undelivered::All,
            error,
            uncertain: false,
        }
    }
}

/// Where a send delivers its batches.
#[async_trait]
pub(crate) trait Destination: Send + Sync + 'static {
    /// Delivers one batch (never empty). `Ok` means every item was accepted.
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError>;

    /// Checks that the destination can take `item` at all (e.g. SQS takes only text of
    /// the characters XML allows); the error says which rule it breaks. Called when a
    /// message arrives (without auxiliary transforms; a failing message is refused, never
    /// held) or on each output of the auxiliary transforms (a failing one fails its batch),
    /// before the item size limit ([`Caps::item_size`]) is checked.
    fn check(&self, _item: &[u8]) -> Result<(), String> {
        Ok(())
    }

    /// Checks that a message's batch key can name where its batch goes (a key used as a
    /// path's prefix must stay inside it: [`super::data_path`]); the error names the key and
    /// the settings. Called when a message arrives: a failing message is refused alone,
    /// never held.
    fn check_key(&self, _key: &str) -> Result<(), String> {
        Ok(())
    }

    /// Whether the object `name` exists: an earlier attempt at some of a batch's messages
    /// recorded in their locks that it placed copies there before writing it
    /// (`ObjectPerBatch::place`), and an object that exists holds them, so they are not
    /// sent again. Only the sends that write one object per batch place copies; the
    /// others are never asked.
    async fn holds_object(&self, _name: &str) -> Result<bool, TransformError> {
        Ok(false)
    }

    /// The stream it writes a batch's items to, one line each, when it is one (standard
    /// output): see [`Sender::line_sink`].
    fn line_sink(&self) -> Option<Arc<dyn LineSink>> {
        None
    }
}

/// What a destination accepts at most; configured batch limits are honoured only within
/// these caps, as in Substation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Most items per batch.
    pub count: usize,
    /// Most bytes per batch.
    pub size: usize,
    /// Most bytes per item (an item over it is an error naming the limit).
    pub item_size: usize,
}

impl Caps {
    /// No cap (local files, stdout).
    pub(crate) const NONE: Caps = Caps {
        count: usize::MAX,
        size: usize::MAX,
        item_size: usize::MAX,
    };
}

/// The settings every send shares, gathered from its settings struct.
#[derive(Debug, Clone, Default)]
pub(crate) struct SendOptions {
    /// `batch`.
    pub batch: BatchSettings,
    /// `auxiliary_transforms` (the library's `aux_tforms`), a list of transform configs.
    pub auxiliary_transforms: Option<Value>,
    /// `object` (only `batch_key` is used).
    pub object: ObjectSettings,
}

struct State {
    buffer: BatchBuffer<Held>,
    /// Closed batches not delivered yet, oldest first.
    queue: VecDeque<Batch<Held>>,
    /// When a failed batch was put back, if one is queued: the retry is due at once.
    failed_at: Option<Instant>,
    /// Bumped by `abort`, so that a delivery in flight during an abort does not requeue.
    epoch: u64,
}

/// A send transform: batches, auxiliary transforms and delivery tracking around a
/// [`Destination`].
pub(crate) struct Sender<D> {
    dest: D,
    /// Its name in the pipeline, which names it in the errors it reports itself.
    name: TransformName,
    /// What identifies this send in a lock's progress (see the module documentation).
    progress_id: Arc<str>,
    batch_key: Option<Key>,
    aux: Option<Pipeline>,
    item_size: usize,
    state: Mutex<State>,
    gate: tokio::sync::Mutex<()>,
    /// What it passes on goes nowhere that reports on it ([`OutputsReach::Nowhere`]): the
    /// copies passed on drop their tokens.
    unreported: std::sync::atomic::AtomicBool,
    /// Nothing retries it ([`StatefulTransform::fails_alone`]): a batch that fails fails
    /// its messages at once, and a message it refuses fails alone.
    alone: std::sync::atomic::AtomicBool,
    /// Where it fails alone: batches in a row of which nothing was delivered.
    failed_in_a_row: AtomicU32,
}

impl<D: Destination> Sender<D> {
    /// The destination's stream, when what is written is each message's data as it came:
    /// no auxiliary transforms (which change what is written) and no batch key (which
    /// changes the order). Built with it, the send is a [`sluice_engine::LineSink`] the
    /// pipeline's workers may write to ([`sluice_engine::Transform::writing_lines`]).
    pub(crate) fn line_sink(&self) -> Option<Arc<dyn LineSink>> {
        if self.aux.is_some() || self.batch_key.is_some() {
            return None;
        }
        Some(Arc::new(SendLines {
            sink: self.dest.line_sink()?,
            item_size: self.item_size,
            limits: self.lock().buffer.limits(),
        }))
    }

    /// Builds a send from its shared settings, the destination's caps and the destination.
    pub(crate) fn new(
        b: &Build<'_>,
        options: SendOptions,
        caps: Caps,
        dest: D,
    ) -> Result<Self, ConfigError> {
        let batch_key = b.opt_key("object.batch_key", &options.object.batch_key)?;
        let aux = match options.auxiliary_transforms {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) if a.is_empty() => None,
            Some(list) => Some(b.pipeline("auxiliary_transforms", &list)?),
        };
        let limits = BatchLimits::from(options.batch).capped(caps.count, caps.size);
        Ok(Sender {
            name: b.name(),
            ..Sender::from_parts(dest, limits, caps.item_size, batch_key, aux)
        }
        .with_progress_id(progress_id(b)))
    }

    /// The same send, known in locks' progress as `id`.
    pub(crate) fn with_progress_id(mut self, id: String) -> Self {
        self.progress_id = id.into();
        self
    }

    /// A send from parts already built (limits already capped).
    pub(crate) fn from_parts(
        dest: D,
        limits: BatchLimits,
        item_size: usize,
        batch_key: Option<Key>,
        aux: Option<Pipeline>,
    ) -> Self {
        Sender {
            dest,
            name: TransformName::from("send"),
            progress_id: Arc::from("send"),
            batch_key,
            aux,
            item_size,
            state: Mutex::new(State {
                buffer: BatchBuffer::new(limits),
                queue: VecDeque::new(),
                failed_at: None,
                epoch: 0,
            }),
            gate: tokio::sync::Mutex::new(()),
            unreported: std::sync::atomic::AtomicBool::new(false),
            alone: std::sync::atomic::AtomicBool::new(false),
            failed_in_a_row: AtomicU32::new(0),
        }
    }

    /// The destination.
    #[cfg(test)]
    pub(crate) fn destination(&self) -> &D {
        &self.dest
    }

    /// The batch limits in force (after the destination's caps).
    #[cfg(test)]
    pub(crate) fn limits(&self) -> BatchLimits {
        self.lock().buffer.limits()
    }

    /// How many items of closed batches wait for delivery (after a failure).
    #[cfg(test)]
    pub(crate) fn undelivered(&self) -> usize {
        self.lock().queue.iter().map(|b| b.items.len()).sum()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fails_alone_now(&self) -> bool {
        self.alone.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn key_of(&self, msg: &Message) -> String {
        match &self.batch_key {
            Some(k) => msg
                .get(k)
                .map(|v| value::to_text(&v).into_owned())
                .unwrap_or_default(),
            None => String::new(),
        }
    }

    /// Checks one item against the destination's rules, then its size limit.
    fn check_item(&self, item: &[u8]) -> Result<(), TransformError> {
        if let Err(rule) = self.dest.check(item) {
            return Err(TransformError::failed(format!(
                "data could not be sent: {rule}"
            )));
        }
        check_item_size(item.len(), self.item_size)
    }

    /// Delivers the queued batches in order. Called with the gate held. On failure the
    /// undelivered items go back to the front of the queue and the error is returned.
    async fn drain(&self) -> Result<(), TransformError> {
        loop {
            let (batch, epoch) = {
                let mut st = self.lock();
                match st.queue.pop_front() {
                    Some(b) => (b, st.epoch),
                    None => {
                        st.failed_at = None;
                        return Ok(());
                    }
                }
            };
            let items = batch.items.len();
            let Err((rest, e)) = self.deliver(batch).await else {
                if self.fails_alone_now() {
                    self.failed_in_a_row.store(0, Ordering::Relaxed);
                }
                continue;
            };
            if self.fails_alone_now() && !e.ends_run() {
                // Nothing retries it: its messages fail now, alone, and the queue goes on,
                // unless batches of which nothing was delivered keep coming (a destination
                // that is down): then the run stops.
                let reason = e.text_within(&self.name);
                tracing::debug!(send = %self.progress_id, error = %reason, items = rest.items.len(), "a batch was not delivered; its messages fail, the others go on");
                for m in &rest.items {
                    m.fail_acks(&reason);
                }
                let n = if rest.items.len() >= items && items > 0 {
                    self.failed_in_a_row.fetch_add(1, Ordering::Relaxed) + 1
                } else {
                    self.failed_in_a_row.store(0, Ordering::Relaxed);
                    0
                };
                if n >= FAILURES_IN_A_ROW_TO_STOP {
                    return Err(
                        e.stopping(format!("{n} batches in a row were not delivered at all"))
                    );
                }
                continue;
            }
            let mut st = self.lock();
            if st.epoch == epoch {
                if !rest.items.is_empty() {
                    st.queue.push_front(rest);
                    st.failed_at.get_or_insert_with(Instant::now);
                }
            } else {
                drop(st);
                let reason = e.to_string();
                for m in &rest.items {
                    m.fail_acks(&reason);
                }
            }
            return Err(e);
        }
    }

    /// Sends one batch. Returns the undelivered part on failure; what is dropped here was
    /// delivered, so its tokens resolve.
    async fn deliver(&self, batch: Batch<Held>) -> Result<(), (Batch<Held>, TransformError)> {
        let batch = refuse_lapsed(batch);
        let batch = self.skip_placed(batch).await?;
        if batch.items.is_empty() {
            return Ok(());
        }
        if let Some(aux) = &self.aux {
            let mut msgs: Vec<Message> = batch
                .items
                .iter()
                .map(|m| Message::new(m.data.clone()))
                .collect();
            msgs.push(Message::ctrl());
            let outs = match aux.apply(msgs).await {
                Ok(o) => o,
                Err(e) => {
                    aux.abort(&e.to_string()).await;
                    return Err((batch, e));
                }
            };
            let items: Vec<Bytes> = outs
                .iter()
                .filter(|m| !m.is_ctrl())
                .map(|m| m.data().clone())
                .collect();
            if let Err(e) = items.iter().try_for_each(|i| self.check_item(i)) {
                return Err((batch, e));
            }
            if items.is_empty() {
                return Ok(());
            }
            let locks = ItemLocks::of_held(&batch.items, false);
            let copies = match locks {
                ItemLocks::None => Vec::new(),
                _ => batch.items.iter().map(|m| m.copies.clone()).collect(),
            };
            let out = Outgoing {
                key: batch.key.clone(),
                items,
                locks,
                send: self.progress_id.clone(),
                copies,
            };
            return match self.dest.send(&out).await {
                Ok(()) => {
                    self.mark_accepted(&batch.items);
                    Ok(())
                }
                Err(e) => {
                    // Some outputs accepted and others not: which messages they came from
                    // is lost, so each may have been delivered (its lock keeps its key for
                    // the next attempt to check, instead of giving it back).
                    let partial = match &e.undelivered {
                        Undelivered::Items(idx) => {
                            let failed = idx.iter().filter(|&&i| i < out.items.len()).count();
                            failed > 0 && failed < out.items.len()
                        }
                        Undelivered::All => false,
                    };
                    if e.uncertain || partial {
                        mark_uncertain(&batch.items);
                    }
                    Err((batch, e.error))
                }
            };
        }
        let locks = ItemLocks::of_held(&batch.items, true);
        let copies = match locks {
            ItemLocks::None => Vec::new(),
            _ => batch.items.iter().map(|m| m.copies.clone()).collect(),
        };
        let out = Outgoing {
            key: batch.key.clone(),
            items: batch.items.iter().map(|m| m.data.clone()).collect(),
            locks,
            send: self.progress_id.clone(),
            copies,
        };
        match self.dest.send(&out).await {
            Ok(()) => {
                self.mark_accepted(&batch.items);
                Ok(())
            }
            Err(SendError {
                undelivered: Undelivered::Items(idx),
                error,
                uncertain,
            }) if idx.iter().any(|&i| i < out.items.len()) => {
                let mut failed = vec![false; out.items.len()];
                for i in idx {
                    if let Some(f) = failed.get_mut(i) {
                        *f = true;
                    }
                }
                let Batch { key, items, .. } = batch;
                let mut size = 0;
                let kept: Vec<Held> = items
                    .into_iter()
                    .zip(failed)
                    .filter_map(|(m, f)| {
                        if !f {
                            self.mark_accepted(std::slice::from_ref(&m));
                        }
                        f.then(|| {
                            size += m.data.len();
                            m
                        })
                    })
                    .collect();
                if uncertain {
                    mark_uncertain(&kept);
                }
                Err((
                    Batch {
                        key,
                        items: kept,
                        size,
                    },
                    error,
                ))
            }
            Err(e) => {
                if e.uncertain {
                    mark_uncertain(&batch.items);
                }
                Err((batch, e.error))
            }
        }
    }
}

impl<D: Destination> Sender<D> {
    /// `batch` without the messages an earlier attempt placed in an object that exists
    /// ([`Destination::holds_object`]): every copy they hold here was delivered before (by
    /// its progress, or in such an object). Those are accepted without being sent. Each
    /// object is looked up once; a lookup that fails fails the batch, which nothing sent.
    async fn skip_placed(
        &self,
        batch: Batch<Held>,
    ) -> Result<Batch<Held>, (Batch<Held>, TransformError)> {
        let send = &*self.progress_id;
        // The common case, no lock placed anything: no list is built.
        if !batch
            .items
            .iter()
            .any(|m| m.copies.iter().any(|(t, _)| t.has_placements()))
        {
            return Ok(batch);
        }
        let placed = |m: &Held| m.copies.iter().any(|(t, c)| !t.placed(send, *c).is_empty());
        let mut exists: std::collections::HashMap<String, bool> = Default::default();
        let mut found = vec![false; batch.items.len()];
        for (i, m) in batch.items.iter().enumerate() {
            if m.copies.is_empty() || !placed(m) {
                continue;
            }
            let mut all = true;
            for (t, c) in &m.copies {
                if t.delivered_before(send, *c) {
                    continue;
                }
                let mut here = false;
                for name in t.placed(send, *c) {
                    let known = match exists.get(&name) {
                        Some(&known) => known,
                        None => match self.dest.holds_object(&name).await {
                            Ok(known) => {
                                exists.insert(name.clone(), known);
                                known
                            }
                            Err(e) => return Err((batch, e)),
                        },
                    };
                    if known {
                        here = true;
                        break;
                    }
                }
                if !here {
                    all = false;
                    break;
                }
            }
            found[i] = all;
        }
        let Batch { key, items, .. } = batch;
        let mut size = 0;
        let mut kept = Vec::with_capacity(items.len());
        for (m, found) in items.into_iter().zip(found) {
            if found {
                tracing::debug!(
                    send,
                    "a message an earlier attempt wrote in an object that exists is not written again"
                );
                self.mark_accepted(std::slice::from_ref(&m));
            } else {
                size += m.data.len();
                kept.push(m);
            }
        }
        Ok(Batch {
            key,
            items: kept,
            size,
        })
    }
}

/// An item of `len` bytes against the destination's item size limit.
fn check_item_size(len: usize, item_size: usize) -> Result<(), TransformError> {
    if len > item_size {
        return Err(TransformError::failed(format!(
            "data could not be sent: an item of {len} bytes exceeds the destination's item size limit of {item_size} bytes"
        )));
    }
    Ok(())
}

/// A send's stream as the pipeline's workers write it ([`Sender::line_sink`]):
/// each message's data is checked as the send checks a message when it arrives (the
/// destination's own rules, which its sink checks, then the item size limit and the batch
/// size), with the same errors.
struct SendLines {
    sink: Arc<dyn LineSink>,
    item_size: usize,
    limits: BatchLimits,
}

impl LineSink for SendLines {
    fn write_lines(&self, lines: &[u8]) -> Result<(), TransformError> {
        self.sink.write_lines(lines)
    }

    fn check(&self, data: &[u8]) -> Result<(), TransformError> {
        self.sink.check(data)?;
        check_item_size(data.len(), self.item_size)?;
        self.limits
            .admits(data.len())
            .map_err(|e| TransformError::failed(e.to_string()))
    }
}

impl<D> Sender<D> {
    /// Marks the messages' tokens as accepted by the destination, and records the copies'
    /// delivery in their locks' tickets.
    fn mark_accepted(&self, msgs: &[Held]) {
        for m in msgs {
            for t in &m.acks {
                t.mark_accepted();
            }
            for (ticket, copy) in &m.copies {
                ticket.record_delivery(&self.progress_id, *copy);
            }
        }
    }

    /// Numbers `held`'s copy for each lock it carries, and marks those copies held; `true`
    /// when it is not to be held: every lock says that copy was delivered here already, or
    /// is held here already (the same copy again, after `meta_retry` ran the list over it
    /// again).
    fn number_copies(&self, held: &mut Held) -> bool {
        for t in tickets(&held.acks) {
            let copy = t.next_copy(&self.progress_id);
            held.copies.push((t, copy));
        }
        if held.copies.is_empty() {
            return false;
        }
        let send = &self.progress_id;
        let done = |t: &Arc<LockTicket>, c: u32| t.delivered_before(send, c);
        let mut holds = Vec::new();
        let mut skip = true;
        for (t, c) in &held.copies {
            if done(t, *c) {
                continue;
            }
            if t.hold(send, *c) {
                holds.push((t.clone(), *c));
                skip = false;
            }
        }
        if skip {
            return true;
        }
        held.holds = Some((send.clone(), holds));
        false
    }
}

/// The progress id of the send built by `b` (see the module documentation): 12 hex digits
/// of the SHA-256 of its place in the config, its type and its settings.
pub(crate) fn progress_id(b: &Build<'_>) -> String {
    let mut h = Sha256::new();
    for part in [b.location(), b.type_name(), &b.raw_settings().to_string()] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..6])
}

/// `batch` without the items whose lock may not send now (taken over, or a lease too close
/// to its end: `LockTicket::check_lease`), which fail, certainly: they were not sent.
fn refuse_lapsed(batch: Batch<Held>) -> Batch<Held> {
    let now = Instant::now();
    let lapsed = |m: &Held| m.copies.iter().find_map(|(t, _)| t.check_lease(now).err());
    if batch.items.iter().all(|m| m.copies.is_empty()) {
        return batch;
    }
    let Batch { key, items, .. } = batch;
    let mut size = 0;
    let mut kept = Vec::with_capacity(items.len());
    for m in items {
        match lapsed(&m) {
            Some(why) => m.fail_acks(&format!("data was not sent: {why}")),
            None => {
                size += m.data.len();
                kept.push(m);
            }
        }
    }
    Batch {
        key,
        items: kept,
        size,
    }
}

/// Marks the messages' tokens as possibly delivered (see [`SendError::uncertain`]), and
/// their locks, so that a send trying them again under the same locks checks first.
fn mark_uncertain(msgs: &[Held]) {
    for m in msgs {
        for t in &m.acks {
            t.mark_uncertain();
        }
        for t in tickets(&m.acks) {
            t.mark_maybe_delivered();
        }
    }
}

impl<D: Destination> Sender<D> {
    /// Takes one message (data or ctrl) with the gate held; the caller passes it on when
    /// this returns `Ok`. `clock` gives the time a batch it opens is opened at.
    async fn accept(&self, msg: &Message, clock: &mut Clock) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            {
                let mut st = self.lock();
                let all = st.buffer.take_all();
                st.queue.extend(all);
            }
            clock.drained();
            let drained = self.drain().await;
            if msg.ends_input() {
                // Failures in a row are counted within one input (a run, a Lambda
                // invocation): a warm function's next event starts afresh.
                self.failed_in_a_row.store(0, Ordering::Relaxed);
            }
            return drained;
        }
        let key = self.key_of(msg);
        self.dest.check_key(&key).map_err(TransformError::failed)?;
        let data = msg.data().clone();
        if self.aux.is_none() {
            self.check_item(&data)?;
        }
        let size = data.len();
        let mut held = Held {
            data,
            acks: msg.acks().clone(),
            copies: Vec::new(),
            holds: None,
        };
        // Earlier failures first: if they still fail, this message is refused (not held).
        if !self.lock().queue.is_empty() {
            clock.drained();
            self.drain().await?;
        }
        if self.number_copies(&mut held) {
            // An earlier attempt at the message delivered this copy here.
            tracing::debug!(send = %self.progress_id, "a copy an earlier attempt delivered is not sent again");
            return Ok(());
        }
        let closed = {
            let mut st = self.lock();
            let copies: Copies = held.copies.clone();
            let ready = match st.buffer.push_opening_at(&key, held, size, || clock.now()) {
                Ok(ready) => ready,
                Err(e) => {
                    drop(st);
                    for (t, _) in &copies {
                        t.unhold_copy(&self.progress_id);
                    }
                    return Err(TransformError::failed(e.to_string()));
                }
            };
            let closed = !ready.is_empty();
            if closed {
                st.queue.extend(ready);
            }
            closed
        };
        // The message is held now, so a failure cannot refuse it: the undelivered items are
        // retried (and the error reported if it persists) by the next call, which the
        // pipeline's timer makes at once.
        if closed {
            clock.drained();
            if let Err(e) = self.drain().await {
                if self.fails_alone_now() {
                    // Failing alone, only what ends the run comes out of a drain.
                    return Err(e);
                }
                tracing::warn!(error = %e, "send failed; undelivered items are kept and retried");
            }
        }
        Ok(())
    }
}

impl<D: Destination> Sender<D> {
    /// `m` as it goes on: without its tokens when what the send passes on goes nowhere
    /// that reports on it (the copy the send holds resolves the message).
    fn passed_on(&self, mut m: Message) -> Message {
        if self.unreported.load(std::sync::atomic::Ordering::Relaxed) && !m.is_ctrl() {
            drop(m.take_acks());
        }
        m
    }
}

/// The time a batch opens at, read once for the messages a send takes at once and again
/// after each delivery (which may take a while).
struct Clock(Option<Instant>);

impl Clock {
    fn now(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }

    fn drained(&mut self) {
        self.0 = None;
    }
}

#[async_trait]
impl<D: Destination> StatefulTransform for Sender<D> {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let _gate = self.gate.lock().await;
        self.accept(&msg, &mut Clock(None)).await?;
        out.push(self.passed_on(msg));
        Ok(())
    }

    /// The messages of a batch under one hold of the gate, with one clock reading until a
    /// delivery: what a send does per message is then a few moves, on the driver's thread.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let _gate = self.gate.lock().await;
        let mut clock = Clock(None);
        let mut rest = msgs.into_iter();
        while let Some(m) = rest.next() {
            if let Err(e) = self.accept(&m, &mut clock).await {
                if self.fails_alone_now() && !m.acks().is_empty() && !e.ends_run() {
                    // Refused alone (it is not held): the others go on.
                    m.fail_acks(&e.within(&self.name).to_string());
                    continue;
                }
                let reason = e.text_within(&self.name);
                m.fail_acks(&reason);
                for r in rest {
                    r.fail_acks(&reason);
                }
                return Err(e);
            }
            out.push(self.passed_on(m));
        }
        Ok(())
    }

    fn fails_alone(&self) {
        self.alone.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn outputs_reach(&self, reach: OutputsReach) {
        if reach == OutputsReach::Nowhere {
            self.unreported
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Items are the data's bytes; only a `batch_key` into the data reads it by path (one
    /// into the metadata does not).
    fn takes_bytes(&self) -> bool {
        self.batch_key
            .as_ref()
            .is_none_or(|k| k.target() == sluice_engine::message::Target::Meta)
    }

    fn deadline(&self) -> Option<Instant> {
        let st = self.lock();
        match (st.buffer.deadline(), st.failed_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn expire(&self, now: Instant, _out: &mut Vec<Message>) -> Result<(), TransformError> {
        let _gate = self.gate.lock().await;
        {
            let mut st = self.lock();
            let expired = st.buffer.take_expired(now);
            st.queue.extend(expired);
        }
        self.drain().await
    }

    /// The batch that failed is dropped, its messages failed; the closed batches queued
    /// behind it are tried once each (one that fails too is dropped the same way), and the
    /// open ones stay (their messages were not tried yet).
    async fn give_up(&self, reason: &str) {
        let _gate = self.gate.lock().await;
        let mut reason = reason.to_string();
        loop {
            let failed = {
                let mut st = self.lock();
                st.failed_at = None;
                st.queue.pop_front()
            };
            let Some(failed) = failed else { break };
            let unreported = failed.items.iter().filter(|m| m.acks.is_empty()).count();
            for m in &failed.items {
                m.fail_acks(&reason);
            }
            if unreported > 0 {
                tracing::error!(send = %self.progress_id, items = unreported, error = %reason, "undelivered items that carry no acknowledgement are dropped");
            }
            match self.drain().await {
                Ok(()) => break,
                Err(e) => reason = e.to_string(),
            }
        }
        if let Some(aux) = &self.aux {
            aux.give_up(&reason).await;
        }
    }

    async fn abort(&self, reason: &str) {
        let dropped: Vec<Batch<Held>> = {
            let mut st = self.lock();
            st.epoch += 1;
            st.failed_at = None;
            let mut all: Vec<Batch<Held>> = st.queue.drain(..).collect();
            all.extend(st.buffer.take_all());
            all
        };
        for b in &dropped {
            for m in &b.items {
                m.fail_acks(reason);
            }
        }
        if let Some(aux) = &self.aux {
            aux.abort(reason).await;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
