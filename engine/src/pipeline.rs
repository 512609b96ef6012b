//! Pipeline execution: an ordered list of transforms applied to batches of messages.
//!
//! Like Substation's `Apply`, messages go through the list stage by stage, and a ctrl
//! message placed after the data reaches every stage after it. Unlike it, consecutive
//! stateless transforms form one *segment* that each message crosses depth-first (its JSON
//! stays hot in cache), segments may run on several workers at once, and the output keeps
//! the input order: chunks are processed in parallel and concatenated in order. Stateful
//! transforms see their messages one at a time, in order. A stateless transform that
//! shares state between messages (a kv store lookup or write) is a segment of its own, so
//! it runs over the whole batch before the next transform, as in Substation.
//!
//! When a transform fails, every message the pipeline still holds for that batch is marked
//! failed (see [`crate::ack`]) before the error is returned, so nothing that was abandoned
//! is ever reported as delivered.

use std::sync::Arc;
use std::time::Instant;

use crate::context::Context;
use crate::error::TransformError;
use crate::message::Message;
use crate::transform::{InPlace, Kind, StatefulTransform, Transform};

/// Below this many messages per worker, splitting a batch across workers costs more than
/// it saves.
const MIN_CHUNK: usize = 64;

/// A map or stateless transform in a segment.
#[derive(Clone)]
struct Step {
    id: Arc<str>,
    transform: Transform,
}

impl Step {
    fn in_place(&self) -> bool {
        matches!(self.transform, Transform::Map(_))
    }
}

enum Stage {
    /// A run of map and stateless transforms, which each message crosses depth-first.
    Stateless(Arc<[Step]>),
    /// A stateful transform, with its id.
    Stateful(Arc<str>, Arc<dyn StatefulTransform>),
}

/// A compiled transform list.
pub struct Pipeline {
    stages: Vec<Stage>,
    workers: usize,
    len: usize,
    // Every transform is stateless with an in-place path (see `apply_in_place`).
    in_place: bool,
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
    /// A pipeline of these transforms (id, transform), in order, on one worker.
    pub fn new(steps: Vec<(Arc<str>, Transform)>) -> Pipeline {
        let len = steps.len();
        let mut stages = Vec::new();
        let mut segment: Vec<Step> = Vec::new();
        for (id, transform) in steps {
            match transform {
                Transform::Stateful(t) => {
                    if !segment.is_empty() {
                        stages.push(Stage::Stateless(std::mem::take(&mut segment).into()));
                    }
                    stages.push(Stage::Stateful(id, t));
                }
                transform if transform.shares_state() => {
                    if !segment.is_empty() {
                        stages.push(Stage::Stateless(std::mem::take(&mut segment).into()));
                    }
                    stages.push(Stage::Stateless(vec![Step { id, transform }].into()));
                }
                transform => segment.push(Step { id, transform }),
            }
        }
        if !segment.is_empty() {
            stages.push(Stage::Stateless(segment.into()));
        }
        let in_place = match stages.as_slice() {
            [] => true,
            [Stage::Stateless(steps)] => steps.iter().all(Step::in_place),
            _ => false,
        };
        Pipeline {
            stages,
            workers: 1,
            len,
            in_place,
            ctx: Arc::default(),
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

    /// Stateful if any of its transforms is (what a meta transform wrapping it should be).
    pub fn kind(&self) -> Kind {
        if self.stages.iter().any(|s| matches!(s, Stage::Stateful(..))) {
            Kind::Stateful
        } else {
            Kind::Stateless
        }
    }

    /// Applies the pipeline to `msgs` (data and ctrl, in order) and returns what comes out.
    pub async fn apply(&self, msgs: Vec<Message>) -> Result<Vec<Message>, TransformError> {
        self.apply_stages(0, self.stages.len(), msgs).await
    }

    async fn apply_stages(
        &self,
        from: usize,
        to: usize,
        msgs: Vec<Message>,
    ) -> Result<Vec<Message>, TransformError> {
        let mut cur = msgs;
        for stage in &self.stages[from..to] {
            if cur.is_empty() {
                break;
            }
            let mut out = Vec::with_capacity(cur.len());
            let result = match stage {
                Stage::Stateless(steps) => self.run_stateless(steps, cur, &mut out).await,
                Stage::Stateful(id, t) => t
                    .transform_batch(cur, &mut out)
                    .await
                    .map_err(|e| e.within(id)),
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
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let workers = self.workers.min(msgs.len() / MIN_CHUNK).max(1);
        if workers == 1 {
            return run_segment(steps, msgs, out).await;
        }
        let chunk = msgs.len().div_ceil(workers);
        let mut rest = msgs;
        let mut handles = Vec::with_capacity(workers);
        while !rest.is_empty() {
            let tail = rest.split_off(chunk.min(rest.len()));
            let part = std::mem::replace(&mut rest, tail);
            let steps = steps.clone();
            handles.push(tokio::spawn(async move {
                let mut out = Vec::with_capacity(part.len());
                let r = run_segment(&steps, part, &mut out).await;
                (out, r)
            }));
        }
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

    /// Discards what every stateful transform holds (see [`StatefulTransform::abort`]).
    pub async fn abort(&self, reason: &str) {
        for s in &self.stages {
            if let Stage::Stateful(_, t) = s {
                t.abort(reason).await;
            }
        }
    }

    /// Lets every stateful transform finish what it owes for messages that left it (see
    /// [`StatefulTransform::settle`]), waiting at most until `until`.
    pub async fn settle(&self, until: Instant) {
        for s in &self.stages {
            if let Stage::Stateful(_, t) = s {
                t.settle(until).await;
            }
        }
    }

    /// The earliest deadline of any batch held by a stateful transform.
    pub fn deadline(&self) -> Option<Instant> {
        self.stages
            .iter()
            .filter_map(|s| match s {
                Stage::Stateful(_, t) => t.deadline(),
                Stage::Stateless(_) => None,
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
            if let Stage::Stateful(id, t) = stage
                && t.deadline().is_some_and(|d| d <= now)
                && let Err(e) = t.expire(now, &mut carry).await
            {
                let e = e.within(id);
                fail_messages(&carry, &e);
                return Err(e);
            }
        }
        Ok(carry)
    }
}

fn fail_messages(msgs: &[Message], e: &TransformError) {
    let reason = e.to_string();
    for m in msgs {
        m.fail_acks(&reason);
    }
}

/// Takes each message depth-first through a run of stateless transforms. Steps with an
/// in-place path are called directly on the message; from the first step without one, the
/// rest of the run goes through async calls and output lists.
async fn run_segment(
    steps: &[Step],
    msgs: Vec<Message>,
    out: &mut Vec<Message>,
) -> Result<(), TransformError> {
    let mut rest = msgs.into_iter();
    while let Some(mut msg) = rest.next() {
        if msg.is_ctrl() {
            out.push(msg);
            continue;
        }
        let mut i = 0;
        let mut kept = true;
        while let Some(Transform::Map(t)) = steps.get(i).map(|s| &s.transform) {
            match t.map(&mut msg) {
                Ok(InPlace::Keep) => i += 1,
                Ok(InPlace::Drop) => {
                    kept = false;
                    break;
                }
                Err(e) => {
                    let e = e.within(&steps[i].id);
                    let reason = e.to_string();
                    msg.fail_acks(&reason);
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
            out.push(msg);
            continue;
        }
        if let Err(e) = run_steps(&steps[i..], msg, out).await {
            let reason = e.to_string();
            for m in rest {
                m.fail_acks(&reason);
            }
            return Err(e);
        }
    }
    Ok(())
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
                let e = e.within(&step.id);
                let reason = e.to_string();
                if let Some(acks) = acks {
                    crate::ack::fail_all(&acks, &reason);
                }
                for m in pending.chain(b.drain(..)) {
                    m.fail_acks(&reason);
                }
                return Err(e);
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

impl Pipeline {
    /// Whether [`Pipeline::apply_in_place`] works: every transform is stateless and has an
    /// in-place path (what a meta transform needs for an in-place path of its own).
    pub fn supports_in_place(&self) -> bool {
        self.in_place
    }

    /// Runs one data message through the pipeline without async calls. `None` when
    /// [`Pipeline::supports_in_place`] is false (nothing was run).
    pub fn apply_in_place(&self, msg: &mut Message) -> Option<Result<InPlace, TransformError>> {
        if !self.in_place {
            return None;
        }
        let [Stage::Stateless(steps)] = self.stages.as_slice() else {
            return Some(Ok(InPlace::Keep));
        };
        for step in steps.iter() {
            let Transform::Map(t) = &step.transform else {
                return None;
            };
            match t.map(msg) {
                Ok(InPlace::Keep) => {}
                Ok(InPlace::Drop) => return Some(Ok(InPlace::Drop)),
                Err(e) => return Some(Err(e.within(&step.id))),
            }
        }
        Some(Ok(InPlace::Keep))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::{AckStatus, AckTracker};
    use crate::transform::{MapTransform, StatelessTransform};
    use async_trait::async_trait;
    use std::sync::Mutex;

    /// Appends its tag to string data.
    struct Tag(&'static str);
    #[async_trait]
    impl StatelessTransform for Tag {
        async fn transform(
            &self,
            mut m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            let s = format!("{}{}", String::from_utf8_lossy(m.data()), self.0);
            m.set_data(s.into_bytes());
            out.push(m);
            Ok(())
        }
    }

    /// Fails on data "bad".
    struct FailOn;
    #[async_trait]
    impl StatelessTransform for FailOn {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            if &m.data()[..] == b"bad" {
                return Err(TransformError::failed("boom"));
            }
            out.push(m);
            Ok(())
        }
    }

    /// Records the order it sees messages in, ctrl as "<ctrl>".
    #[derive(Default)]
    struct Record(Mutex<Vec<String>>);
    #[async_trait]
    impl StatefulTransform for Record {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            let s = if m.is_ctrl() {
                "<ctrl>".to_string()
            } else {
                String::from_utf8_lossy(m.data()).into_owned()
            };
            self.0.lock().unwrap().push(s);
            out.push(m);
            Ok(())
        }
    }

    /// Appends its tag in place (the fast path).
    struct FastTag(&'static str);
    impl MapTransform for FastTag {
        fn map(&self, m: &mut Message) -> Result<InPlace, TransformError> {
            if &m.data()[..] == b"drop" {
                return Ok(InPlace::Drop);
            }
            if m.data().starts_with(b"bad") {
                return Err(TransformError::failed("fast boom"));
            }
            let s = format!("{}{}", String::from_utf8_lossy(m.data()), self.0);
            m.set_data(s.into_bytes());
            Ok(InPlace::Keep)
        }
    }

    /// Emits each message twice (no fast path).
    struct Twice;
    #[async_trait]
    impl StatelessTransform for Twice {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            out.push(m.clone());
            out.push(m);
            Ok(())
        }
    }

    #[tokio::test]
    async fn in_place_steps_mix_with_async_ones_without_repeating_work() {
        let pipe = p(vec![
            Transform::map(FastTag("a")),
            Transform::stateless(Twice),
            Transform::map(FastTag("b")),
            Transform::map(FastTag("c")),
        ]);
        let out = pipe
            .apply(vec![
                Message::new(&b"x"[..]),
                Message::new(&b"drop"[..]),
                Message::ctrl(),
            ])
            .await
            .unwrap();
        // "drop" is dropped by the first (in-place) step; "x" is tagged once per step even
        // though the work moves from the fast path to async calls and back.
        assert_eq!(data(&out), vec!["xabc".to_string(), "xabc".to_string()]);
        assert!(out.last().unwrap().is_ctrl());
        // A fast step can drop.
        let out = p(vec![Transform::map(FastTag("a"))])
            .apply(vec![Message::new(&b"drop"[..])])
            .await
            .unwrap();
        assert!(out.is_empty());
    }

    #[tokio::test]
    async fn in_place_errors_name_the_step_and_fail_the_rest() {
        let pipe = p(vec![
            Transform::map(FastTag("a")),
            Transform::map(FastTag("b")),
        ]);
        let (t_bad, tok_bad) = AckTracker::new();
        let (t_after, tok_after) = AckTracker::new();
        let mut bad = Message::new(&b"bad"[..]);
        bad.add_ack(tok_bad);
        let mut after = Message::new(&b"ok"[..]);
        after.add_ack(tok_after);
        let err = pipe.apply(vec![bad, after]).await.unwrap_err();
        assert_eq!(err.to_string(), "transform t0: fast boom");
        assert_eq!(t_bad.status(), AckStatus::Failed);
        assert_eq!(t_after.status(), AckStatus::Failed);
    }

    #[test]
    fn whole_pipelines_report_their_in_place_path() {
        let fast = p(vec![
            Transform::map(FastTag("a")),
            Transform::map(FastTag("b")),
        ]);
        assert!(fast.supports_in_place());
        let mut m = Message::new(&b"x"[..]);
        assert_eq!(fast.apply_in_place(&mut m).unwrap().unwrap(), InPlace::Keep);
        assert_eq!(&m.data()[..], b"xab");
        let mixed = p(vec![
            Transform::map(FastTag("a")),
            Transform::stateless(Twice),
        ]);
        assert!(!mixed.supports_in_place());
        let mut m = Message::new(&b"x"[..]);
        assert!(mixed.apply_in_place(&mut m).is_none());
        assert_eq!(&m.data()[..], b"x", "nothing ran");
    }

    fn p(ts: Vec<Transform>) -> Pipeline {
        Pipeline::new(
            ts.into_iter()
                .enumerate()
                .map(|(i, t)| (Arc::from(format!("t{i}")), t))
                .collect(),
        )
    }

    fn data(outs: &[Message]) -> Vec<String> {
        outs.iter()
            .filter(|m| !m.is_ctrl())
            .map(|m| String::from_utf8_lossy(m.data()).into_owned())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn order_is_kept_across_workers_and_ctrl_comes_last() {
        let rec = Arc::new(Record::default());
        let pipe = p(vec![
            Transform::stateless(Tag("a")),
            Transform::Stateful(rec.clone()),
            Transform::stateless(Tag("b")),
        ])
        .with_workers(4);
        let mut input: Vec<Message> = (0..1000)
            .map(|i| Message::new(i.to_string().into_bytes()))
            .collect();
        input.push(Message::ctrl());
        let out = pipe.apply(input).await.unwrap();
        let want: Vec<String> = (0..1000).map(|i| format!("{i}ab")).collect();
        assert_eq!(data(&out), want);
        assert!(out.last().unwrap().is_ctrl());
        let seen = rec.0.lock().unwrap();
        assert_eq!(seen.len(), 1001);
        assert_eq!(seen[999], "999a");
        assert_eq!(seen[1000], "<ctrl>");
    }

    #[tokio::test]
    async fn errors_name_the_transform_and_fail_what_was_held() {
        let pipe = p(vec![
            Transform::stateless(Tag("")),
            Transform::stateless(FailOn),
        ]);
        let (t_ok, tok_ok) = AckTracker::new();
        let (t_bad, tok_bad) = AckTracker::new();
        let (t_after, tok_after) = AckTracker::new();
        let mut a = Message::new(&b"ok"[..]);
        a.add_ack(tok_ok);
        let mut b = Message::new(&b"bad"[..]);
        b.add_ack(tok_bad);
        let mut c = Message::new(&b"later"[..]);
        c.add_ack(tok_after);
        let err = pipe.apply(vec![a, b, c]).await.unwrap_err();
        assert_eq!(err.to_string(), "transform t1: boom");
        assert_eq!(t_bad.status(), AckStatus::Failed);
        assert_eq!(t_after.status(), AckStatus::Failed);
        // "ok" had already crossed the whole segment; it is still held in the output and
        // is failed too, since it never reached the end.
        assert_eq!(t_ok.status(), AckStatus::Failed);
    }

    #[tokio::test]
    async fn stateless_transforms_never_see_ctrl() {
        let pipe = p(vec![Transform::stateless(FailOn)]);
        let out = pipe.apply(vec![Message::ctrl()]).await.unwrap();
        assert!(out[0].is_ctrl());
        assert_eq!(pipe.kind(), Kind::Stateless);
    }
}
