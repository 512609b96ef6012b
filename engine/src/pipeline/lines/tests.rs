//! Tests of lines written by the workers: order whatever order the chunks finish in,
//! tokens, a failed write, a failed or panicking lead, ctrl messages in a batch, and which
//! pipelines write this way.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::ack::{AckStatus, AckTracker};
use crate::driver::{RunStats, drive};
use crate::error::TransformError;
use crate::message::Message;
use crate::pipeline::Pipeline;
use crate::transform::{
    InPlace, LineSink, MapTransform, StatefulTransform, StatelessTransform, Transform,
};

use super::*;

/// A stream that keeps what is written; fails the write numbered `fail_at` (from 0) and
/// every one after it, and refuses the data in `refuse`.
#[derive(Default)]
struct Written {
    text: Mutex<Vec<u8>>,
    writes: AtomicUsize,
    fail_at: Option<usize>,
    refuse: Vec<&'static str>,
}

impl LineSink for Written {
    fn write_lines(&self, lines: &[u8]) -> Result<(), TransformError> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.fail_at.is_some_and(|f| n >= f) {
            return Err(TransformError::failed("disk full"));
        }
        assert!(lines.ends_with(b"\n"), "whole lines");
        self.text.lock().unwrap().extend_from_slice(lines);
        Ok(())
    }

    fn check(&self, data: &[u8]) -> Result<(), TransformError> {
        match self.refuse.iter().any(|r| r.as_bytes() == data) {
            true => Err(TransformError::failed("too large")),
            false => Ok(()),
        }
    }
}

impl Written {
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.text.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A send that only writes lines: records what reaches it (ctrl as `<ctrl>` with the
/// lines written by then) and writes data that does into its stream itself.
struct WritesLines {
    sink: Arc<Written>,
    seen: Mutex<Vec<String>>,
}

impl WritesLines {
    fn new(sink: Written) -> Arc<WritesLines> {
        Arc::new(WritesLines {
            sink: Arc::new(sink),
            seen: Mutex::default(),
        })
    }
}

#[async_trait]
impl StatefulTransform for WritesLines {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if m.is_ctrl() {
            let lines = self.sink.lines().len();
            self.seen.lock().unwrap().push(format!("<ctrl> {lines}"));
        } else {
            self.seen
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(m.data()).into_owned());
            let mut line = m.data().to_vec();
            line.push(b'\n');
            self.sink.write_lines(&line)?;
        }
        out.push(m);
        Ok(())
    }

    fn takes_bytes(&self) -> bool {
        true
    }
}

/// `send` as built, with the stream it writes lines to.
fn writing(send: &Arc<WritesLines>) -> Transform {
    Transform::Stateful(send.clone(), Some(send.sink.clone()))
}

/// Waits a while that depends on the data (so chunks finish out of order; 30 ms on the
/// data `slow`), then appends "+"; fails on "bad" and panics on "panic".
#[derive(Default)]
struct Shuffle {
    slow: Option<&'static str>,
}
#[async_trait]
impl StatelessTransform for Shuffle {
    async fn transform(
        &self,
        mut m: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let data = String::from_utf8_lossy(m.data()).into_owned();
        match data.as_str() {
            "bad" => return Err(TransformError::failed("boom")),
            "panic" => panic!("the data said so"),
            _ => {}
        }
        let wait = data
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(b))
            % 5;
        if self.slow == Some(data.as_str()) {
            tokio::time::sleep(Duration::from_millis(30)).await;
        } else if wait == 0 {
            tokio::time::sleep(Duration::from_micros(300)).await;
        } else {
            for _ in 0..wait {
                tokio::task::yield_now().await;
            }
        }
        m.set_data(format!("{data}+").into_bytes());
        out.push(m);
        Ok(())
    }
}

/// Appends "!" in place (the lead's usual path).
struct Bang;
impl MapTransform for Bang {
    fn map(&self, m: &mut Message) -> Result<InPlace, TransformError> {
        if &m.data()[..] == b"drop" {
            return Ok(InPlace::Drop);
        }
        let data = format!("{}!", String::from_utf8_lossy(m.data()));
        m.set_data(data.into_bytes());
        Ok(InPlace::Keep)
    }
}

fn pipeline(lead: Vec<Transform>, send: &Arc<WritesLines>, workers: usize) -> Pipeline {
    let mut steps: Vec<(Arc<str>, Transform)> = lead
        .into_iter()
        .enumerate()
        .map(|(i, t)| (Arc::from(format!("lead{i}")), t))
        .collect();
    steps.push((Arc::from("out"), writing(send)));
    Pipeline::new(steps)
        .with_workers(workers)
        .discarding_outputs()
}

/// A lead of [`Shuffle`] (out of order) then [`Bang`] (in place), before `send`.
fn shuffled_then_banged(send: &Arc<WritesLines>, workers: usize) -> Pipeline {
    let lead = vec![
        Transform::stateless(Shuffle::default()),
        Transform::map(Bang),
    ];
    pipeline(lead, send, workers)
}

/// Drives `p` over `batches` (already queued), with a time limit.
async fn run(p: &Pipeline, batches: Vec<Vec<Message>>) -> Result<RunStats, TransformError> {
    let (tx, rx) = mpsc::channel(batches.len().max(1));
    for b in batches {
        tx.send(b).await.unwrap();
    }
    drop(tx);
    tokio::time::timeout(Duration::from_secs(30), drive(p, rx, |_| {}))
        .await
        .expect("no deadlock")
}

/// `batches` batches of `len` messages `b{n}-{i}`, each tracked.
fn tracked(batches: usize, len: usize) -> (Vec<Vec<Message>>, Vec<Arc<AckTracker>>) {
    let mut trackers = Vec::new();
    let msgs = (0..batches)
        .map(|n| {
            (0..len)
                .map(|i| {
                    let (t, tok) = AckTracker::new();
                    trackers.push(t);
                    let mut m = Message::new(format!("b{n}-{i}").into_bytes());
                    m.add_ack(tok);
                    m
                })
                .collect()
        })
        .collect();
    (msgs, trackers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn lines_are_written_in_input_order_whatever_order_the_chunks_finish_in() {
    // (workers, messages per batch, batches): chunks of 64 and more, single chunks, and
    // batches of one message.
    for (workers, len, batches) in [(2, 300, 12), (3, 1000, 5), (2, 64, 30), (2, 1, 40)] {
        let send = WritesLines::new(Written::default());
        let p = shuffled_then_banged(&send, workers);
        assert!(p.runs_ahead());
        let (msgs, trackers) = tracked(batches, len);
        let stats = run(&p, msgs).await.unwrap();
        let want: Vec<String> = (0..batches)
            .flat_map(|n| (0..len).map(move |i| format!("b{n}-{i}+!")))
            .collect();
        let case = format!("{workers} workers, {batches} batches of {len}");
        assert_eq!(send.sink.lines(), want, "{case}");
        let total = (batches * len) as u64;
        assert_eq!(
            (stats.messages_in, stats.messages_out),
            (total, total),
            "{case}"
        );
        // The send saw only the ctrl at the end, after every line.
        assert_eq!(
            *send.seen.lock().unwrap(),
            [format!("<ctrl> {total}")],
            "{case}"
        );
        // Written, so accepted; and delivered once the lines' tokens are gone.
        for t in &trackers {
            assert_eq!(t.status(), AckStatus::Delivered, "{case}");
            assert!(t.accepted(), "{case}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_messages_write_nothing_and_empty_data_is_an_empty_line() {
    let send = WritesLines::new(Written::default());
    let p = pipeline(vec![Transform::map(Bang)], &send, 2);
    let batch = |v: &[&str]| v.iter().map(|d| Message::new(d.to_string())).collect();
    let stats = run(
        &p,
        vec![
            batch(&["a", "drop", "b"]),
            batch(&["drop", "drop"]),
            batch(&["", "c"]),
        ],
    )
    .await
    .unwrap();
    assert_eq!(send.sink.lines(), ["a!", "b!", "!", "c!"]);
    assert_eq!(stats.messages_out, 4);
    assert_eq!(
        send.sink.writes.load(Ordering::SeqCst),
        2,
        "nothing to write, no write"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_fails_its_chunk_and_every_chunk_after_it() {
    // Batches of 256 on two workers are four chunks of 64: the third write fails, and the
    // fourth chunk finishes after that.
    let send = WritesLines::new(Written {
        fail_at: Some(2),
        ..Written::default()
    });
    let slow = Shuffle {
        slow: Some("b0-192"),
    };
    let p = pipeline(vec![Transform::stateless(slow)], &send, 2);
    let (msgs, trackers) = tracked(3, 256);
    let err = run(&p, msgs).await.unwrap_err();
    assert_eq!(err.to_string(), "transform out: disk full");
    let want: Vec<String> = (0..128).map(|i| format!("b0-{i}+")).collect();
    assert_eq!(send.sink.lines(), want, "the two chunks before it");
    assert_eq!(
        send.sink.writes.load(Ordering::SeqCst),
        3,
        "nothing written after the failure"
    );
    for (i, t) in trackers.iter().enumerate() {
        if i < 128 {
            assert_eq!(t.status(), AckStatus::Delivered, "message {i}");
        } else {
            assert_eq!(t.status(), AckStatus::Failed, "message {i}");
            assert_eq!(
                t.failure_reason().as_deref(),
                Some("transform out: disk full"),
                "message {i}"
            );
            assert!(!t.accepted(), "message {i}");
        }
    }
    assert!(
        send.seen.lock().unwrap().is_empty(),
        "no ctrl after an error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_lead_lets_the_chunks_before_it_be_written_and_fails_the_rest() {
    let send = WritesLines::new(Written::default());
    let slow = Shuffle {
        slow: Some("b1-192"),
    };
    let p = pipeline(vec![Transform::stateless(slow)], &send, 2);
    let (mut msgs, trackers) = tracked(3, 256);
    // In batch 1's third chunk (messages 128..192 of the batch); its fourth finishes after.
    msgs[1][150].set_data(&b"bad"[..]);
    let err = run(&p, msgs).await.unwrap_err();
    assert_eq!(err.to_string(), "transform lead0: boom");
    let want: Vec<String> = (0..256)
        .map(|i| format!("b0-{i}+"))
        .chain((0..128).map(|i| format!("b1-{i}+")))
        .collect();
    assert_eq!(send.sink.lines(), want);
    for (i, t) in trackers.iter().enumerate() {
        let want = if i < 256 + 128 {
            AckStatus::Delivered
        } else {
            AckStatus::Failed
        };
        assert_eq!(t.status(), want, "message {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_the_send_refuses_fails_where_it_comes_as_in_the_send() {
    // Batch 0's message 100, in its second chunk (64..128), after the lead's "+".
    let send = WritesLines::new(Written {
        refuse: vec!["b0-100+"],
        ..Written::default()
    });
    let p = pipeline(vec![Transform::stateless(Shuffle::default())], &send, 2);
    let (msgs, trackers) = tracked(2, 256);
    let err = run(&p, msgs).await.unwrap_err();
    assert_eq!(err.to_string(), "transform out: too large");
    let want: Vec<String> = (0..64).map(|i| format!("b0-{i}+")).collect();
    assert_eq!(send.sink.lines(), want, "the chunk before it");
    for (i, t) in trackers.iter().enumerate() {
        let want = if i < 64 {
            AckStatus::Delivered
        } else {
            AckStatus::Failed
        };
        assert_eq!(t.status(), want, "message {i}");
    }
    assert_eq!(
        trackers[100].failure_reason().as_deref(),
        Some("transform out: too large")
    );
}

/// Where messages fail alone (`sluice run`), data the send refuses fails alone, as the
/// send refuses it there: named with the send's error, every other line written in order,
/// and no stop however many come in a row (it is the data, not a destination that is
/// down), whichever of `failing_messages_alone` and `discarding_outputs` comes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_the_send_refuses_fails_alone_where_messages_fail_alone() {
    // Message 100 of batch 0 alone, and batch 1's 10 to 14: more than
    // `FAILURES_IN_A_ROW_TO_STOP` in a row.
    let refused = ["b0-100+", "b1-10+", "b1-11+", "b1-12+", "b1-13+", "b1-14+"];
    for alone_first in [true, false] {
        let send = WritesLines::new(Written {
            refuse: refused.to_vec(),
            ..Written::default()
        });
        let steps: Vec<(Arc<str>, Transform)> = vec![
            ("lead".into(), Transform::stateless(Shuffle::default())),
            ("out".into(), writing(&send)),
        ];
        let p = match alone_first {
            true => Pipeline::new(steps)
                .failing_messages_alone()
                .with_workers(2)
                .discarding_outputs(),
            false => {
                let p = Pipeline::new(steps).with_workers(2).discarding_outputs();
                p.fail_alone();
                p
            }
        };
        let (msgs, trackers) = tracked(2, 256);
        let stats = run(&p, msgs).await.unwrap();
        let want: Vec<String> = (0..2)
            .flat_map(|b| (0..256).map(move |i| format!("b{b}-{i}+")))
            .filter(|l| !refused.contains(&l.as_str()))
            .collect();
        assert_eq!(send.sink.lines(), want, "alone first: {alone_first}");
        assert_eq!(stats.messages_out, want.len() as u64);
        for (i, t) in trackers.iter().enumerate() {
            let line = format!("b{}-{}+", i / 256, i % 256);
            if refused.contains(&line.as_str()) {
                assert_eq!(t.status(), AckStatus::Failed, "{line}");
                assert_eq!(
                    t.failure_reason().as_deref(),
                    Some("transform out: too large")
                );
            } else {
                assert_eq!(t.status(), AckStatus::Delivered, "{line}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_transform_is_an_error_not_a_hang() {
    let send = WritesLines::new(Written::default());
    let p = pipeline(vec![Transform::stateless(Shuffle::default())], &send, 2);
    let (mut msgs, trackers) = tracked(4, 200);
    msgs[2][10].set_data(&b"panic"[..]);
    let err = run(&p, msgs).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "a worker stopped: a transform panicked: the data said so"
    );
    assert_eq!(send.sink.lines().len(), 400, "the batches before it");
    // Failed: what came out of its chunk before it, what was still to go in, and every
    // later chunk. (The message the transform held when it panicked went with it.)
    for (i, t) in trackers.iter().enumerate().skip(400) {
        if i != 410 {
            assert_eq!(t.status(), AckStatus::Failed, "message {i}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batchs_ctrl_reaches_the_send_once_its_batchs_lines_are_written() {
    let send = WritesLines::new(Written::default());
    let p = pipeline(vec![Transform::map(Bang)], &send, 2);
    let mut first: Vec<Message> = (0..200).map(|i| Message::new(format!("{i}"))).collect();
    first.insert(100, Message::ctrl());
    let second: Vec<Message> = (0..10).map(|i| Message::new(format!("x{i}"))).collect();
    let stats = run(&p, vec![first, second]).await.unwrap();
    assert_eq!(stats.messages_out, 210);
    // The batch's ctrl once its lines are written (the next batch's may be too: the send
    // holds nothing), then the end's.
    let seen = send.seen.lock().unwrap().clone();
    let at: Vec<usize> = seen
        .iter()
        .map(|s| s.strip_prefix("<ctrl> ").unwrap().parse().unwrap())
        .collect();
    assert!(at.len() == 2 && at[0] >= 200 && at[1] == 210, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_last_stage_that_writes_lines_after_a_lead_is_written_by_the_workers() {
    let data = |n: usize| -> Vec<Vec<Message>> {
        vec![(0..n).map(|i| Message::new(format!("{i}"))).collect()]
    };
    // The send sees every data message itself: (why, pipeline).
    let alone = WritesLines::new(Written::default());
    let before_another = WritesLines::new(Written::default());
    let after = Arc::new(Record::default());
    let not_discarding = WritesLines::new(Written::default());
    let cases: Vec<(&str, Pipeline, &Arc<WritesLines>)> = vec![
        ("no lead", pipeline(vec![], &alone, 2), &alone),
        (
            "a stage after it",
            Pipeline::new(vec![
                (Arc::from("bang"), Transform::map(Bang)),
                (Arc::from("out"), writing(&before_another)),
                (Arc::from("rec"), Transform::Stateful(after.clone(), None)),
            ])
            .with_workers(2)
            .discarding_outputs(),
            &before_another,
        ),
        (
            "outputs kept",
            Pipeline::new(vec![
                (Arc::from("bang"), Transform::map(Bang)),
                (Arc::from("out"), writing(&not_discarding)),
            ])
            .with_workers(2),
            &not_discarding,
        ),
    ];
    for (why, p, send) in cases {
        run(&p, data(300)).await.unwrap();
        assert_eq!(send.seen.lock().unwrap().len(), 301, "{why}");
        assert_eq!(send.sink.lines().len(), 300, "{why}");
    }
    assert_eq!(after.0.lock().unwrap().len(), 301);
    // Against: written by the workers (or the one), the send sees only the ctrl.
    for workers in [1, 2] {
        let plain = WritesLines::new(Written::default());
        let p = pipeline(vec![Transform::map(Bang)], &plain, workers);
        run(&p, data(300)).await.unwrap();
        assert_eq!(*plain.seen.lock().unwrap(), ["<ctrl> 300"], "{workers}");
    }
}

/// One worker, on one thread (as `sluice run --workers 1` runs): each batch is one chunk,
/// written when its lead is through.
#[tokio::test(flavor = "current_thread")]
async fn one_worker_on_one_thread_writes_each_batch_in_order() {
    let send = WritesLines::new(Written::default());
    let p = shuffled_then_banged(&send, 1);
    let (msgs, trackers) = tracked(6, 500);
    let stats = run(&p, msgs).await.unwrap();
    let want: Vec<String> = (0..6)
        .flat_map(|n| (0..500).map(move |i| format!("b{n}-{i}+!")))
        .collect();
    assert_eq!(send.sink.lines(), want);
    assert_eq!(stats.messages_out, 3000);
    assert_eq!(
        send.sink.writes.load(Ordering::SeqCst),
        6,
        "a write per batch"
    );
    assert!(trackers.iter().all(|t| t.accepted()));
}

/// Records what it sees, ctrl as `<ctrl>`.
#[derive(Default)]
struct Record(Mutex<Vec<String>>);
#[async_trait]
impl StatefulTransform for Record {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.0
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(m.data()).into_owned());
        out.push(m);
        Ok(())
    }
}
