//! Tests of the Lambda function: its deadline, the pieces records are fed in, and its batch
//! loop (`Function::run_records`) over stub pipelines: which records fail alone, which stop
//! the rest, and what comes out by record.

use super::*;
use sluice_engine::{StatefulTransform, Transform, TransformError, async_trait};
use std::sync::{Arc, Mutex};

#[test]
fn a_deadline_is_an_epoch_instant_within_lambdas_fifteen_minutes() {
    let now = 1_800_000_000_000u64;
    let left = |d: u64| {
        deadline_instant_at(d, now).map(|i| i.saturating_duration_since(Instant::now()).as_secs())
    };
    assert_eq!(
        left(now + 3_000),
        Some(2),
        "3 s from now (less the test's time)"
    );
    assert_eq!(left(now + 900_000), Some(899));
    assert_eq!(left(now - 2_000), Some(0), "a little past: now");
    assert_eq!(left(0), None, "none given");
    assert_eq!(
        left(600_000),
        None,
        "cargo-lambda's timeout, not a deadline"
    );
    assert_eq!(left(now + 3_600_000), None, "beyond 15 minutes");
}

#[test]
fn an_event_is_cut_into_pieces_of_at_most_its_bytes_in_order() {
    // (message sizes, bytes) -> piece sizes
    let cases: &[(&[usize], usize, &[usize])] = &[
        (&[400, 400, 400, 400, 400, 400], 1000, &[2, 2, 2]),
        (&[400, 400, 400], 800, &[2, 1]),
        (&[2000, 10, 10, 2000], 1000, &[1, 2, 1]),
        (&[10; 5], 1 << 20, &[5]),
        (&[], 1000, &[]),
    ];
    for &(sizes, bytes, want) in cases {
        let msgs = sizes.iter().enumerate().map(|(i, &n)| {
            let mut d = vec![b'x'; n];
            if let Some(b) = d.first_mut() {
                *b = b'0' + i as u8;
            }
            Message::new(d)
        });
        let got = pieces(msgs, bytes);
        assert_eq!(
            got.iter().map(Vec::len).collect::<Vec<_>>(),
            want,
            "{sizes:?} in {bytes}"
        );
        let order: Vec<u8> = got.iter().flatten().map(|m| m.data()[0]).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    }
}

/// Notes the data messages of each batch it is applied to; fails on data starting
/// with "bad".
#[derive(Default)]
struct Recorder(Mutex<Vec<usize>>);
#[async_trait]
impl StatefulTransform for Recorder {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if m.data().starts_with(b"bad") {
            return Err(TransformError::failed("bad data"));
        }
        out.push(m);
        Ok(())
    }

    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let data = msgs.iter().filter(|m| !m.is_ctrl()).count();
        if data > 0 {
            self.0.lock().unwrap().push(data);
        }
        // As the default does: on error the message and the rest are failed.
        let mut rest = msgs.into_iter();
        while let Some(m) = rest.next() {
            let acks = m.acks().clone();
            if let Err(e) = self.transform(m, out).await {
                sluice_engine::ack::fail_all(&acks, &e.to_string());
                for r in rest {
                    r.fail_acks(&e.to_string());
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

fn function(feed_bytes: usize) -> (Function, Arc<Recorder>) {
    let seen = Arc::new(Recorder::default());
    let pipeline = Pipeline::new(vec![(
        Arc::from("recorder"),
        Transform::Stateful(seen.clone(), None),
    )]);
    let mut opts = Options::new(HandlerKind::KinesisDataStream);
    opts.metrics = None;
    opts.feed_bytes = feed_bytes;
    (Function::new(pipeline, opts), seen)
}

fn records(data: &[&str]) -> Vec<Result<Vec<Message>, String>> {
    data.iter()
        .map(|d| Ok(vec![Message::new(d.as_bytes().to_vec())]))
        .collect()
}

#[tokio::test]
async fn records_go_through_in_pieces_and_a_failure_fails_its_piece_and_the_rest() {
    let (f, seen) = function(10);
    // Pieces of 10 bytes: [a1234, b1234], [bad34, c1234], [d1234].
    let run = f
        .run_records(
            records(&["a1234", "b1234", "bad34", "c1234", "d1234"]),
            false,
        )
        .await;
    let delivered: Vec<bool> = run
        .deliveries
        .iter()
        .map(|d| *d == Delivery::Delivered)
        .collect();
    assert_eq!(delivered, vec![true, true, false, false, false]);
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![2, 2],
        "nothing after the failure ran"
    );
    assert_eq!(run.error.as_deref(), Some("transform recorder: bad data"));
    for d in &run.deliveries[2..] {
        assert!(
            matches!(d, Delivery::Failed(why) if why.contains("bad data")),
            "{d:?}"
        );
    }
    // The piece after the failure was never run: it fails with the pipeline's error.
    assert_eq!(
        run.deliveries[4],
        Delivery::Failed("transform recorder: bad data".into())
    );
    // Without a failure every record is delivered, whatever the pieces.
    for (bytes, batches) in [(1, vec![1, 1, 1]), (2, vec![2, 1]), (1 << 20, vec![3])] {
        let (f, seen) = function(bytes);
        let run = f.run_records(records(&["a", "b", "c"]), true).await;
        assert!(run.error.is_none());
        assert_eq!(run.deliveries, vec![Delivery::Delivered; 3]);
        assert_eq!(*seen.0.lock().unwrap(), batches, "{bytes} bytes");
        let outs: Vec<(Option<usize>, &[u8])> =
            run.outputs.iter().map(|(i, b)| (*i, &b[..])).collect();
        assert_eq!(
            outs,
            vec![(Some(0), &b"a"[..]), (Some(1), b"b"), (Some(2), b"c")]
        );
    }
}

/// Fails data starting with "bad".
struct RefuseBad;
#[async_trait]
impl sluice_engine::StatelessTransform for RefuseBad {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if m.data().starts_with(b"bad") {
            return Err(TransformError::failed("bad data"));
        }
        out.push(m);
        Ok(())
    }
}

/// Passes data on; fails data "down" with an error that stops the run (as the third
/// failure in a row of a send that gives up does).
struct StopsAtDown;
#[async_trait]
impl StatefulTransform for StopsAtDown {
    async fn transform(&self, m: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if m.data().starts_with(b"down") {
            return Err(TransformError::failed("destination down").stopping("3 in a row"));
        }
        out.push(m);
        Ok(())
    }
}

/// A Firehose run that stops keeps what came out of the records before the stop: they
/// are answered with it, however many records a batch could have held.
#[tokio::test]
async fn a_firehose_run_that_stops_keeps_the_records_before_it() {
    let pipeline = Pipeline::new(vec![("send", Transform::stateful(StopsAtDown))]);
    let mut opts = Options::new(HandlerKind::DataFirehose);
    opts.metrics = None;
    let f = Function::new(pipeline, opts);
    let run = f.run_records(records(&["a", "b", "down", "c"]), true).await;
    let delivered: Vec<bool> = run
        .deliveries
        .iter()
        .map(|d| *d == Delivery::Delivered)
        .collect();
    assert_eq!(delivered, [true, true, false, false]);
    let outs: Vec<Option<usize>> = run.outputs.iter().map(|(i, _)| *i).collect();
    assert_eq!(outs, [Some(0), Some(1)]);
}

/// Where the source resolves each record on its own (Firehose), a record the pipeline
/// fails fails alone and the rest are delivered; where it redelivers in order from the
/// first failure (Kinesis), what follows the failure is not delivered either.
#[tokio::test]
async fn a_failed_record_fails_alone_only_where_the_source_resolves_each_record() {
    let table = [
        (
            HandlerKind::DataFirehose,
            vec![true, true, false, true, true],
        ),
        (
            HandlerKind::KinesisDataStream,
            vec![true, true, false, false, false],
        ),
        (HandlerKind::Sqs, vec![true, true, false, false, false]),
    ];
    for (kind, want) in table {
        let pipeline = Pipeline::new(vec![
            ("refuse", Transform::stateless(RefuseBad)),
            (
                "recorder",
                Transform::Stateful(Arc::new(Recorder::default()), None),
            ),
        ]);
        let mut opts = Options::new(kind);
        opts.metrics = None;
        opts.feed_bytes = 10;
        let f = Function::new(pipeline, opts);
        let run = f
            .run_records(
                records(&["a1234", "b1234", "bad34", "c1234", "d1234"]),
                true,
            )
            .await;
        let delivered: Vec<bool> = run
            .deliveries
            .iter()
            .map(|d| *d == Delivery::Delivered)
            .collect();
        assert_eq!(delivered, want, "{kind:?}");
        assert!(
            matches!(&run.deliveries[2], Delivery::Failed(why) if why == "transform refuse: bad data"),
            "{kind:?}: {:?}",
            run.deliveries[2]
        );
        let outs: Vec<Option<usize>> = run.outputs.iter().map(|(i, _)| *i).collect();
        let want_outs: Vec<Option<usize>> = want
            .iter()
            .enumerate()
            .filter(|(_, d)| **d)
            .map(|(i, _)| Some(i))
            .collect();
        assert_eq!(outs, want_outs, "{kind:?}: what came out, by record");
    }
}
