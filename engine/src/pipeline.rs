//! Pipeline execution: an ordered list of transforms applied to batches of messages.
//!
//! Like Substation's `Apply`, messages go through the list stage by stage, and a ctrl
//! message placed after the data reaches every stage after it. Unlike it, consecutive
//! stateless transforms form one *segment* that each message crosses depth-first (its JSON
//! stays hot in cache), segments may run on several workers at once, and the output keeps
//! the input order: chunks are processed in parallel and concatenated in order. Stateful
//! transforms see their messages one at a time, in order. A stateless transform that
//! shares state between messages (a kv store lookup or write) is a segment of its own, so
//! it runs over the whole batch before the next transform, as in Substation. Within a
//! segment, consecutive copies from one key to another run as one step, with the same
//! result (`copy_run.rs`).
//!
//! When a transform fails, every message the pipeline still holds for that batch is marked
//! failed (see [`crate::ack`]) before the error is returned, so nothing that was abandoned
//! is ever reported as delivered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use crate::context::Context;
use crate::error::{FAILURES_IN_A_ROW_TO_STOP, TransformError};
use crate::input::InputBatch;
use crate::message::{Message, OutputSlab};
use crate::name::TransformName;
use crate::transform::{
    InPlace, LineSink, MapTransform, OutputsReach, SettleReport, StatefulTransform, Transform,
};

mod copy_run;
mod lines;

use lines::{LeadLines, LineWriter};

/// Below this many messages per worker, splitting a batch across workers costs more than
/// it saves.
const MIN_CHUNK: usize = 64;

/// How many batches may be in the pipeline's lead at once (see [`Pipeline::runs_ahead`]):
/// enough that the workers always have a batch queued while the rest of the pipeline
/// finishes the oldest, few enough that what they hold stays a few batches' worth.
pub const LEADS_IN_FLIGHT: usize = 3;

/// A batch is split into up to this many chunks per worker, so that a worker that shares its
/// core (with the driver, which runs the stateful stages of the batch before, or with the
/// input reader) takes fewer chunks and the others steal the rest, instead of every worker
/// getting one equal chunk and the batch waiting for the slowest.
const CHUNKS_PER_WORKER: usize = 2;

/// A map or stateless transform in a segment.
#[derive(Clone)]
struct Step {
    name: TransformName,
    transform: Transform,
    /// Its errors already name the transform they come from (a fused run of copies names
    /// the copy that failed).
    attributes_errors: bool,
    /// A message it fails (one that carries an acknowledgement, which reports it) fails
    /// alone and the others go on ([`Pipeline::failing_messages_alone`]); otherwise its
    /// error fails the batch.
    fails_alone: bool,
}

impl Step {
    fn new(name: TransformName, transform: Transform) -> Step {
        Step {
            name,
            transform,
            attributes_errors: false,
            fails_alone: false,
        }
    }

    /// `e`, raised by this step, with the layer of the transform it comes from.
    fn attribute(&self, e: TransformError) -> TransformError {
        if self.attributes_errors {
            e
        } else {
            e.within(&self.name)
        }
    }
}

impl Stage {
    fn stateless(steps: Vec<Step>) -> Stage {
        Stage::Stateless {
            steps: copy_run::fuse(steps).into(),
            to_bytes: false,
        }
    }
}

enum Stage {
    /// A run of map and stateless transforms, which each message crosses depth-first.
    /// `to_bytes`: the next stage [takes bytes](StatefulTransform::takes_bytes), so each
    /// message leaves with its data serialised and its parsed form freed, on its worker.
    Stateless { steps: Arc<[Step]>, to_bytes: bool },
    /// A stateful transform, with its name and the stream it writes lines to when that is
    /// all it does with data ([`Transform::Stateful`]).
    Stateful(
        TransformName,
        Arc<dyn StatefulTransform>,
        Option<Arc<dyn LineSink>>,
    ),
}

/// A compiled transform list.
pub struct Pipeline {
    stages: Vec<Stage>,
    // How many stages at the front may run ahead on the next batch while the rest of the
    // pipeline still works on this one (see `Pipeline::runs_ahead`).
    lead: usize,
    workers: usize,
    len: usize,
    // Set by `discarding_outputs` when the stage after the lead only writes lines: the
    // lead's chunks then write them (`lines.rs`).
    lines: Option<Arc<LineWriter>>,
    // Set by `fail_alone`: a stateful transform's error fails the messages it failed and
    // the rest go on (see `give_up_on`).
    stateful_fail_alone: AtomicBool,
    // Per stage, how many calls in a row returned an error that failed messages alone (see
    // `FAILURES_IN_A_ROW_TO_STOP`).
    failures_in_a_row: Box<[AtomicU32]>,
    ctx: Arc<Context>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("transforms", &self.len)
            .field("workers", &self.workers)
            .finish()
    }
}

impl Pipeline {
    /// A pipeline of these transforms (name or id, transform), in order, on one worker.
    pub fn new<N: Into<TransformName>>(steps: Vec<(N, Transform)>) -> Pipeline {
        let len = steps.len();
        let mut stages = Vec::new();
        let mut segment: Vec<Step> = Vec::new();
        for (name, transform) in steps {
            let id: TransformName = name.into();
            match transform {
                Transform::Stateful(t, lines) => {
                    if !segment.is_empty() {
                        stages.push(Stage::stateless(std::mem::take(&mut segment)));
                    }
                    stages.push(Stage::Stateful(id, t, lines));
                }
                transform if transform.shares_state() => {
                    if !segment.is_empty() {
                        stages.push(Stage::stateless(std::mem::take(&mut segment)));
                    }
                    stages.push(Stage::stateless(vec![Step::new(id, transform)]));
                }
                transform => segment.push(Step::new(id, transform)),
            }
        }
        if !segment.is_empty() {
            stages.push(Stage::stateless(segment));
        }
        for i in 1..stages.len() {
            let takes_bytes = matches!(&stages[i], Stage::Stateful(_, t, _) if t.takes_bytes());
            if let Stage::Stateless { to_bytes, .. } = &mut stages[i - 1] {
                *to_bytes = takes_bytes;
            }
        }
        // Stages that share no state with anything else: running them on the next batch
        // before this one has left the stages after them changes nothing a message sees.
        let lead = stages
            .iter()
            .take_while(|s| match s {
                Stage::Stateless { steps, .. } => !steps.iter().any(|s| s.transform.shares_state()),
                Stage::Stateful(..) => false,
            })
            .count();
        debug_assert!(
            lead <= 1,
            "consecutive stateless steps that share nothing are one stage"
        );
        let failures_in_a_row = stages.iter().map(|_| AtomicU32::new(0)).collect();
        Pipeline {
            stages,
            failures_in_a_row,
            lead,
            workers: 1,
            len,
            lines: None,
            stateful_fail_alone: AtomicBool::new(false),
            ctx: Arc::default(),
        }
    }

    /// The same pipeline, for a caller that drops what comes out of it (`sluice run`).
    /// When its one stage after the lead (see [`Pipeline::runs_ahead`]) is a transform
    /// that only writes each data message's data as a line
    /// ([`Transform::Stateful`] with a [`LineSink`]), each chunk of a batch then writes its lines from
    /// the worker that made them, in input order (with one worker, each batch's at once),
    /// and the messages never reach that transform: what [`Lead::finish`] and
    /// [`Pipeline::apply_rest`] return holds only the batch's ctrl messages
    /// ([`Lead::finish_counting`] counts the lines). Otherwise nothing changes.
    pub fn discarding_outputs(mut self) -> Pipeline {
        if let [Stage::Stateless { .. }, Stage::Stateful(id, _, Some(sink))] =
            self.stages.as_slice()
            && self.lead == 1
        {
            let lines = LineWriter::new(id.clone(), sink.clone());
            if self.stateful_fails_alone() {
                lines.fail_alone();
            }
            self.lines = Some(Arc::new(lines));
        }
        self.outputs_reach(OutputsReach::Nowhere);
        self
    }

    /// Tells its stateful transforms where what comes out of the pipeline ends up
    /// ([`StatefulTransform::outputs_reach`]). [`OutputsReach::Nowhere`] (a caller that drops
    /// what comes out: `sluice run`, a Lambda handler that answers with which records
    /// failed, a wrapper whose own outputs go nowhere) reaches the last stage only, when it
    /// is a stateful transform or is followed only by a transform that drops everything
    /// (`utility_drop`): a transform after it that could fail a message, or act on it, keeps
    /// it reported. [`OutputsReach::Answer`] reaches every stateful transform.
    pub fn outputs_reach(&self, reach: OutputsReach) {
        if reach == OutputsReach::Answer {
            for s in &self.stages {
                if let Stage::Stateful(_, t, _) = s {
                    t.outputs_reach(reach);
                }
            }
            return;
        }
        let Some(last) = self
            .stages
            .iter()
            .rposition(|s| matches!(s, Stage::Stateful(..)))
        else {
            return;
        };
        let ends_here = match self.stages.get(last + 1) {
            None => true,
            Some(Stage::Stateless { steps, .. }) => steps
                .first()
                .is_some_and(|s| matches!(&s.transform, Transform::Stateless(t) if t.discards())),
            Some(Stage::Stateful(..)) => false,
        };
        if let (true, Stage::Stateful(_, t, _)) = (ends_here, &self.stages[last]) {
            t.outputs_reach(reach);
        }
    }

    /// The same pipeline, noting the context its transforms were built in (the registry
    /// does this; a pipeline made with [`Pipeline::new`] has a context of its own).
    pub fn in_context(mut self, ctx: Arc<Context>) -> Pipeline {
        self.ctx = ctx;
        self
    }

    /// The context its transforms were built in: what they reported is in its telemetry.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The same pipeline, in which a message that fails fails alone
    /// ([`Pipeline::with_steps_failing_alone`] and [`Pipeline::fail_alone`]): for a caller
    /// that reports each message's outcome and retries nothing itself (`sluice run`).
    pub fn failing_messages_alone(self) -> Pipeline {
        let p = self.with_steps_failing_alone();
        p.fail_alone();
        p
    }

    /// The same pipeline, in which a message that a stateless transform fails, and that
    /// carries an acknowledgement (so that its failure is reported: a line of `sluice run`,
    /// a Lambda record), fails alone: its acknowledgements fail with the error, it goes no
    /// further, and the other messages go on. A message without one still fails the batch.
    /// Meta transforms' inner lists keep their own rule; an error that comes out of one
    /// fails the message alone here.
    pub fn with_steps_failing_alone(mut self) -> Pipeline {
        for stage in &mut self.stages {
            if let Stage::Stateless { steps, .. } = stage {
                let Some(steps) = Arc::get_mut(steps) else {
                    continue;
                };
                for step in steps.iter_mut() {
                    step.fails_alone = true;
                }
            }
        }
        self
    }

    /// From now on nothing retries what the stateful transforms fail (call it before any
    /// message): each is told ([`StatefulTransform::fails_alone`]; a send then fails a
    /// batch it could not deliver at once, alone), and an error one returns all the same
    /// (a lock store that failed, a send inside `meta_retry` that ran out of attempts)
    /// fails the messages it failed and no others: the transform
    /// [gives up](StatefulTransform::give_up) what it kept to retry, the messages that
    /// passed it go on, and a ctrl it did not pass on still reaches the transforms after
    /// it. A meta transform that retries nothing (the lock, `meta_switch`) passes it on to
    /// its inner lists; `meta_retry` and `meta_err`, which act on errors, do not.
    pub fn fail_alone(&self) {
        self.stateful_fail_alone.store(true, Ordering::Relaxed);
        if let Some(lines) = &self.lines {
            lines.fail_alone();
        }
        for stage in &self.stages {
            if let Stage::Stateful(_, t, _) = stage {
                t.fails_alone();
            }
        }
    }

    /// Whether a stateful transform holds messages that wait on something outside the
    /// process ([`StatefulTransform::waits_on_others`]).
    pub fn waits_on_others(&self) -> bool {
        self.stages
            .iter()
            .any(|s| matches!(s, Stage::Stateful(_, t, _) if t.waits_on_others()))
    }

    fn stateful_fails_alone(&self) -> bool {
        self.stateful_fail_alone.load(Ordering::Relaxed)
    }

    /// Forgets the failures in a row its stateful transforms had: they are counted within
    /// one input (a run, a Lambda invocation), which the driver starts with this.
    pub(crate) fn start_input(&self) {
        for n in &*self.failures_in_a_row {
            n.store(0, Ordering::Relaxed);
        }
    }

    /// Stage `i` returned without an error.
    fn succeeded(&self, i: usize) {
        if let Some(n) = self.failures_in_a_row.get(i)
            && n.load(Ordering::Relaxed) != 0
        {
            n.store(0, Ordering::Relaxed);
        }
    }

    /// Stage `i` (stateful transform `t`, `name`) returned `e`; `out` holds what it passed on,
    /// `ctrls` the ctrls it took. Where messages fail alone, `t` gives up what failed and
    /// the batch goes on ([`give_up_on`]), unless `e` ends the run or is the
    /// [`FAILURES_IN_A_ROW_TO_STOP`]th error in a row; otherwise the error is returned.
    async fn stateful_failed(
        &self,
        i: usize,
        name: &TransformName,
        t: &Arc<dyn StatefulTransform>,
        e: TransformError,
        out: &mut Vec<Message>,
        ctrls: usize,
    ) -> Result<(), TransformError> {
        let e = e.within(name);
        if !self.stateful_fails_alone() || e.ends_run() {
            return Err(e);
        }
        let n = self
            .failures_in_a_row
            .get(i)
            .map_or(1, |n| n.fetch_add(1, Ordering::Relaxed) + 1);
        if n >= FAILURES_IN_A_ROW_TO_STOP {
            return Err(e.stopping(format!("it failed {n} times in a row")));
        }
        give_up_on(t.as_ref(), e, out, ctrls).await;
        Ok(())
    }

    /// Runs stateless segments on up to `n` workers (tokio tasks) at once.
    pub fn with_workers(mut self, n: usize) -> Pipeline {
        self.workers = n.max(1);
        self
    }

    /// How many transforms it has.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no transforms.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether any of its transforms keeps state ([`Transform::is_stateful`]): what a meta
    /// transform wrapping it then is too.
    pub fn is_stateful(&self) -> bool {
        self.stages.iter().any(|s| matches!(s, Stage::Stateful(..)))
    }

    /// The whole pipeline as one map transform, when every transform in it is one (an empty
    /// pipeline keeps every message): what a meta transform around it runs without async
    /// calls or output lists, so that it can be a map transform itself. Its errors name the
    /// transform they come from, as the pipeline's do.
    pub fn as_map(&self) -> Option<Arc<dyn MapTransform>> {
        let steps = match self.stages.as_slice() {
            [] => &[][..],
            [Stage::Stateless { steps, .. }] => &steps[..],
            _ => return None,
        };
        let maps = steps
            .iter()
            .map(|step| match &step.transform {
                Transform::Map(t, _) => Some((step.clone(), t.clone())),
                Transform::Stateless(_) | Transform::Stateful(..) => None,
            })
            .collect::<Option<_>>()?;
        Some(Arc::new(MapSteps(maps)))
    }

    /// Applies the pipeline to `msgs` (data and ctrl, in order) and returns what comes out.
    pub async fn apply(&self, msgs: Vec<Message>) -> Result<Vec<Message>, TransformError> {
        self.apply_stages(0, self.stages.len(), msgs).await
    }

    /// Whether a driver gains from applying the pipeline in two parts and overlapping them
    /// across batches: the *lead* of later batches ([`Pipeline::start_lead`]) runs on the
    /// workers while the *rest* of an earlier one ([`Pipeline::apply_rest`]) runs on the
    /// driver. True when the pipeline starts with a stateless segment that shares no state,
    /// has stages after it (a send, which sees its messages one at a time, on one thread),
    /// and has more than one worker, or writes its lines from the lead
    /// ([`Pipeline::discarding_outputs`]), which one worker gains from as well.
    ///
    /// The overlap changes nothing a message sees: the lead keeps no state, and the rest
    /// still takes the batches one after another, in order.
    pub fn runs_ahead(&self) -> bool {
        (self.workers > 1 || self.lines.is_some()) && self.lead > 0 && self.lead < self.stages.len()
    }

    /// Starts the lead (see [`Pipeline::runs_ahead`]) on `msgs` in the background, on the
    /// workers; [`Lead::finish`] waits for what it returns. Without a lead to run ahead,
    /// the messages are handed back untouched.
    /// A batch of [lines](crate::input::BufferedLines) is made into messages by the
    /// chunks' tasks, on the workers.
    pub fn start_lead(&self, batch: impl Into<InputBatch>) -> Lead {
        let batch = batch.into();
        // The lead is at most one stage: stateless transforms that share no state form one
        // segment, up to the first that does or the first stateful one.
        match self.stages.first() {
            Some(Stage::Stateless { steps, to_bytes }) if self.runs_ahead() && self.lead == 1 => {
                // One worker has nothing to share: its chunk is the batch.
                let chunks = match self.workers {
                    1 => 1,
                    n => (n * CHUNKS_PER_WORKER).min(batch.len() / MIN_CHUNK).max(1),
                };
                match &self.lines {
                    Some(lines) => Lead(LeadState::Writing(lines.spawn(steps, batch, chunks))),
                    None => Lead(LeadState::Running(spawn_chunks(
                        steps, *to_bytes, batch, chunks,
                    ))),
                }
            }
            _ => Lead(LeadState::Untouched(batch.into_messages())),
        }
    }

    /// Applies the pipeline to `batches` one after another, in order, handing what comes out
    /// of each to `on_output`: what a caller that holds all its input at once (a Lambda
    /// event, in pieces) does instead of calling [`Pipeline::apply`] on each. When the
    /// pipeline [runs ahead](Pipeline::runs_ahead), the lead of the next batches (up to
    /// [`LEADS_IN_FLIGHT`]) runs while the rest works on the one before. After an error the
    /// batches not through yet are marked failed, and the error is returned.
    pub async fn apply_each(
        &self,
        batches: impl IntoIterator<Item = Vec<Message>>,
        mut on_output: impl FnMut(Vec<Message>),
    ) -> Result<(), TransformError> {
        let mut batches = batches.into_iter();
        let mut leads = std::collections::VecDeque::new();
        let runs_ahead = self.runs_ahead();
        let result = loop {
            if runs_ahead {
                while leads.len() < LEADS_IN_FLIGHT {
                    let Some(batch) = batches.next() else { break };
                    leads.push_back(self.start_lead(batch));
                }
            } else if let Some(batch) = batches.next() {
                leads.push_back(Lead(LeadState::Untouched(batch)));
            }
            let Some(lead) = leads.pop_front() else {
                break Ok(());
            };
            let out = match lead.finish().await {
                Ok(msgs) => self.apply_rest(msgs).await,
                Err(e) => Err(e),
            };
            match out {
                Ok(out) => on_output(out),
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = &result {
            let reason = e.to_string();
            for lead in leads {
                if let Ok(msgs) = lead.finish().await {
                    msgs.iter().for_each(|m| m.fail_acks(&reason));
                }
            }
            for batch in batches {
                batch.iter().for_each(|m| m.fail_acks(&reason));
            }
        }
        result
    }

    /// Applies the stages after the lead to what [`Lead::finish`] returned.
    pub async fn apply_rest(&self, msgs: Vec<Message>) -> Result<Vec<Message>, TransformError> {
        let from = if self.runs_ahead() { self.lead } else { 0 };
        self.apply_stages(from, self.stages.len(), msgs).await
    }

    async fn apply_stages(
        &self,
        from: usize,
        to: usize,
        msgs: Vec<Message>,
    ) -> Result<Vec<Message>, TransformError> {
        let mut cur = msgs;
        for (i, stage) in self.stages.iter().enumerate().take(to).skip(from) {
            if cur.is_empty() {
                break;
            }
            let mut out = Vec::with_capacity(cur.len());
            let result = match stage {
                Stage::Stateless { steps, to_bytes } => {
                    self.run_stateless(steps, *to_bytes, cur, &mut out).await
                }
                Stage::Stateful(id, t, _) => {
                    let alone = self.stateful_fails_alone();
                    let ctrls = if alone {
                        cur.iter().filter(|m| m.is_ctrl()).count()
                    } else {
                        0
                    };
                    match t.transform_batch(cur, &mut out).await {
                        Ok(()) => {
                            self.succeeded(i);
                            Ok(())
                        }
                        Err(e) => self.stateful_failed(i, id, t, e, &mut out, ctrls).await,
                    }
                }
            };
            if let Err(e) = result {
                fail_messages(&out, &e);
                return Err(e);
            }
            cur = out;
        }
        Ok(cur)
    }

    async fn run_stateless(
        &self,
        steps: &Arc<[Step]>,
        to_bytes: bool,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let chunks = (self.workers * CHUNKS_PER_WORKER)
            .min(msgs.len() / MIN_CHUNK)
            .max(1);
        if self.workers == 1 || chunks == 1 {
            return run_segment_into(steps, to_bytes, msgs, out).await;
        }
        join_chunks(spawn_chunks(steps, to_bytes, msgs.into(), chunks), out).await
    }

    /// Discards what every stateful transform holds (see [`StatefulTransform::abort`]).
    pub async fn abort(&self, reason: &str) {
        for s in &self.stages {
            if let Stage::Stateful(_, t, _) = s {
                t.abort(reason).await;
            }
        }
    }

    /// Passes [`StatefulTransform::give_up`] to every stateful transform (a meta transform
    /// whose inner list failed gives up what that list kept to retry).
    pub async fn give_up(&self, reason: &str) {
        for s in &self.stages {
            if let Stage::Stateful(_, t, _) = s {
                t.give_up(reason).await;
            }
        }
    }

    /// Lets every stateful transform finish what it owes for messages that left it (see
    /// [`StatefulTransform::settle`]), waiting at most until `until`.
    pub async fn settle(&self, until: Instant) -> SettleReport {
        let mut report = SettleReport::default();
        for s in &self.stages {
            if let Stage::Stateful(_, t, _) = s {
                report.extend(t.settle(until).await);
            }
        }
        report
    }

    /// The earliest deadline of any batch held by a stateful transform.
    pub fn deadline(&self) -> Option<Instant> {
        self.stages
            .iter()
            .filter_map(|s| match s {
                Stage::Stateful(_, t, _) => t.deadline(),
                Stage::Stateless { .. } => None,
            })
            .min()
    }

    /// Lets every stateful transform whose deadline passed flush or emit its expired
    /// batches; what they emit continues through the stages after them.
    pub async fn expire(&self, now: Instant) -> Result<Vec<Message>, TransformError> {
        let mut carry: Vec<Message> = Vec::new();
        for (i, stage) in self.stages.iter().enumerate() {
            if !carry.is_empty() {
                carry = self.apply_stages(i, i + 1, carry).await?;
            }
            if let Stage::Stateful(id, t, _) = stage
                && t.deadline().is_some_and(|d| d <= now)
            {
                let expired = match t.expire(now, &mut carry).await {
                    Ok(()) => Ok(()),
                    Err(e) => self.stateful_failed(i, id, t, e, &mut carry, 0).await,
                };
                if let Err(e) = expired {
                    fail_messages(&carry, &e);
                    return Err(e);
                }
            }
        }
        Ok(carry)
    }
}

/// The lead of one batch, started by [`Pipeline::start_lead`].
pub struct Lead(LeadState);

enum LeadState {
    /// Chunks of the batch crossing the segment on the workers, in order.
    Running(Vec<Chunk>),
    /// Chunks of the batch crossing the segment and writing their lines (`lines.rs`).
    Writing(Arc<LeadLines>),
    /// No lead ran: the batch as it came.
    Untouched(Vec<Message>),
}

type Chunk = tokio::task::JoinHandle<(Vec<Message>, Result<(), TransformError>)>;

impl Lead {
    /// Waits for the lead to finish and returns what came out, in order. On error, every
    /// message of the batch is marked failed (as [`Pipeline::apply`] does).
    pub async fn finish(self) -> Result<Vec<Message>, TransformError> {
        self.finish_counting().await.map(|(msgs, _)| msgs)
    }

    /// [`Lead::finish`], and how many data messages the lead wrote as lines itself (see
    /// [`Pipeline::discarding_outputs`]): those are not among the messages returned.
    pub async fn finish_counting(self) -> Result<(Vec<Message>, u64), TransformError> {
        match self.0 {
            LeadState::Untouched(msgs) => Ok((msgs, 0)),
            LeadState::Running(chunks) => {
                let mut out = Vec::new();
                match join_chunks(chunks, &mut out).await {
                    Ok(()) => Ok((out, 0)),
                    Err(e) => {
                        fail_messages(&out, &e);
                        Err(e)
                    }
                }
            }
            LeadState::Writing(lines) => lines.finish().await,
        }
    }
}

/// Splits `batch` into `chunks` parts and spawns a task taking each through the segment
/// (making its messages first, when they are lines).
fn spawn_chunks(
    steps: &Arc<[Step]>,
    to_bytes: bool,
    batch: InputBatch,
    chunks: usize,
) -> Vec<Chunk> {
    split(batch, chunks)
        .into_iter()
        .map(|part| {
            let steps = steps.clone();
            // An invocation's deadline bounds the calls its stateless steps make too.
            tokio::spawn(crate::invocation::carried(async move {
                let mut out = Vec::with_capacity(part.len());
                let r = run_segment_into(&steps, to_bytes, part.into_messages(), &mut out).await;
                (out, r)
            }))
        })
        .collect()
}

/// `batch` in `chunks` parts of (nearly) equal length, in order; none when it is empty.
fn split(batch: InputBatch, chunks: usize) -> Vec<InputBatch> {
    let chunk = batch.len().div_ceil(chunks.max(1)).max(1);
    let mut rest = batch;
    let mut parts = Vec::with_capacity(chunks);
    while !rest.is_empty() {
        let tail = rest.split_off(chunk.min(rest.len()));
        parts.push(std::mem::replace(&mut rest, tail));
    }
    parts
}

/// Waits for the chunks in order, appending what they return to `out`. After the first
/// error, what later chunks return is marked failed instead, and the error is returned.
async fn join_chunks(handles: Vec<Chunk>, out: &mut Vec<Message>) -> Result<(), TransformError> {
    let mut first_err = None;
    for h in handles {
        match h.await {
            Ok((part_out, Ok(()))) => {
                if let Some(e) = &first_err {
                    fail_messages(&part_out, e);
                } else {
                    out.extend(part_out);
                }
            }
            Ok((part_out, Err(e))) => {
                fail_messages(&part_out, &e);
                first_err.get_or_insert(e);
            }
            Err(join) => {
                first_err
                    .get_or_insert(TransformError::failed(format!("a worker stopped: {join}")));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// After stateful transform `t` failed with `e` in a pipeline whose messages fail alone:
/// `t` gives up what it kept to retry (those messages fail with `e`; the ones it refused
/// were failed when it refused them), what it passed on (`out`) goes on, and so do the
/// `ctrls` it took but did not pass on, so that the transforms after it still flush.
async fn give_up_on(
    t: &dyn StatefulTransform,
    e: TransformError,
    out: &mut Vec<Message>,
    ctrls: usize,
) {
    let reason = e.to_string();
    tracing::debug!(error = %reason, "the messages this failed are not delivered; the others go on");
    t.give_up(&reason).await;
    let passed = out.iter().filter(|m| m.is_ctrl()).count();
    out.extend((passed..ctrls).map(|_| Message::ctrl()));
}

fn fail_messages(msgs: &[Message], e: &TransformError) {
    let reason = e.to_string();
    for m in msgs {
        m.fail_acks(&reason);
    }
}

/// Where a segment puts what comes out of it, one message at a time, in order.
trait Outputs: Send {
    /// Takes the next message out; an error (with the message marked failed) when what
    /// takes it refuses it.
    fn push(&mut self, msg: Message) -> Result<(), TransformError>;
}

impl Outputs for Vec<Message> {
    fn push(&mut self, msg: Message) -> Result<(), TransformError> {
        Vec::push(self, msg);
        Ok(())
    }
}

/// Messages that keep only their data's bytes ([`Message::keep_data_bytes_only`]),
/// serialised into the slab.
struct BytesOnly<'a> {
    out: &'a mut Vec<Message>,
    slab: OutputSlab,
}

impl Outputs for BytesOnly<'_> {
    fn push(&mut self, mut msg: Message) -> Result<(), TransformError> {
        msg.keep_data_bytes_only(&mut self.slab);
        self.out.push(msg);
        Ok(())
    }
}

/// [`run_segment`] into `out`; with `to_bytes`, what comes out keeps only its data's bytes.
async fn run_segment_into(
    steps: &[Step],
    to_bytes: bool,
    msgs: Vec<Message>,
    out: &mut Vec<Message>,
) -> Result<(), TransformError> {
    if to_bytes {
        let mut out = BytesOnly {
            out,
            slab: OutputSlab::default(),
        };
        run_segment(steps, &mut msgs.into_iter(), &mut out).await
    } else {
        run_segment(steps, &mut msgs.into_iter(), out).await
    }
}

/// Takes each message depth-first through a run of stateless transforms, handing what comes
/// out to `out`. Steps with an in-place path are called directly on the message; from the
/// first step without one, the rest of the run goes through async calls and output lists.
/// On error the messages not yet through are marked failed (what `out` took is the
/// caller's to fail); should a transform panic, they are left in `rest`.
async fn run_segment(
    steps: &[Step],
    rest: &mut std::vec::IntoIter<Message>,
    out: &mut impl Outputs,
) -> Result<(), TransformError> {
    // What the async steps emit for one message, before it goes to `out`.
    let mut emitted = Vec::new();
    while let Some(mut msg) = rest.next() {
        if msg.is_ctrl() {
            push_or_fail(out, msg, rest)?;
            continue;
        }
        let mut i = 0;
        let mut kept = true;
        while let Some(Transform::Map(t, _)) = steps.get(i).map(|s| &s.transform) {
            match t.map(&mut msg) {
                Ok(InPlace::Keep) => i += 1,
                Ok(InPlace::Drop) => {
                    kept = false;
                    break;
                }
                Err(e) => {
                    let e = steps[i].attribute(e);
                    let reason = e.to_string();
                    msg.fail_acks(&reason);
                    if steps[i].fails_alone && !msg.acks().is_empty() {
                        kept = false;
                        break;
                    }
                    for m in rest {
                        m.fail_acks(&reason);
                    }
                    return Err(e);
                }
            }
        }
        if !kept {
            continue;
        }
        if i == steps.len() {
            push_or_fail(out, msg, rest)?;
            continue;
        }
        if let Err(e) = run_steps(&steps[i..], msg, &mut emitted).await {
            let reason = e.to_string();
            for m in rest {
                m.fail_acks(&reason);
            }
            return Err(e);
        }
        let mut made = emitted.drain(..);
        while let Some(m) = made.next() {
            if let Err(e) = out.push(m) {
                let reason = e.to_string();
                made.for_each(|m| m.fail_acks(&reason));
                rest.for_each(|m| m.fail_acks(&reason));
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Hands `msg` to `out`; when it is refused, the messages not yet through fail with it.
fn push_or_fail(
    out: &mut impl Outputs,
    msg: Message,
    rest: &mut std::vec::IntoIter<Message>,
) -> Result<(), TransformError> {
    out.push(msg).inspect_err(|e| {
        let reason = e.to_string();
        rest.for_each(|m| m.fail_acks(&reason));
    })
}

/// Takes one message through `steps` with async calls (fan-out, I/O); outputs to `out`.
async fn run_steps(
    steps: &[Step],
    msg: Message,
    out: &mut Vec<Message>,
) -> Result<(), TransformError> {
    let mut a: Vec<Message> = vec![msg];
    let mut b: Vec<Message> = Vec::new();
    for step in steps {
        let mut pending = a.drain(..);
        while let Some(m) = pending.next() {
            let acks = if m.acks().is_empty() {
                None
            } else {
                Some(m.acks().clone())
            };
            if let Err(e) = step.transform.transform(m, &mut b).await {
                let e = step.attribute(e);
                let reason = e.to_string();
                let alone = step.fails_alone && acks.is_some();
                if let Some(acks) = acks {
                    crate::ack::fail_all(&acks, &reason);
                }
                for m in pending.chain(b.drain(..)) {
                    m.fail_acks(&reason);
                }
                // What the message had become fails with it; nothing of it goes on.
                return if alone { Ok(()) } else { Err(e) };
            }
        }
        drop(pending);
        std::mem::swap(&mut a, &mut b);
        if a.is_empty() {
            break;
        }
    }
    out.append(&mut a);
    Ok(())
}

/// A pipeline of map transforms run as one ([`Pipeline::as_map`]): each step, with the map
/// transform it is.
struct MapSteps(Box<[(Step, Arc<dyn MapTransform>)]>);

impl MapTransform for MapSteps {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        for (step, t) in &self.0 {
            match t.map(msg) {
                Ok(InPlace::Keep) => {}
                Ok(InPlace::Drop) => return Ok(InPlace::Drop),
                Err(e) => return Err(step.attribute(e)),
            }
        }
        Ok(InPlace::Keep)
    }
}

#[cfg(test)]
mod tests;
