//! Tests of the pipeline: order across workers, errors, map transforms run in place, the lead that runs
//! ahead and the bytes handed to stages that take them.

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
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
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
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
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
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
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
fn pipelines_of_map_transforms_are_one_map_transform() {
    let fast = p(vec![
        Transform::map(FastTag("a")),
        Transform::map(FastTag("b")),
    ]);
    let map = fast.as_map().expect("map transforms only");
    let mut m = Message::new(&b"x"[..]);
    assert_eq!(map.map(&mut m).unwrap(), InPlace::Keep);
    assert_eq!(&m.data()[..], b"xab");
    let mut m = Message::new(&b"drop"[..]);
    assert_eq!(map.map(&mut m).unwrap(), InPlace::Drop);
    let mut m = Message::new(&b"bad"[..]);
    let err = map.map(&mut m).unwrap_err();
    assert_eq!(
        err.to_string(),
        "transform t0: fast boom",
        "errors name their step"
    );
    let mut m = Message::new(&b"x"[..]);
    assert_eq!(
        p(vec![]).as_map().unwrap().map(&mut m).unwrap(),
        InPlace::Keep
    );
    assert_eq!(&m.data()[..], b"x");
    let mixed = p(vec![
        Transform::map(FastTag("a")),
        Transform::stateless(Twice),
    ]);
    assert!(mixed.as_map().is_none());
    let stateful = p(vec![Transform::stateful(Record::default())]);
    assert!(stateful.as_map().is_none());
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
        Transform::Stateful(rec.clone(), None),
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

/// `failing_messages_alone`: a message a stateless step fails (in place or async, after a
/// fan-out too) fails alone when it carries an acknowledgement; the others go on. One
/// without an acknowledgement still fails the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_failed_by_a_step_fails_alone_when_it_is_reported() {
    for (name, steps) in [
        ("in place", vec![Transform::map(FastTag("+"))]),
        (
            "async",
            vec![Transform::stateless(Twice), Transform::stateless(FailOn)],
        ),
    ] {
        let pipe = p(steps).failing_messages_alone().with_workers(2);
        let mut trackers = Vec::new();
        let mut input = Vec::new();
        for d in ["a", "bad", "c"] {
            let (t, tok) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(tok);
            trackers.push(t);
            input.push(m);
        }
        input.push(Message::ctrl());
        let out = pipe.apply(input).await.unwrap();
        let want: Vec<String> = match name {
            "in place" => vec!["a+".into(), "c+".into()],
            _ => vec!["a".into(), "a".into(), "c".into(), "c".into()],
        };
        assert_eq!(data(&out), want, "{name}");
        assert_eq!(trackers[1].status(), AckStatus::Failed, "{name}");
        assert!(
            trackers[1]
                .failure_reason()
                .is_some_and(|r| r.contains("boom") && r.contains("t")),
            "{name}: {:?}",
            trackers[1].failure_reason()
        );
        drop(out);
        for i in [0, 2] {
            assert_eq!(trackers[i].status(), AckStatus::Delivered, "{name} {i}");
        }
        // Unreported, it fails the batch as before.
        let err = pipe
            .apply(vec![Message::new(&b"bad"[..]), Message::new(&b"c"[..])])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{name}: {err}");
    }
}

/// A stateless transform that shares state (a kv store's, in real life).
struct Shared;
#[async_trait]
impl StatelessTransform for Shared {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        out.push(m);
        Ok(())
    }
    fn shares_state(&self) -> bool {
        true
    }
}

#[test]
fn only_a_lead_that_shares_nothing_runs_ahead_and_only_on_several_workers() {
    let stateful = || Transform::Stateful(Arc::new(Record::default()), None);
    let cases: Vec<(&str, Vec<Transform>, bool)> = vec![
        (
            "stateless then a send",
            vec![Transform::stateless(Tag("a")), stateful()],
            true,
        ),
        (
            "a send first",
            vec![stateful(), Transform::stateless(Tag("a"))],
            false,
        ),
        (
            "only stateless",
            vec![Transform::stateless(Tag("a"))],
            false,
        ),
        (
            "a kv store step first",
            vec![Transform::stateless(Shared), stateful()],
            false,
        ),
        (
            "a kv store step after the lead",
            vec![
                Transform::stateless(Tag("a")),
                Transform::stateless(Shared),
                stateful(),
            ],
            true,
        ),
        ("empty", vec![], false),
    ];
    for (name, ts, want) in cases {
        let pipe = p(ts);
        assert!(!pipe.runs_ahead(), "{name}: one worker never runs ahead");
        assert_eq!(pipe.with_workers(2).runs_ahead(), want, "{name}");
    }
}

/// Records, for each data message, its data and whether it still held parsed JSON.
struct Holds {
    takes_bytes: bool,
    seen: Mutex<Vec<(String, bool)>>,
}
#[async_trait]
impl StatefulTransform for Holds {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if !m.is_ctrl() {
            let held = m.data_body().holds_value();
            let data = String::from_utf8_lossy(m.data()).into_owned();
            self.seen.lock().unwrap().push((data, held));
        }
        out.push(m);
        Ok(())
    }
    fn takes_bytes(&self) -> bool {
        self.takes_bytes
    }
}

/// Sets the data to `{"n":<its old data>}` as a JSON value (in place).
struct Wrap;
impl MapTransform for Wrap {
    fn map(&self, m: &mut Message) -> Result<InPlace, TransformError> {
        let n: i64 = String::from_utf8_lossy(m.data()).parse().unwrap_or(-1);
        m.set_data_value(crate::json!({ "n": n }));
        Ok(InPlace::Keep)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_that_takes_bytes_gets_them_serialised_and_the_json_freed_by_the_worker() {
    for (takes_bytes, workers, via_async) in [
        (true, 1, false),
        (true, 2, false),
        (true, 2, true),
        (false, 2, false),
    ] {
        let holds = Arc::new(Holds {
            takes_bytes,
            seen: Mutex::default(),
        });
        let mut ts = vec![Transform::map(Wrap)];
        if via_async {
            // The message leaves the segment through an async step's output list.
            ts.push(Transform::stateless(Tag("")));
            ts.push(Transform::map(Wrap));
        }
        ts.push(Transform::Stateful(holds.clone(), None));
        let pipe = p(ts).with_workers(workers);
        let input: Vec<Message> = (0..300)
            .map(|i| Message::new(i.to_string().into_bytes()))
            .collect();
        let out = pipe.apply(input).await.unwrap();
        assert_eq!(out.len(), 300);
        let seen = holds.seen.lock().unwrap();
        let case = format!("takes_bytes {takes_bytes}, {workers} workers, async {via_async}");
        for (i, (data, held)) in seen.iter().enumerate() {
            let want = if via_async {
                // Tag("") serialises {"n":i}; Wrap parses that as -1.
                r#"{"n":-1}"#.to_string()
            } else {
                format!(r#"{{"n":{i}}}"#)
            };
            assert_eq!(data, &want, "{case}");
            assert_eq!(*held, !takes_bytes, "{case}: message {i}");
        }
        assert_eq!(seen.len(), 300, "{case}");
    }
}

#[tokio::test]
async fn stateless_transforms_never_see_ctrl() {
    let pipe = p(vec![Transform::stateless(FailOn)]);
    let out = pipe.apply(vec![Message::ctrl()]).await.unwrap();
    assert!(out[0].is_ctrl());
    assert!(!pipe.is_stateful());
}

/// Fails on data "bad" (a stateful stage, after the lead).
struct FailLater;
#[async_trait]
impl StatefulTransform for FailLater {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if !m.is_ctrl() && &m.data()[..] == b"bad" {
            return Err(TransformError::failed("later boom"));
        }
        out.push(m);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_each_keeps_order_and_fails_what_follows_an_error() {
    for workers in [1, 2] {
        // In order, whether the lead runs ahead or not.
        let rec = Arc::new(Record::default());
        let pipe = p(vec![
            Transform::stateless(Tag("a")),
            Transform::Stateful(rec.clone(), None),
        ])
        .with_workers(workers);
        assert_eq!(pipe.runs_ahead(), workers > 1);
        let batches: Vec<Vec<Message>> = (0..6)
            .map(|b| {
                (0..200)
                    .map(|i| Message::new(format!("{b}-{i}").into_bytes()))
                    .collect()
            })
            .collect();
        let mut out = Vec::new();
        pipe.apply_each(batches, |o| out.extend(o)).await.unwrap();
        let want: Vec<String> = (0..6)
            .flat_map(|b| (0..200).map(move |i| format!("{b}-{i}a")))
            .collect();
        assert_eq!(data(&out), want, "{workers} workers");
        assert_eq!(*rec.0.lock().unwrap(), want, "{workers} workers");

        // An error in the rest of batch 1: batch 0 is delivered, batch 1 and every batch
        // after it (in the lead or not started) fail.
        let pipe = p(vec![
            Transform::stateless(Tag("")),
            Transform::Stateful(Arc::new(FailLater), None),
        ])
        .with_workers(workers);
        let mut trackers = Vec::new();
        let batches: Vec<Vec<Message>> = ["ok", "bad", "x", "y", "z", "w"]
            .iter()
            .map(|d| {
                let (t, tok) = AckTracker::new();
                let mut m = Message::new(d.as_bytes().to_vec());
                m.add_ack(tok);
                trackers.push(t);
                vec![m]
            })
            .collect();
        let mut out = Vec::new();
        let err = pipe
            .apply_each(batches, |o| out.extend(o))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "transform t1: later boom");
        assert_eq!(data(&out), vec!["ok".to_string()]);
        drop(out);
        let status: Vec<AckStatus> = trackers.iter().map(|t| t.status()).collect();
        let mut want = vec![AckStatus::Delivered];
        want.extend([AckStatus::Failed; 5]);
        assert_eq!(status, want, "{workers} workers");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_started_where_none_runs_ahead_leaves_the_whole_pipeline_to_the_rest() {
    // Only stateless transforms: nothing runs ahead, and each runs once.
    let pipe = p(vec![
        Transform::stateless(Tag("a")),
        Transform::map(FastTag("b")),
    ])
    .with_workers(2);
    assert!(!pipe.runs_ahead());
    let input: Vec<Message> = (0..300)
        .map(|i| Message::new(i.to_string().into_bytes()))
        .collect();
    let lead = pipe.start_lead(input).finish().await.unwrap();
    assert_eq!(data(&lead[..1]), vec!["0".to_string()], "untouched");
    let out = pipe.apply_rest(lead).await.unwrap();
    let want: Vec<String> = (0..300).map(|i| format!("{i}ab")).collect();
    assert_eq!(data(&out), want);
}

/// A send in miniature: holds each data message until a ctrl, then "delivers" them,
/// failing when one of them is "bad" (kept to retry, as a send keeps a failed batch), and
/// refusing what comes while the failure is kept. `give_up` fails what it kept.
#[derive(Default)]
struct FlakySink {
    open: Mutex<Vec<Message>>,
    failed: Mutex<Vec<Message>>,
    gave_up: Mutex<Vec<String>>,
}
#[async_trait]
impl StatefulTransform for FlakySink {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if !self.failed.lock().unwrap().is_empty() {
            m.fail_acks("still failing");
            return Err(TransformError::failed("still failing"));
        }
        if !m.is_ctrl() {
            self.open.lock().unwrap().push(m);
            return Ok(());
        }
        let batch = std::mem::take(&mut *self.open.lock().unwrap());
        if batch.iter().any(|b| &b.data()[..] == b"bad") {
            *self.failed.lock().unwrap() = batch;
            return Err(TransformError::failed("sink down"));
        }
        out.extend(batch);
        out.push(m);
        Ok(())
    }

    async fn give_up(&self, reason: &str) {
        self.gave_up.lock().unwrap().push(reason.to_string());
        for m in std::mem::take(&mut *self.failed.lock().unwrap()) {
            m.fail_acks(reason);
        }
    }
}

/// `failing_messages_alone`: a stateful transform's error fails the messages it failed
/// (its batch, kept to retry, which it gives up) and no others; the ctrl it did not pass
/// on still reaches the transforms after it, and later batches go through. Without it the
/// error fails the batch.
#[tokio::test]
async fn a_stateful_error_fails_its_messages_alone_and_the_ctrl_goes_on() {
    let sink = Arc::new(FlakySink::default());
    let rec = Arc::new(Record::default());
    let pipe = p(vec![
        Transform::Stateful(sink.clone(), None),
        Transform::Stateful(rec.clone(), None),
    ])
    .failing_messages_alone();
    let mut trackers = Vec::new();
    let mut batch = |data: &[&str]| {
        let mut msgs = Vec::new();
        for d in data {
            let (t, tok) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(tok);
            trackers.push(t);
            msgs.push(m);
        }
        msgs.push(Message::ctrl());
        msgs
    };
    let first = batch(&["a", "bad"]);
    let second = batch(&["c"]);
    let out = pipe.apply(first).await.unwrap();
    assert_eq!(data(&out), Vec::<String>::new());
    assert!(out.last().is_some_and(Message::is_ctrl), "the ctrl goes on");
    assert_eq!(*rec.0.lock().unwrap(), ["<ctrl>"]);
    assert_eq!(sink.gave_up.lock().unwrap().len(), 1);
    for t in &trackers[..2] {
        assert_eq!(t.status(), AckStatus::Failed);
        assert!(
            t.failure_reason()
                .is_some_and(|r| r.contains("transform t0") && r.contains("sink down")),
            "{:?}",
            t.failure_reason()
        );
    }
    // The next batch goes through: nothing of the failure is kept.
    let out = pipe.apply(second).await.unwrap();
    assert_eq!(data(&out), ["c"]);
    drop(out);
    assert_eq!(trackers[2].status(), AckStatus::Delivered);

    // Without it, the error fails the batch and nothing is given up.
    let sink = Arc::new(FlakySink::default());
    let pipe = p(vec![Transform::Stateful(sink.clone(), None)]);
    let err = pipe
        .apply(vec![Message::new(&b"bad"[..]), Message::ctrl()])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sink down"), "{err}");
    assert!(sink.gave_up.lock().unwrap().is_empty());
}

/// Fails every call with a broken pipe (standard output closed).
struct ClosedOutput;
#[async_trait]
impl StatefulTransform for ClosedOutput {
    async fn transform(&self, m: Message, _out: &mut Vec<Message>) -> Result<(), TransformError> {
        m.fail_acks("closed");
        Err(TransformError::external(
            "writing to standard output",
            std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        ))
    }
}

/// A broken pipe ends the run even where messages fail alone: nothing after it could be
/// written either.
#[tokio::test]
async fn a_closed_output_ends_the_run_even_where_messages_fail_alone() {
    let pipe = p(vec![Transform::Stateful(Arc::new(ClosedOutput), None)]).failing_messages_alone();
    let (t, tok) = AckTracker::new();
    let mut m = Message::new(&b"a"[..]);
    m.add_ack(tok);
    let err = pipe.apply(vec![m, Message::ctrl()]).await.unwrap_err();
    assert!(err.ends_run(), "{err}");
    assert!(err.to_string().contains("broken pipe"), "{err}");
    assert_eq!(t.status(), AckStatus::Failed);
    assert!(!TransformError::failed("sink down").ends_run());
}

/// Where messages fail alone, a stateful transform that keeps failing stops the run at its
/// `FAILURES_IN_A_ROW_TO_STOP`th error in a row (a store or destination that is down would
/// otherwise spend its retries on every batch); a call that succeeds starts the count again.
#[tokio::test]
async fn failures_in_a_row_stop_the_run_where_messages_fail_alone() {
    let sink = Arc::new(FlakySink::default());
    let pipe = p(vec![Transform::Stateful(sink.clone(), None)]).failing_messages_alone();
    let batch = |d: &str| {
        let (_t, tok) = AckTracker::new();
        let mut m = Message::new(d.as_bytes().to_vec());
        m.add_ack(tok);
        vec![m, Message::ctrl()]
    };
    for round in 0..3 {
        for _ in 1..FAILURES_IN_A_ROW_TO_STOP {
            pipe.apply(batch("bad")).await.unwrap();
        }
        if round < 2 {
            // One that goes through starts the count again.
            pipe.apply(batch("fine")).await.unwrap();
        }
    }
    let err = pipe.apply(batch("bad")).await.unwrap_err();
    assert!(err.ends_run(), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "transform t0: sink down (it failed {FAILURES_IN_A_ROW_TO_STOP} times in a row: stopping)"
        )
    );
}
