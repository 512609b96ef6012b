//! The three kinds of pipeline stage, and the [`Condition`] trait.
//!
//! As in Substation, sources' records, enrichment, routing, error handling, deduplication and
//! sends are all transforms in one flat, ordered list. A transform takes a message and emits
//! zero (drop), one, or many (fan-out) messages. What it may do decides its kind, one small
//! trait each (as Vector separates function, synchronous and task transforms):
//!
//! - [`MapTransform`]: changes one message in place, synchronously, without I/O (most single-value
//!   transforms). The pipeline calls it directly on each message, with no async call and no
//!   output list.
//! - [`StatelessTransform`]: treats each data message on its own, asynchronously (I/O, fan-out). The
//!   pipeline may run it on many messages at once.
//! - [`StatefulTransform`]: keeps state across messages (batches, sends, aggregates, the lock). It
//!   sees every message, ctrl included, one at a time and in input order, so what it emits
//!   or sends keeps the order of its input; it has deadlines, and is told to abort and to
//!   settle.
//!
//! Map and stateless transforms never see ctrl messages (they pass them unchanged). The
//! registry builds a [`Transform`], which says which kind it is, and the pipeline
//! dispatches on it. Its constructor may also say what of its work the engine can do
//! itself, as data: a map transform that only copies a value or writes a constant
//! ([`MapPlan`]), which the pipeline may do together with its neighbours; a stateful
//! transform whose one act on a data message is to write it as a line ([`LineSink`]),
//! which the pipeline's workers may do for it.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use crate::error::TransformError;
use crate::json::Value;
use crate::message::{Key, Message};

/// What a [`MapTransform`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// The message (possibly changed) goes on.
    Keep,
    /// The message is dropped.
    Drop,
}

/// A transform that changes one data message in place, synchronously and without I/O.
pub trait MapTransform: Send + Sync + 'static {
    /// Changes `msg`; says whether it goes on.
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError>;
}

/// What a [`MapTransform`] does to a data message, when the engine can do it itself: data
/// its constructor returns with it ([`Transform::map_doing`]). The pipeline may then do it
/// together with the steps next to it that it can do, as one step with the same result
/// (consecutive copies and inserts read their sources in one walk: `pipeline/copy_run.rs`).
/// A plan other than [`MapPlan::Opaque`] is a promise: [`MapTransform::map`] does exactly
/// that and nothing else.
#[derive(Debug, Clone, Default)]
pub enum MapPlan {
    /// Nothing the engine does itself: it calls [`MapTransform::map`].
    #[default]
    Opaque,
    /// Writes the value at `from`, when there is one, at `to` (with [`Message::set`]'s
    /// typing).
    Copy {
        /// Where the value is read.
        from: Key,
        /// Where it is written.
        to: Key,
    },
    /// Writes `value` at `to` (with [`Message::set`]'s typing).
    Insert {
        /// The constant written.
        value: Value,
        /// Where it is written.
        to: Key,
    },
    /// Writes what `compute` makes of the values read at `from`, when it makes one, at
    /// `to` (with [`Message::set`]'s typing), when the data is a JSON document; on other
    /// data [`MapTransform::map`] may do anything else. The values read are the one at
    /// `from`, or none when it does not exist; for a path that is one array multipath
    /// (`[a,b,!1]`), those of its members that exist, in order.
    Compute {
        /// Where the values are read.
        from: Key,
        /// Where the result is written.
        to: Key,
        /// What makes the result.
        compute: Arc<dyn Compute>,
    },
}

/// What a map transform of [`MapPlan::Compute`] makes of the values it reads: a pure
/// function of them (no clock, no state), so that the pipeline may read them together with
/// its neighbours' and write the result with theirs.
pub trait Compute: Send + Sync + 'static {
    /// The value to write, from the values read (see [`MapPlan::Compute`]); `Ok(None)`
    /// writes nothing. An error is the transform's, as [`MapTransform::map`] would give it.
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError>;
}

impl std::fmt::Debug for dyn Compute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compute")
    }
}

/// A transform that treats each data message on its own, asynchronously.
#[async_trait]
pub trait StatelessTransform: Send + Sync + 'static {
    /// Processes one data message, pushing what it emits to `out`.
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError>;

    /// Whether it reads or writes state that other messages see (a kv store). The pipeline
    /// then runs it over a whole batch before the transforms after it, as Substation's
    /// `Apply` runs every transform, so a later lookup in the same batch sees every write.
    fn shares_state(&self) -> bool {
        false
    }

    /// Whether it drops every data message and does nothing else (`utility_drop`): a
    /// message that reaches it is done, whatever follows.
    fn discards(&self) -> bool {
        false
    }
}

/// A transform that keeps state across messages and sees them all, ctrl included, in order.
#[async_trait]
pub trait StatefulTransform: Send + Sync + 'static {
    /// Processes one message, pushing what it emits to `out`. A ctrl message must be
    /// emitted too, after anything it flushes, so it reaches later stages.
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError>;

    /// Processes messages in order. The lock overrides this to overlap its lock-store calls;
    /// the default calls [`StatefulTransform::transform`] on each message in turn. On error, the
    /// messages not yet processed are marked failed.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        transform_each(self, msgs, out).await
    }

    /// When the oldest batch this transform holds reaches its maximum age.
    fn deadline(&self) -> Option<Instant> {
        None
    }

    /// [`StatelessTransform::shares_state`], for a transform built as stateless or
    /// stateful by its settings ([`Transform::stateful_if`]).
    fn shares_state(&self) -> bool {
        false
    }

    /// Whether it reads each message's data only as bytes: never by path, never as parsed
    /// JSON (a send without a `batch_key`). The pipeline then serialises the data, and frees
    /// its parsed form, on the worker that built it, instead of leaving both to this
    /// transform, which sees every message on one thread.
    fn takes_bytes(&self) -> bool {
        false
    }

    /// Flushes (or emits) every batch whose maximum age has passed by `now`.
    async fn expire(&self, _now: Instant, _out: &mut Vec<Message>) -> Result<(), TransformError> {
        Ok(())
    }

    /// Discards everything held (batches, retry queues), marking those messages failed.
    ///
    /// Called when an error has escaped the pipeline (or the lock's inner list): the source
    /// will redeliver those messages, so sending them later would duplicate them. A send
    /// whose flush failed keeps the undelivered items so that `meta_retry` can retry the
    /// flush; `abort` is what drops them when nothing retries.
    async fn abort(&self, _reason: &str) {}

    /// Drops what the transform keeps only to retry it (a send's undelivered items),
    /// marking those messages failed, and keeps the rest (batches not yet tried).
    ///
    /// Called when an error of this transform has reached a pipeline whose messages fail
    /// alone ([`crate::Pipeline::failing_messages_alone`]): nothing will retry what failed,
    /// so the messages it failed are reported and the others go on. A wrapper passes it to
    /// the transforms it wraps.
    async fn give_up(&self, _reason: &str) {}

    /// Finishes what the transform owes for messages that already left it, waiting at most
    /// until `until`: `meta_kv_store_lock` commits the keys of messages delivered after it
    /// (a send later in the pipeline) and releases those of messages that failed there.
    ///
    /// Input adapters call it (through [`crate::Pipeline::settle`]) after the ctrl that ends
    /// their input went through the whole pipeline and its outputs were dropped, before
    /// they report to the source. It never fails: what it could not finish by `until` it
    /// reports ([`SettleReport`]), and the transform keeps trying on later calls.
    async fn settle(&self, _until: Instant) -> SettleReport {
        SettleReport::default()
    }

    /// Told once, before any message, where what this transform passes on ends up
    /// ([`OutputsReach`]), when that lets it resolve messages sooner: a send whose outputs
    /// go nowhere drops the tokens of the copies it passes on, so a message is acknowledged
    /// as soon as its destination accepted it, not when the batch it came in is through (the
    /// lock then commits its key within a store round trip of the acceptance). A wrapper
    /// tells the transforms it wraps ([`crate::Pipeline::outputs_reach`]).
    fn outputs_reach(&self, _reach: OutputsReach) {}

    /// Told once, before any message, by a pipeline whose messages fail alone
    /// ([`crate::Pipeline::failing_messages_alone`]) and that nothing retries: what this
    /// transform cannot finish for some messages (a send's batch that failed) it fails at
    /// once, alone, and it goes on with the others instead of returning the error. A
    /// transform that does not act on it has its errors handled by
    /// [`StatefulTransform::give_up`].
    fn fails_alone(&self) {}

    /// Whether it holds messages that wait on something outside the process (the lock's,
    /// whose keys another process holds), which the ctrl that ends the input waits for:
    /// the driver then sends a checkpoint first ([`crate::driver::end_of_input`]). A
    /// wrapper asks the transforms it wraps.
    fn waits_on_others(&self) -> bool {
        false
    }
}

/// [`StatefulTransform::transform`] on each of `msgs` in turn (the default of
/// [`StatefulTransform::transform_batch`]). On error, the messages not yet processed are
/// marked failed.
pub(crate) async fn transform_each<T: StatefulTransform + ?Sized>(
    t: &T,
    msgs: Vec<Message>,
    out: &mut Vec<Message>,
) -> Result<(), TransformError> {
    let mut rest = msgs.into_iter();
    while let Some(m) = rest.next() {
        let acks = m.acks().clone();
        if let Err(e) = t.transform(m, out).await {
            let reason = e.to_string();
            crate::ack::fail_all(&acks, &reason);
            for r in rest {
                r.fail_acks(&reason);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Where what a stateful transform passes on ends up, as far as acknowledgements go (see
/// [`StatefulTransform::outputs_reach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputsReach {
    /// Nowhere that reports on it: the pipeline's caller drops what comes out, and nothing
    /// follows the transform but one that drops everything. A message is resolved by what
    /// the transform keeps of it alone.
    Nowhere,
    /// The answer to a call that its caller makes again, alike, when the answer is lost
    /// (Firehose's transformation, API Gateway, an invoke): the messages' sources still
    /// follow them to the answer, but a lock need not, since a retried call gets the same
    /// answer from the transforms after it; it commits a key once its own sends delivered.
    Answer,
}

/// What [`StatefulTransform::settle`] could not finish in time: one line per transform that
/// still owes something, saying how much and what a run over the same input will do about
/// it. Empty when everything was settled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettleReport {
    /// One line per transform that could not settle what it owes.
    pub unsettled: Vec<String>,
}

impl SettleReport {
    /// Whether everything was settled.
    pub fn is_settled(&self) -> bool {
        self.unsettled.is_empty()
    }

    /// Adds what `other` could not settle.
    pub fn extend(&mut self, other: SettleReport) {
        self.unsettled.extend(other.unsettled);
    }
}

/// The stream a stateful transform writes each data message's data to as one line, when
/// that is all it does with a data message: its batches only decide when lines are written,
/// not what or in which order. Its constructor returns it with the transform
/// ([`Transform::writing_lines`]). As the last stage of a pipeline whose outputs the caller
/// drops ([`crate::Pipeline::discarding_outputs`]), the transform's data messages may then
/// be written to this stream by the workers that made them, in input order, instead of
/// reaching it; ctrl messages still reach it.
pub trait LineSink: Send + Sync + 'static {
    /// Writes `lines` (lines, each ending in a newline) to the stream, all of them or an
    /// error: the error the transform itself returns for a failed write, without the
    /// `transform <id>:` layer. Called by one thread at a time, in the lines' order.
    fn write_lines(&self, lines: &[u8]) -> Result<(), TransformError>;

    /// Whether the transform takes `data` as a line at all: the error it returns when a
    /// message whose data it refuses reaches it (a send's item larger than its batch size),
    /// without the `transform <id>:` layer. Checked for each message before its line is
    /// written; a refused message fails as it would in the transform.
    fn check(&self, _data: &[u8]) -> Result<(), TransformError> {
        Ok(())
    }
}

/// A built transform: which kind it is, the transform, and what of its work the engine may
/// do itself.
#[derive(Clone)]
pub enum Transform {
    /// See [`MapTransform`]; with what it does, when the engine can do that itself
    /// ([`MapPlan`]).
    Map(Arc<dyn MapTransform>, Arc<MapPlan>),
    /// See [`StatelessTransform`].
    Stateless(Arc<dyn StatelessTransform>),
    /// See [`StatefulTransform`]; with the stream it writes data to, when all it does with a
    /// data message is write its data as a line there ([`LineSink`]).
    Stateful(Arc<dyn StatefulTransform>, Option<Arc<dyn LineSink>>),
}

impl std::fmt::Debug for Transform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transform::Map(..) => "Transform::Map",
            Transform::Stateless(_) => "Transform::Stateless",
            Transform::Stateful(..) => "Transform::Stateful",
        })
    }
}

impl Transform {
    /// A map transform.
    pub fn map(t: impl MapTransform) -> Transform {
        Transform::Map(Arc::new(t), Arc::new(MapPlan::Opaque))
    }

    /// A map transform that does exactly what `plan` says (see [`MapPlan`]).
    pub fn map_doing(plan: MapPlan, t: impl MapTransform) -> Transform {
        Transform::Map(Arc::new(t), Arc::new(plan))
    }

    /// A map transform that writes what it computes from the values at `from` at `to`
    /// and does nothing else on a JSON document ([`MapPlan::Compute`]).
    pub fn map_computing<T: MapTransform + Compute>(from: Key, to: Key, t: T) -> Transform {
        let t = Arc::new(t);
        let plan = MapPlan::Compute {
            from,
            to,
            compute: t.clone(),
        };
        Transform::Map(t, Arc::new(plan))
    }

    /// A stateless transform.
    pub fn stateless(t: impl StatelessTransform) -> Transform {
        Transform::Stateless(Arc::new(t))
    }

    /// A stateful transform.
    pub fn stateful(t: impl StatefulTransform) -> Transform {
        Transform::Stateful(Arc::new(t), None)
    }

    /// A stateful transform whose one act on a data message is to write its data to `lines`
    /// as a line (see [`LineSink`]).
    pub fn writing_lines(lines: Arc<dyn LineSink>, t: impl StatefulTransform) -> Transform {
        Transform::Stateful(Arc::new(t), Some(lines))
    }

    /// `t` as a stateful transform when `stateful`, else as a stateless one (which is then
    /// given data messages only): for a transform whose kind depends on its settings, such
    /// as a meta transform, stateful only around a stateful list.
    pub fn stateful_if(stateful: bool, t: impl StatefulTransform) -> Transform {
        if stateful {
            Transform::stateful(t)
        } else {
            Transform::stateless(AsStateless(t))
        }
    }

    /// Whether it is a stateless transform whose state other messages see (see
    /// [`StatelessTransform::shares_state`]).
    pub fn shares_state(&self) -> bool {
        match self {
            Transform::Stateless(t) => t.shares_state(),
            Transform::Map(..) | Transform::Stateful(..) => false,
        }
    }

    /// Whether it keeps state across messages (a [`StatefulTransform`]): it then sees data
    /// and ctrl messages, one at a time, in order; otherwise each data message on its own,
    /// possibly concurrently, and never a ctrl.
    pub fn is_stateful(&self) -> bool {
        matches!(self, Transform::Stateful(..))
    }

    /// Processes one message, pushing what it emits to `out`: what a caller outside the
    /// pipeline (a test, a meta transform's auxiliary transform) uses whatever the kind.
    /// A ctrl message passes a map or stateless transform unchanged.
    pub async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        match self {
            Transform::Map(t, _) => {
                if msg.is_ctrl() || t.map(&mut msg)? == InPlace::Keep {
                    out.push(msg);
                }
                Ok(())
            }
            Transform::Stateless(t) => {
                if msg.is_ctrl() {
                    out.push(msg);
                    Ok(())
                } else {
                    t.transform(msg, out).await
                }
            }
            Transform::Stateful(t, _) => t.transform(msg, out).await,
        }
    }

    /// Processes messages in order (see [`StatefulTransform::transform_batch`]); the other
    /// kinds one message at a time. On error, the messages not yet processed are marked
    /// failed.
    pub async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if let Transform::Stateful(t, _) = self {
            return t.transform_batch(msgs, out).await;
        }
        let mut rest = msgs.into_iter();
        while let Some(m) = rest.next() {
            let acks = m.acks().clone();
            if let Err(e) = self.transform(m, out).await {
                let reason = e.to_string();
                crate::ack::fail_all(&acks, &reason);
                for r in rest {
                    r.fail_acks(&reason);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// When the oldest batch it holds reaches its maximum age (stateful transforms only).
    pub fn deadline(&self) -> Option<Instant> {
        match self {
            Transform::Stateful(t, _) => t.deadline(),
            _ => None,
        }
    }

    /// See [`StatefulTransform::expire`]; nothing for the other kinds.
    pub async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        match self {
            Transform::Stateful(t, _) => t.expire(now, out).await,
            _ => Ok(()),
        }
    }

    /// See [`StatefulTransform::abort`]; nothing for the other kinds.
    pub async fn abort(&self, reason: &str) {
        if let Transform::Stateful(t, _) = self {
            t.abort(reason).await;
        }
    }

    /// See [`StatefulTransform::settle`]; nothing for the other kinds.
    pub async fn settle(&self, until: Instant) -> SettleReport {
        match self {
            Transform::Stateful(t, _) => t.settle(until).await,
            _ => SettleReport::default(),
        }
    }
}

/// A [`StatefulTransform`] whose settings make it stateless (see [`Transform::stateful_if`]).
struct AsStateless<T>(T);

#[async_trait]
impl<T: StatefulTransform> StatelessTransform for AsStateless<T> {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.0.transform(msg, out).await
    }

    fn shares_state(&self) -> bool {
        self.0.shares_state()
    }
}

/// A predicate over messages, used by `meta_switch`, `meta_retry` and config tests.
pub trait Condition: Send + Sync + 'static {
    /// Whether the message satisfies the condition. Leaf conditions are false on ctrl.
    fn test(&self, msg: &Message) -> Result<bool, TransformError>;
}
