//! What the sends to AWS batch APIs with per-record results share.
//!
//! Such an API accepts a call of records and answers one result per record, some of which
//! may carry an error code while the call as a whole succeeded: Kinesis `PutRecords`,
//! Firehose `PutRecordBatch`, SQS `SendMessageBatch`, SNS `PublishBatch` and EventBridge
//! `PutEvents`. Their sends differ in how a request is built, how results are matched to
//! records (by position, or by entry id for SQS and SNS: `super::aws_messages`) and in
//! their limits; what they share lives here: the `aws` settings and their checks, splitting
//! a batch into calls, and [`put_with_retries`], which sends a call again with only its
//! failed records (exponential backoff with full jitter, a bounded number of attempts),
//! counts the error codes ([`Failures`]) and, on final failure, answers the records not
//! accepted and an error naming the stream (queue, topic, bus), the operation and the
//! codes ([`PutFailure`]). A call that failed as a whole says whether it may have been
//! applied ([`CallError`], classified by `sluice_platform::aws::outcome`); records an answer reports
//! with an error code were certainly not.

use std::future::Future;
use std::ops::Range;
use std::time::Duration;

use sluice_engine::TransformError;

// The `aws` settings and the lazily made client are every AWS transform's (`sluice_platform::aws`);
// re-exported for the sends that import them from here.
pub(crate) use sluice_platform::aws::AwsSettings;
pub(super) use sluice_platform::aws::outcome::{AttemptWatch, CallError};
pub(crate) use sluice_platform::aws::{check_role, lazy_client, non_empty};

/// A call the SDK would not make (its builder refused a request, such as one with a
/// required field unset): it failed for certain, since nothing was sent.
pub(super) fn cannot_make(e: &impl std::fmt::Display) -> CallError {
    CallError::certain(format!("cannot make the request: {e}"))
}

/// How often a call's failed records are sent again, and how long to wait in between
/// (exponential backoff with full jitter). Shared by the AWS batch sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Calls in all (the first and the retries of its failed records).
    pub attempts: u32,
    /// The first wait's ceiling; it doubles per retry.
    pub base: Duration,
    /// The largest wait.
    pub max: Duration,
}

impl RetryPolicy {
    /// 6 calls, waits up to 100 ms, 200 ms, ... 1.6 s (about 3 s at most in all).
    pub(crate) const DEFAULT: RetryPolicy = RetryPolicy {
        attempts: 6,
        base: Duration::from_millis(100),
        max: Duration::from_secs(5),
    };

    /// The wait before retry number `retry` (1 for the first retry): a random duration up to
    /// `min(max, base * 2^(retry-1))`.
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max);
        ceiling.mul_f64(fastrand::f64())
    }

    /// Waits before retry number `retry`; `false` (at once) when that wait would take an
    /// invocation's work past the time it keeps for its answer
    /// (`sluice_engine::invocation::WORK_MARGIN`): the caller gives up and reports what
    /// is left, so the function answers before its deadline.
    pub(crate) async fn wait(&self, retry: u32) -> bool {
        let pause = self.delay(retry);
        if sluice_engine::invocation::would_overrun(pause) {
            return false;
        }
        tokio::time::sleep(pause).await;
        true
    }
}

/// Error codes of the failed records of a call, counted, with the first message of each
/// (for error texts).
#[derive(Debug, Default)]
pub(crate) struct Failures(Vec<(String, usize, String)>);

impl Failures {
    pub(crate) fn add(&mut self, code: &str, message: &str) {
        match self.0.iter_mut().find(|(c, _, _)| c == code) {
            Some((_, n, _)) => *n += 1,
            None => self.0.push((code.to_string(), 1, message.to_string())),
        }
    }
}

impl std::fmt::Display for Failures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (code, n, msg)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{n} × {code}")?;
            if !msg.is_empty() {
                write!(f, " ({msg})")?;
            }
        }
        Ok(())
    }
}

/// Kinesis and Firehose stream names: 1 to `max` of `[a-zA-Z0-9_.-]`.
pub(crate) fn valid_stream_name(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Splits `items` into calls of at most `max_records` records and `max_bytes` (by `size`).
pub(crate) fn calls<T>(
    items: &[T],
    size: impl Fn(&T) -> usize,
    max_records: usize,
    max_bytes: usize,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, r) in items.iter().enumerate() {
        let n = size(r);
        if i > start && (i - start == max_records || bytes + n > max_bytes) {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += n;
    }
    if start < items.len() {
        out.push(start..items.len());
    }
    out
}

/// One record's result in an answer: `Some((error code, error message))` if it failed.
pub(crate) type RecordResult = Option<(String, String)>;

/// The result of a record from the SDK's `error_code` and `error_message`: failed when the
/// code is set and not empty.
pub(crate) fn record_result(code: Option<&str>, message: Option<&str>) -> RecordResult {
    code.filter(|c| !c.is_empty())
        .map(|c| (c.to_string(), message.unwrap_or("").to_string()))
}

/// The stream a send puts records into, for error texts and logs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stream<'a> {
    /// What it is, e.g. `kinesis stream`.
    pub kind: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The API call, e.g. `PutRecords`.
    pub operation: &'a str,
    /// What its records are called, plural, e.g. `records` or `messages`.
    pub records: &'a str,
}

/// The records of a call that were not accepted, why, and whether they may have been
/// applied all the same (the call failed as a whole in a way that leaves it open).
#[derive(Debug)]
pub(crate) struct PutFailure {
    /// The indexes (into the call's records) not accepted.
    pub pending: Vec<usize>,
    /// Why.
    pub error: TransformError,
    /// Whether they may have been applied.
    pub uncertain: bool,
}

impl PutFailure {
    /// `pending` failed for `error`, certainly.
    pub(crate) fn certain(pending: Vec<usize>, error: TransformError) -> Self {
        PutFailure {
            pending,
            error,
            uncertain: false,
        }
    }
}

/// Puts `count` records (one call's worth) until each was accepted or `retry`'s attempts
/// are spent. `call` sends the records with the given indexes (into the `count` records),
/// in that order, and answers one [`RecordResult`] per record, or why the call failed.
/// On failure: the indexes not accepted, why, and whether they may have been applied.
///
/// `call` builds its request from the indexes before it returns its future, so that the
/// future borrows nothing of them (no higher-ranked lifetimes in the send's future).
pub(crate) async fn put_with_retries<F, Fut>(
    stream: Stream<'_>,
    retry: &RetryPolicy,
    count: usize,
    mut call: F,
) -> Result<(), PutFailure>
where
    F: FnMut(&[usize]) -> Fut,
    Fut: Future<Output = Result<Vec<RecordResult>, CallError>>,
{
    let Stream {
        kind,
        name,
        operation,
        records,
    } = stream;
    let mut pending: Vec<usize> = (0..count).collect();
    let mut failures = Failures::default();
    let mut made = 0;
    for attempt in 1..=retry.attempts {
        if attempt > 1 && !retry.wait(attempt - 1).await {
            break;
        }
        made = attempt;
        let results = match call(&pending).await {
            Ok(results) => results,
            Err(e) => {
                return Err(PutFailure {
                    pending,
                    error: TransformError::failed(format!(
                        "{kind} {name}: {operation} failed: {}",
                        e.text
                    )),
                    uncertain: e.uncertain,
                });
            }
        };
        if results.len() != pending.len() {
            // An answer that cannot be matched to the records: which were applied is open.
            return Err(PutFailure {
                error: TransformError::failed(format!(
                    "{kind} {name}: {operation} answered {} results for {} {records}",
                    results.len(),
                    pending.len()
                )),
                pending,
                uncertain: true,
            });
        }
        failures = Failures::default();
        let mut still = Vec::new();
        for (&i, r) in pending.iter().zip(results) {
            if let Some((code, message)) = r {
                failures.add(&code, &message);
                still.push(i);
            }
        }
        if still.is_empty() {
            return Ok(());
        }
        tracing::debug!(stream = %name, failed = still.len(), attempt, "{operation}: records failed");
        pending = still;
    }
    Err(PutFailure::certain(
        pending.clone(),
        TransformError::failed(format!(
            "{kind} {name}: {} of {count} {records} not accepted after {made} {operation} attempts{}: {failures}",
            pending.len(),
            if made < retry.attempts {
                " (no time left before the invocation's deadline for more)"
            } else {
                ""
            }
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(1),
        max: Duration::from_millis(2),
    };

    const STREAM: Stream<'static> = Stream {
        kind: "kinesis stream",
        name: "events",
        operation: "PutRecords",
        records: "records",
    };

    fn fail(code: &str) -> RecordResult {
        Some((code.to_string(), String::new()))
    }

    #[test]
    fn delays_stay_under_their_ceiling() {
        let p = RetryPolicy::DEFAULT;
        for (retry, ceiling) in [(1, 100), (2, 200), (5, 1600), (7, 5000), (40, 5000)] {
            for _ in 0..20 {
                assert!(p.delay(retry) <= Duration::from_millis(ceiling), "{retry}");
            }
        }
    }

    #[test]
    fn failures_count_codes_with_their_first_message() {
        let mut f = Failures::default();
        f.add("A", "first");
        f.add("B", "");
        f.add("A", "second");
        assert_eq!(f.to_string(), "2 × A (first); 1 × B");
        assert_eq!(Failures::default().to_string(), "");
    }

    /// Sizes, max records, max bytes, the calls.
    type CallsCase = (&'static [usize], usize, usize, &'static [Range<usize>]);

    #[test]
    fn calls_table() {
        let table: &[CallsCase] = &[
            (&[], 2, 10, &[]),
            (&[1, 1, 1], 2, 10, &[0..2, 2..3]),
            (&[6, 6, 6], 5, 10, &[0..1, 1..2, 2..3]),
            (&[20, 1], 5, 10, &[0..1, 1..2]),
            (&[5, 5, 1], 5, 10, &[0..2, 2..3]),
        ];
        for (sizes, records, bytes, want) in table {
            assert_eq!(calls(sizes, |s| *s, *records, *bytes), *want, "{sizes:?}");
        }
    }

    #[test]
    fn record_results() {
        assert_eq!(record_result(None, Some("m")), None);
        assert_eq!(record_result(Some(""), None), None);
        assert_eq!(
            record_result(Some("C"), None),
            Some(("C".into(), String::new()))
        );
    }

    type Answer = Result<Vec<RecordResult>, CallError>;
    type Outcome = Result<(), (Vec<usize>, String, bool)>;

    /// Runs [`put_with_retries`] over 4 records against `answers` (one per call, the last
    /// repeated); answers the indexes each call sent, and the outcome.
    fn run(answers: &[Answer]) -> (Vec<Vec<usize>>, Outcome) {
        let seen = Mutex::new(Vec::new());
        let out = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(put_with_retries(STREAM, &FAST, 4, |pending| {
                let mut seen = seen.lock().unwrap();
                seen.push(pending.to_vec());
                let answer = answers[(seen.len() - 1).min(answers.len() - 1)].clone();
                async move { answer }
            }));
        (
            seen.into_inner().unwrap(),
            out.map_err(|f| (f.pending, f.error.to_string(), f.uncertain)),
        )
    }

    #[test]
    fn retries_table() {
        let all_ok = Ok(vec![None; 4]);
        // All accepted at once.
        let (seen, out) = run(&[all_ok]);
        assert_eq!(seen, vec![vec![0, 1, 2, 3]]);
        assert!(out.is_ok());
        // Only the failed ones are sent again.
        let (seen, out) = run(&[
            Ok(vec![None, fail("T"), None, fail("I")]),
            Ok(vec![None, None]),
        ]);
        assert_eq!(seen, vec![vec![0, 1, 2, 3], vec![1, 3]]);
        assert!(out.is_ok());
        // Failing for good: the failed indexes, the codes of the last attempt.
        let (seen, out) = run(&[
            Ok(vec![fail("X"), fail("T"), None, None]),
            Ok(vec![None, fail("T")]),
            Ok(vec![fail("T")]),
        ]);
        assert_eq!(seen, vec![vec![0, 1, 2, 3], vec![0, 1], vec![1]]);
        let (failed, text, uncertain) = out.unwrap_err();
        assert_eq!(failed, vec![1]);
        assert!(!uncertain, "a record's error code is a certain no");
        assert!(
            text.contains(
                "kinesis stream events: 1 of 4 records not accepted after 3 PutRecords attempts: 1 × T"
            ),
            "{text}"
        );
        // A failed call: what was pending.
        let (seen, out) = run(&[
            Ok(vec![None, fail("T"), None, None]),
            Err(CallError::certain("boom")),
        ]);
        assert_eq!(seen.len(), 2);
        let (failed, text, uncertain) = out.unwrap_err();
        assert_eq!(failed, vec![1]);
        assert!(!uncertain);
        assert!(
            text.contains("kinesis stream events: PutRecords failed: boom"),
            "{text}"
        );
        // A failed call that may have been applied says so.
        let maybe = CallError {
            text: "timed out".into(),
            uncertain: true,
        };
        let (_, out) = run(&[Err(maybe)]);
        let (failed, _, uncertain) = out.unwrap_err();
        assert_eq!(failed, vec![0, 1, 2, 3]);
        assert!(uncertain);
        // A wrong number of results.
        let (_, out) = run(&[Ok(vec![None])]);
        let (failed, text, uncertain) = out.unwrap_err();
        assert_eq!(failed, vec![0, 1, 2, 3]);
        assert!(uncertain, "an answer that cannot be matched leaves it open");
        assert!(
            text.contains("kinesis stream events: PutRecords answered 1 results for 4 records"),
            "{text}"
        );
    }
}
