//! Drives a pipeline over a stream of input batches: the loop every input adapter shares.
//!
//! It applies each batch as it arrives, wakes up when a batch held by a stateful transform
//! reaches its maximum age (even when no input arrives), and sends the one ctrl message at
//! the end of input that makes every stateful transform flush.
//!
//! Read-ahead can be bounded in bytes ([`ReadAhead`]): the reader counts the bytes of what it
//! reads and waits while the bound is reached; the driver gives a batch's bytes back once
//! the pipeline has applied it.
//!
//! Stopping early (a signal) is the adapter's: it tells its reader to stop
//! ([`ReadAhead::stop_reading`] wakes one waiting on the bound), and the driver, which knows
//! no signals, finishes what was read as at the end of input, with the final settle cut
//! short to the adapter's deadline ([`SettleDeadline`]).

mod read_ahead;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::error::TransformError;
use crate::input::InputBatch;
use crate::message::Message;
use crate::pipeline::{LEADS_IN_FLIGHT, Lead, Pipeline};
use crate::transform::SettleReport;

pub use read_ahead::ReadAhead;

/// Counts of one run.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    /// Data messages read.
    pub messages_in: u64,
    /// Data messages that came out of the last transform.
    pub messages_out: u64,
    /// Wall time from the first batch to the end of the final flush.
    pub elapsed: Duration,
    /// Wall time of the final flush: the ctrl messages that end the input.
    pub flush: Duration,
}

/// The longest the driver waits, after the end of input, for transforms to settle what
/// they owe (the lock's commits; it bounds the wait by its lease too).
pub const SETTLE_WAIT: Duration = Duration::from_secs(600);

/// The latest the driver's final settle may run ([`drive_settled_within`]): [`SETTLE_WAIT`]
/// (or the wait it was made [with](SettleDeadline::waiting)) after it starts, or earlier
/// once an adapter brings it forward (a stop's grace period ends then). Read when the
/// settle starts: one already running keeps its own.
#[derive(Debug)]
pub struct SettleDeadline {
    at: Mutex<Option<Instant>>,
    wait: Duration,
}

impl Default for SettleDeadline {
    fn default() -> Self {
        SettleDeadline::waiting(SETTLE_WAIT)
    }
}

impl SettleDeadline {
    /// A settle that waits at most `wait` from its start.
    pub fn waiting(wait: Duration) -> Self {
        SettleDeadline {
            at: Mutex::new(None),
            wait,
        }
    }

    /// Settles by `at` at the latest (an earlier deadline already set stays).
    pub fn bring_forward(&self, at: Instant) {
        let mut d = self.at.lock().unwrap_or_else(|p| p.into_inner());
        *d = Some(d.map_or(at, |d| d.min(at)));
    }

    /// The deadline of a settle starting at `now`.
    pub fn from(&self, now: Instant) -> Instant {
        let wait = now + self.wait;
        match *self.at.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(d) => d.min(wait),
            None => wait,
        }
    }
}

/// Runs `pipeline` over the batches received from `input` until it closes, then sends a
/// ctrl. `on_output` gets what comes out of the last transform (but for the data messages
/// a pipeline [discarding its outputs](Pipeline::discarding_outputs) wrote as lines
/// itself; they are counted in [`RunStats::messages_out`] all the same). When a transform
/// fails, what the pipeline holds is discarded ([`Pipeline::abort`]) and the error is
/// returned.
/// Either way the pipeline settles ([`Pipeline::settle`]) before this returns.
///
/// When the pipeline [runs ahead](Pipeline::runs_ahead), the batches that are already
/// waiting (up to [`LEADS_IN_FLIGHT`]) cross its leading stateless segment on the workers
/// while the rest of the pipeline (a send, on this task) finishes the batches before them,
/// in order.
pub async fn drive<B: Into<InputBatch>>(
    pipeline: &Pipeline,
    input: mpsc::Receiver<B>,
    on_output: impl FnMut(Vec<Message>),
) -> Result<RunStats, TransformError> {
    drive_bounded(pipeline, input, None, on_output).await
}

/// [`drive`] whose input is bounded by `read_ahead`: each batch's bytes are released once
/// the pipeline has applied it, and the bound is closed when this returns (so a reader
/// waiting on it stops, also after an error).
pub async fn drive_bounded<B: Into<InputBatch>>(
    pipeline: &Pipeline,
    input: mpsc::Receiver<B>,
    read_ahead: Option<&ReadAhead>,
    on_output: impl FnMut(Vec<Message>),
) -> Result<RunStats, TransformError> {
    drive_settled(pipeline, input, read_ahead, on_output)
        .await
        .0
}

/// [`drive_bounded`], which also says what the pipeline could not settle at the end
/// ([`Pipeline::settle`]: a lock store that kept failing leaves keys pending), whatever the
/// run's outcome.
pub async fn drive_settled<B: Into<InputBatch>>(
    pipeline: &Pipeline,
    input: mpsc::Receiver<B>,
    read_ahead: Option<&ReadAhead>,
    on_output: impl FnMut(Vec<Message>),
) -> (Result<RunStats, TransformError>, SettleReport) {
    drive_settled_within(
        pipeline,
        input,
        read_ahead,
        &SettleDeadline::default(),
        on_output,
    )
    .await
}

/// [`drive_settled`], whose final settle ends by `settle_by` (which an adapter that is
/// stopping brings forward while this runs).
///
/// Inside a Lambda invocation ([`crate::invocation`]) the settle's calls may go on after the
/// work had to stop, until the answer is due ([`crate::invocation::settling`]); a settle
/// still running then is cut there, and what it still owed stays pending (the report says
/// so).
pub async fn drive_settled_within<B: Into<InputBatch>>(
    pipeline: &Pipeline,
    mut input: mpsc::Receiver<B>,
    read_ahead: Option<&ReadAhead>,
    settle_by: &SettleDeadline,
    on_output: impl FnMut(Vec<Message>),
) -> (Result<RunStats, TransformError>, SettleReport) {
    let mut leads = VecDeque::new();
    pipeline.start_input();
    let r = drive_inner(pipeline, &mut input, read_ahead, &mut leads, on_output).await;
    if let Err(e) = &r {
        let reason = e.to_string();
        pipeline.abort(&reason).await;
        // What was read and never processed was not delivered either: the batches in the
        // lead, and what is still in the channel.
        for Ahead { lead, .. } in leads.drain(..) {
            if let Ok(msgs) = lead.finish().await {
                for m in &msgs {
                    m.fail_acks(&reason);
                }
            }
        }
        input.close();
        while let Ok(batch) = input.try_recv() {
            batch.into().fail(&reason);
        }
    }
    if let Some(ra) = read_ahead {
        ra.close();
    }
    let report = settle(pipeline, settle_by.from(Instant::now())).await;
    (r, report)
}

/// The pipeline's final settle, by `by`; inside an invocation, as its settling, cut when
/// its answer is due.
async fn settle(pipeline: &Pipeline, by: Instant) -> SettleReport {
    let settle = crate::invocation::settling(pipeline.settle(by));
    if crate::invocation::deadline().is_none() {
        return settle.await;
    }
    tokio::time::timeout_at(by.into(), settle)
        .await
        .unwrap_or_else(|_| SettleReport {
            unsettled: vec![
                "settling the locks did not end before the answer was due: what they still owed stays pending until its lease ends (the invocation's deadline when no lease is set)".to_string(),
            ],
        })
}

/// [`drive_settled_within`] over input an adapter holds all at once (a Lambda event, a
/// test's messages, in batches): the same ctrl, abort and settle as a stream.
pub async fn drive_all_within(
    pipeline: &Pipeline,
    batches: Vec<Vec<Message>>,
    settle_by: &SettleDeadline,
    on_output: impl FnMut(Vec<Message>),
) -> (Result<RunStats, TransformError>, SettleReport) {
    let (tx, rx) = mpsc::channel(batches.len().max(1));
    for batch in batches {
        // The channel has room for every batch, and nothing reads it before they are in.
        let _ = tx.try_send(batch);
    }
    drop(tx);
    drive_settled_within(pipeline, rx, None, settle_by, on_output).await
}

/// A batch in the pipeline's lead ([`Pipeline::start_lead`]), with the bytes it holds in
/// the read-ahead bound.
struct Ahead {
    lead: Lead,
    bytes: usize,
}

async fn drive_inner<B: Into<InputBatch>>(
    pipeline: &Pipeline,
    input: &mut mpsc::Receiver<B>,
    read_ahead: Option<&ReadAhead>,
    leads: &mut VecDeque<Ahead>,
    mut on_output: impl FnMut(Vec<Message>),
) -> Result<RunStats, TransformError> {
    let start = Instant::now();
    let mut stats = RunStats::default();
    let runs_ahead = pipeline.runs_ahead();
    let mut open = true;
    loop {
        if let Some(d) = pipeline.deadline() {
            let now = Instant::now();
            if d <= now {
                let out = pipeline.expire(now).await?;
                count_out(&mut stats, &mut on_output, out);
                continue;
            }
        }
        // Take the next batch if there is room for it in the lead; wait for it only when
        // the lead is empty (never while holding batches the rest could finish).
        let batch = if !open || leads.len() >= LEADS_IN_FLIGHT {
            None
        } else if leads.is_empty() {
            let next = match pipeline.deadline() {
                Some(d) => {
                    tokio::select! {
                        b = input.recv() => b,
                        _ = tokio::time::sleep_until(d.into()) => continue,
                    }
                }
                None => input.recv().await,
            };
            open = next.is_some();
            next
        } else {
            match input.try_recv() {
                Ok(b) => Some(b),
                Err(mpsc::error::TryRecvError::Empty) => None,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    open = false;
                    None
                }
            }
        };
        if let Some(batch) = batch {
            let batch: InputBatch = batch.into();
            stats.messages_in += batch.data_messages() as u64;
            let bytes = read_ahead.map_or(0, |_| batch.data_bytes());
            if runs_ahead {
                leads.push_back(Ahead {
                    lead: pipeline.start_lead(batch),
                    bytes,
                });
                continue;
            }
            let applied = pipeline.apply(batch.into_messages()).await;
            release(read_ahead, bytes);
            count_out(&mut stats, &mut on_output, applied?);
            continue;
        }
        // Finish the oldest batch in the lead, or stop once there is none and no more input.
        let Some(Ahead { lead, bytes }) = leads.pop_front() else {
            if open {
                continue;
            }
            break;
        };
        let out = match lead.finish_counting().await {
            Ok((msgs, written)) => {
                stats.messages_out += written;
                pipeline.apply_rest(msgs).await
            }
            Err(e) => Err(e),
        };
        release(read_ahead, bytes);
        count_out(&mut stats, &mut on_output, out?);
    }
    let flush = Instant::now();
    for ctrl in end_of_input(pipeline) {
        let out = pipeline.apply(vec![ctrl]).await?;
        count_out(&mut stats, &mut on_output, out);
    }
    stats.flush = flush.elapsed();
    stats.elapsed = start.elapsed();
    Ok(stats)
}

/// The ctrl messages that end an input: the one ctrl, after a checkpoint when messages
/// wait on another process ([`Pipeline::waits_on_others`]). A lock's message whose key
/// another process holds waits at the end of input until that key settles; what this
/// process delivered after the lock (a send after it, Substation's consumer pattern) is
/// committed only once that send flushes, so two processes over overlapping input would
/// each wait on keys the other commits only after its own wait. The checkpoint flushes
/// every send first (the lock lets such messages wait on past it), so what was delivered
/// is committed before the final wait. Otherwise one ctrl, as Substation sends (a
/// transform that acts on each ctrl, `test_message` or `utility_metric_count`, acts once).
pub fn end_of_input(pipeline: &Pipeline) -> Vec<Message> {
    if pipeline.waits_on_others() {
        vec![Message::checkpoint(), Message::ctrl()]
    } else {
        vec![Message::ctrl()]
    }
}

fn count_out(stats: &mut RunStats, on_output: &mut impl FnMut(Vec<Message>), out: Vec<Message>) {
    stats.messages_out += out.iter().filter(|m| !m.is_ctrl()).count() as u64;
    on_output(out);
}

/// Gives a batch's bytes back to the bound, whatever the outcome: after an error the bound
/// is closed anyway.
fn release(read_ahead: Option<&ReadAhead>, bytes: usize) {
    if let Some(ra) = read_ahead {
        ra.release(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transform::{StatelessTransform, Transform};
    use async_trait::async_trait;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Records the most bytes the bound held while it ran; fails on data "bad".
    struct Watch {
        ra: Arc<ReadAhead>,
        most: Arc<AtomicUsize>,
    }
    #[async_trait]
    impl StatelessTransform for Watch {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            if &m.data()[..] == b"bad" {
                return Err(TransformError::failed("boom"));
            }
            self.most.fetch_max(self.ra.held(), Ordering::AcqRel);
            out.push(m);
            Ok(())
        }
    }

    /// A reader as the CLI's: waits on the bound before each message, counts it, and hands
    /// its batch on before it would wait. Returns how many it sent, or stops when told.
    fn reader(
        ra: Arc<ReadAhead>,
        tx: mpsc::Sender<Vec<Message>>,
        lines: Vec<Vec<u8>>,
        per_batch: usize,
    ) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            let mut sent = 0;
            let mut batch = Vec::new();
            for line in lines {
                if ra.is_full() && !batch.is_empty() {
                    sent += batch.len();
                    if tx.blocking_send(std::mem::take(&mut batch)).is_err() {
                        return sent;
                    }
                }
                if !ra.wait() {
                    return sent;
                }
                ra.add(line.len());
                batch.push(Message::new(line));
                if batch.len() == per_batch {
                    sent += batch.len();
                    if tx.blocking_send(std::mem::take(&mut batch)).is_err() {
                        return sent;
                    }
                }
            }
            sent += batch.len();
            let _ = tx.blocking_send(batch);
            sent
        })
    }

    fn pipeline(ra: &Arc<ReadAhead>, most: &Arc<AtomicUsize>) -> Pipeline {
        Pipeline::new(vec![(
            Arc::from("watch"),
            Transform::stateless(Watch {
                ra: ra.clone(),
                most: most.clone(),
            }),
        )])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_ahead_stays_within_its_bytes_and_everything_is_applied() {
        // (limit, batch size in messages): the bound holds whether batches close before
        // it is reached or would outgrow it.
        for (limit, per_batch) in [(1000, 2), (1000, 64), (250, 1), (1, 3)] {
            let ra = Arc::new(ReadAhead::new(limit));
            let most = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = mpsc::channel(64);
            let lines: Vec<Vec<u8>> = (0..300).map(|i| vec![b'a' + (i % 26) as u8; 100]).collect();
            let reading = reader(ra.clone(), tx, lines, per_batch);
            let p = pipeline(&ra, &most);
            let stats = tokio::time::timeout(
                Duration::from_secs(20),
                drive_bounded(&p, rx, Some(&ra), |_| {}),
            )
            .await
            .expect("no deadlock")
            .unwrap();
            assert_eq!(reading.join().unwrap(), 300);
            assert_eq!(stats.messages_in, 300);
            assert_eq!(stats.messages_out, 300);
            // The limit, plus the one message read when it was not yet reached.
            let most = most.load(Ordering::Acquire);
            assert!(
                most <= limit.max(1) - 1 + 100 && most > 0,
                "limit {limit}, {per_batch} per batch: {most} bytes held"
            );
            assert_eq!(ra.held(), 0, "everything released");
            assert!(!ra.wait(), "closed once the driver returned");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_waiting_on_the_bound_is_stopped_when_the_pipeline_fails() {
        let ra = Arc::new(ReadAhead::new(150));
        let most = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel(64);
        let mut lines: Vec<Vec<u8>> = vec![b"bad".to_vec()];
        lines.extend((0..1000).map(|_| vec![b'x'; 100]));
        let reading = reader(ra.clone(), tx, lines, 1);
        let p = pipeline(&ra, &most);
        let err = tokio::time::timeout(
            Duration::from_secs(20),
            drive_bounded(&p, rx, Some(&ra), |_| {}),
        )
        .await
        .expect("no deadlock")
        .unwrap_err();
        assert_eq!(err.to_string(), "transform watch: boom");
        // The reader stops (instead of waiting forever for bytes nobody releases).
        let sent = tokio::task::spawn_blocking(move || reading.join().unwrap())
            .await
            .unwrap();
        assert!(sent < 1001, "{sent}");
    }

    /// Tags data with "+" and, on data starting "b1-", says that batch 1's lead has run;
    /// fails on "lead-bad".
    struct Lead(tokio::sync::watch::Sender<bool>);
    #[async_trait]
    impl StatelessTransform for Lead {
        async fn transform(
            &self,
            mut m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            let data = String::from_utf8_lossy(m.data()).into_owned();
            if data == "lead-bad" {
                return Err(TransformError::failed("lead boom"));
            }
            if data.starts_with("b1-") {
                self.0.send_replace(true);
            }
            m.set_data(format!("{data}+").into_bytes());
            out.push(m);
            Ok(())
        }
    }

    /// Records data in order. With `wait`, the first message of batch 0 waits (up to 10 s)
    /// for batch 1's lead to have run, and records whether it did: it can only if the lead
    /// of one batch overlaps the rest of the one before. Fails on "rest-bad+".
    struct Rest {
        seen: std::sync::Mutex<Vec<String>>,
        wait: Option<tokio::sync::watch::Receiver<bool>>,
        overlapped: AtomicBool,
    }
    #[async_trait]
    impl crate::transform::StatefulTransform for Rest {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            if m.is_ctrl() {
                out.push(m);
                return Ok(());
            }
            let data = String::from_utf8_lossy(m.data()).into_owned();
            if data == "rest-bad+" {
                return Err(TransformError::failed("rest boom"));
            }
            if let Some(rx) = &self.wait
                && data == "b0-0+"
            {
                let mut rx = rx.clone();
                let ran = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|v| *v))
                    .await
                    .is_ok_and(|r| r.is_ok());
                self.overlapped.store(ran, Ordering::Release);
            }
            self.seen.lock().unwrap().push(data);
            out.push(m);
            Ok(())
        }
    }

    fn lead_and_rest(wait: bool, workers: usize) -> (Pipeline, Arc<Rest>) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let rest = Arc::new(Rest {
            seen: Default::default(),
            wait: wait.then_some(rx),
            overlapped: AtomicBool::new(false),
        });
        let p = Pipeline::new(vec![
            (Arc::from("lead"), Transform::stateless(Lead(tx))),
            (Arc::from("rest"), Transform::Stateful(rest.clone(), None)),
        ])
        .with_workers(workers);
        (p, rest)
    }

    /// A channel already holding these batches (so each is waiting when the one before is
    /// done with the lead), closed.
    async fn queued(batches: Vec<Vec<Message>>) -> mpsc::Receiver<Vec<Message>> {
        let (tx, rx) = mpsc::channel(batches.len().max(1));
        for b in batches {
            tx.send(b).await.unwrap();
        }
        rx
    }

    fn batch(n: usize, len: usize) -> Vec<Message> {
        (0..len)
            .map(|i| Message::new(format!("b{n}-{i}").into_bytes()))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lead_of_the_next_batch_overlaps_the_rest_and_order_is_kept() {
        for (workers, len) in [(2, 3), (2, 300)] {
            let (p, rest) = lead_and_rest(true, workers);
            assert!(p.runs_ahead());
            let rx = queued((0..5).map(|n| batch(n, len)).collect()).await;
            let mut out = Vec::new();
            let stats = tokio::time::timeout(
                Duration::from_secs(20),
                drive(&p, rx, |o| {
                    out.extend(o.into_iter().filter(|m| !m.is_ctrl()))
                }),
            )
            .await
            .expect("no deadlock")
            .unwrap();
            assert!(rest.overlapped.load(Ordering::Acquire), "{len} per batch");
            let want: Vec<String> = (0..5)
                .flat_map(|n| (0..len).map(move |i| format!("b{n}-{i}+")))
                .collect();
            assert_eq!(*rest.seen.lock().unwrap(), want);
            let got: Vec<String> = out
                .iter()
                .map(|m| String::from_utf8_lossy(m.data()).into_owned())
                .collect();
            assert_eq!(got, want);
            assert_eq!(stats.messages_in, 5 * len as u64);
            assert_eq!(stats.messages_out, 5 * len as u64);
        }
        // One worker: no overlap (the wait times out), the same output.
        let (p, rest) = lead_and_rest(false, 1);
        assert!(!p.runs_ahead());
        let rx = queued((0..3).map(|n| batch(n, 4)).collect()).await;
        let stats = drive(&p, rx, |_| {}).await.unwrap();
        assert_eq!(stats.messages_out, 12);
        assert_eq!(rest.seen.lock().unwrap().len(), 12);
    }

    fn tracked(data: &str) -> (Message, Arc<crate::ack::AckTracker>) {
        let (t, tok) = crate::ack::AckTracker::new();
        let mut m = Message::new(data.as_bytes().to_vec());
        m.add_ack(tok);
        (m, t)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failure_in_the_rest_fails_the_batch_that_ran_ahead_too() {
        use crate::ack::AckStatus;
        let (p, _) = lead_and_rest(false, 2);
        let (bad, t_bad) = tracked("rest-bad");
        let (ahead, t_ahead) = tracked("b1-0");
        let (never, t_never) = tracked("b2-0");
        let rx = queued(vec![vec![bad], vec![ahead], vec![never]]).await;
        let err = drive(&p, rx, |_| {}).await.unwrap_err();
        assert_eq!(err.to_string(), "transform rest: rest boom");
        for (name, t) in [("bad", t_bad), ("ahead", t_ahead), ("never", t_never)] {
            assert_eq!(t.status(), AckStatus::Failed, "{name}");
        }
    }

    use crate::ack::FailuresSeen;

    /// Batch `n` of `len` lines `b{n}-{i}` in one read buffer, numbered from `first`.
    fn lines(n: usize, len: usize, first: u64, watch: &Arc<FailuresSeen>) -> InputBatch {
        let mut text = Vec::new();
        let mut b = crate::input::BufferedLines::new(first, watch.clone());
        for i in 0..len {
            let start = text.len();
            text.extend_from_slice(format!("b{n}-{i}").as_bytes());
            b.push(start..text.len());
            text.push(b'\n');
        }
        b.seal(bytes::Bytes::from(text));
        b.into()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_in_their_read_buffers_come_out_as_messages_do() {
        for (workers, len) in [(2, 3), (2, 300), (1, 300)] {
            let (p, rest) = lead_and_rest(false, workers);
            let watch = Arc::new(FailuresSeen::default());
            let (tx, rx) = mpsc::channel(8);
            for n in 0..5 {
                tx.send(lines(n, len, 1 + (n * len) as u64, &watch))
                    .await
                    .unwrap();
            }
            drop(tx);
            let mut out = Vec::new();
            let stats = drive(&p, rx, |o| {
                out.extend(o.into_iter().filter(|m| !m.is_ctrl()))
            })
            .await
            .unwrap();
            let want: Vec<String> = (0..5)
                .flat_map(|n| (0..len).map(move |i| format!("b{n}-{i}+")))
                .collect();
            let got: Vec<String> = out
                .iter()
                .map(|m| String::from_utf8_lossy(m.data()).into_owned())
                .collect();
            assert_eq!(got, want, "{workers} workers, {len} per batch");
            assert_eq!(*rest.seen.lock().unwrap(), want);
            assert_eq!(stats.messages_in, 5 * len as u64);
            // Each message carries its line's token: failed, it names its line.
            out[len + 1].fail_acks("refused");
            assert_eq!(
                *watch.0.lock().unwrap(),
                [(len as u64 + 2, "refused".into())]
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_not_applied_when_the_pipeline_fails_are_failed_with_their_numbers() {
        let ra = Arc::new(ReadAhead::new(usize::MAX));
        let most = Arc::new(AtomicUsize::new(0));
        let p = pipeline(&ra, &most);
        let watch = Arc::new(FailuresSeen::default());
        let (tx, rx) = mpsc::channel(8);
        let mut bad = crate::input::BufferedLines::new(1, watch.clone());
        bad.push(0..2);
        bad.push(3..6);
        bad.seal(bytes::Bytes::from_static(b"ok\nbad\n"));
        tx.send(InputBatch::from(bad)).await.unwrap();
        tx.send(lines(1, 4, 3, &watch)).await.unwrap();
        drop(tx);
        let err = drive_bounded(&p, rx, Some(&ra), |_| {}).await.unwrap_err();
        assert_eq!(err.to_string(), "transform watch: boom");
        let mut told = watch.0.lock().unwrap().clone();
        told.sort();
        // The failing batch's lines, and every line of the batch still waiting.
        let want: Vec<(u64, String)> = (1..=6)
            .map(|line| (line, "transform watch: boom".to_string()))
            .collect();
        assert_eq!(told, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failure_in_a_lead_lets_the_batch_before_it_finish_first() {
        use crate::ack::AckStatus;
        let (p, rest) = lead_and_rest(false, 2);
        let (first, t_first) = tracked("b0-0");
        let (bad, t_bad) = tracked("lead-bad");
        let (never, t_never) = tracked("b2-0");
        let rx = queued(vec![vec![first], vec![bad], vec![never]]).await;
        let mut out = Vec::new();
        let err = drive(&p, rx, |o| out.extend(o)).await.unwrap_err();
        assert_eq!(err.to_string(), "transform lead: lead boom");
        // As without the overlap: batch 0 went through the whole pipeline.
        assert_eq!(*rest.seen.lock().unwrap(), vec!["b0-0+".to_string()]);
        assert_eq!(out.len(), 1);
        drop(out);
        assert_eq!(t_first.status(), AckStatus::Delivered);
        assert_eq!(t_bad.status(), AckStatus::Failed);
        assert_eq!(t_never.status(), AckStatus::Failed);
    }

    /// Says it could not settle, and when it was told to be done by.
    #[derive(Default)]
    struct Owes(std::sync::Mutex<Vec<Instant>>);
    #[async_trait]
    impl crate::transform::StatefulTransform for Owes {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            out.push(m);
            Ok(())
        }

        async fn settle(&self, until: Instant) -> SettleReport {
            self.0.lock().unwrap().push(until);
            SettleReport {
                unsettled: vec!["3 keys left pending".into()],
            }
        }
    }

    #[tokio::test]
    async fn the_final_settle_ends_by_a_deadline_brought_forward_and_says_what_is_left() {
        let owes = Arc::new(Owes::default());
        let p = Pipeline::new(vec![(
            Arc::from("owes"),
            Transform::Stateful(owes.clone(), None),
        )]);
        let start = Instant::now();
        let (r, report) = drive_settled(&p, queued(vec![batch(0, 2)]).await, None, |_| {}).await;
        assert_eq!(r.unwrap().messages_out, 2);
        assert_eq!(report.unsettled, ["3 keys left pending"]);
        assert!(
            owes.0.lock().unwrap()[0] >= start + SETTLE_WAIT,
            "the default wait"
        );

        let by = SettleDeadline::default();
        let soon = Instant::now() + Duration::from_millis(300);
        by.bring_forward(soon + Duration::from_secs(1));
        by.bring_forward(soon);
        by.bring_forward(soon + Duration::from_secs(2));
        let rx = queued(vec![batch(0, 2)]).await;
        let (r, report) = drive_settled_within(&p, rx, None, &by, |_| {}).await;
        assert!(r.is_ok());
        assert!(!report.is_settled());
        assert_eq!(owes.0.lock().unwrap()[1], soon, "the earliest deadline");
    }
}
