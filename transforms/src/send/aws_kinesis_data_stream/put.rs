//! One `PutRecords` call's worth of records, put until each was accepted or the attempts
//! are spent, without ever sending blindly again what may already be in the stream.
//!
//! The SDK does not retry `PutRecords` here (its retries would send a call again after a
//! 5xx or a timeout, which is where duplicates come from); this loop does, within the
//! send's `RetryPolicy`:
//!
//! - records the answer reports with an error code were certainly not put: only they are
//!   sent again;
//! - a call refused as a whole for certain (throttled, or a connection that failed before
//!   the request went out: `sluice_platform::aws::outcome::never_sent`) is sent again as it was;
//! - any other certain refusal (a 4xx: validation, access, a missing stream) ends the call;
//! - an answer that leaves the outcome open (a 5xx, a timeout, a connection lost after
//!   sending, an answer that does not match the records) is followed, after
//!   [`ReadBack::settle`](super::readback::ReadBack::settle), by a read-back of the stream
//!   from just before the call's first attempt for the call's pending records (each as it
//!   was sent: same partition key, same bytes); what is found counts as put and only the
//!   rest is sent again. If the read-back fails, the pending records are reported
//!   undelivered and uncertain.
//!
//! The records still pending at the end are uncertain when any attempt at them left its
//! outcome open: a request given up on may still be applied after the read-back, and the
//! lock then leaves their keys for the next attempt to check.

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::retry::RetryConfig;
use aws_sdk_kinesis::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use sluice_engine::TransformError;
use sluice_platform::aws::kinesis_throttled as throttled;

use super::readback::{self, Landing, Sought};
use super::{Kinesis, Record, StreamRef, now_ms};
use crate::send::aws_records::Failures;
use sluice_platform::aws::outcome::{AttemptWatch, never_sent};

/// Why a call's records were not all put, and whether those left may be in the stream.
#[derive(Debug)]
pub(super) struct CallFailure {
    /// Why.
    pub error: TransformError,
    /// Whether the records not put may have been applied all the same.
    pub uncertain: bool,
}

/// What one attempt answered.
enum Answer {
    /// One result per record sent: where it landed, or its error code and message.
    Results(Vec<Result<Landing, (String, String)>>),
    /// The call was refused for certain; `again`: sending it again may succeed.
    Refused { text: String, again: bool },
    /// The outcome is open.
    Open(String),
}

impl Kinesis {
    /// Puts `records` (one call's worth): where each landed (`None`: not put), and why
    /// not all were. After an answer that leaves the outcome open, only the records that
    /// can be told apart from other messages' (`provable`: each carries its message's lock
    /// key) are looked for in the stream; the others are sent again as they are (a
    /// duplicate if the first attempt had landed, never a loss).
    pub(super) async fn put(
        &self,
        client: &Client,
        records: &[Record],
        provable: &(dyn Fn(usize) -> bool + Sync),
    ) -> (Vec<Option<Landing>>, Option<CallFailure>) {
        let retry = self.aws.retry();
        let first_ms = now_ms();
        let count = records.len();
        let mut landed: Vec<Option<Landing>> = vec![None; count];
        let mut pending: Vec<usize> = (0..count).collect();
        let mut open = false;
        let mut why = String::new();
        let fail = |text: &str| {
            TransformError::failed(format!("{} {}: {text}", self.aws.kind(), self.aws.name()))
        };
        for attempt in 1..=retry.attempts {
            if attempt > 1 && !retry.wait(attempt - 1).await {
                break;
            }
            let text = match self.put_once(client, records, &pending).await {
                Answer::Results(results) if results.len() == pending.len() => {
                    let mut failures = Failures::default();
                    let mut still = Vec::new();
                    for (&i, r) in pending.iter().zip(results) {
                        match r {
                            Ok(l) => landed[i] = Some(l),
                            Err((code, message)) => {
                                failures.add(&code, &message);
                                still.push(i);
                            }
                        }
                    }
                    if !still.is_empty() {
                        tracing::debug!(stream = %self.aws.name(), failed = still.len(), attempt, "PutRecords: records failed");
                        why = format!(
                            "{} of {count} records not accepted after {attempt} PutRecords attempts: {failures}",
                            still.len()
                        );
                    }
                    pending = still;
                    None
                }
                Answer::Results(results) => Some(format!(
                    "PutRecords answered {} results for {} records",
                    results.len(),
                    pending.len()
                )),
                Answer::Refused { text, again } => {
                    why = format!("PutRecords failed: {text}");
                    if !again {
                        break;
                    }
                    None
                }
                Answer::Open(text) => Some(format!("PutRecords failed: {text}")),
            };
            if let Some(text) = text {
                // The outcome is open: look for what is pending before sending it again.
                open = true;
                tracing::debug!(stream = %self.aws.name(), records = pending.len(), attempt, error = %text, "PutRecords: outcome unknown, reading the stream back");
                tokio::time::sleep(self.readback.settle).await;
                let (check, blind): (Vec<usize>, Vec<usize>) =
                    pending.iter().partition(|&&i| provable(i));
                if !blind.is_empty() {
                    tracing::debug!(stream = %self.aws.name(), records = blind.len(), "PutRecords: outcome unknown for records that carry no lock key; they are sent again");
                }
                let sought: Vec<Sought> = check
                    .iter()
                    .map(|&i| Sought {
                        key: Some(records[i].key.clone()),
                        data: records[i].data.clone(),
                    })
                    .collect();
                match readback::find(
                    client,
                    &self.stream,
                    first_ms,
                    &sought,
                    &self.readback,
                    retry,
                )
                .await
                {
                    Ok(found) => {
                        let mut still = blind;
                        for (&i, l) in check.iter().zip(found) {
                            match l {
                                Some(l) => landed[i] = Some(l),
                                None => still.push(i),
                            }
                        }
                        still.sort_unstable();
                        pending = still;
                        why = format!("{text} (after {attempt} attempts)");
                    }
                    Err(e) => {
                        let error = fail(&format!("{text}; reading the stream back failed: {e}"));
                        return (
                            landed,
                            Some(CallFailure {
                                error,
                                uncertain: true,
                            }),
                        );
                    }
                }
            }
            if pending.is_empty() {
                return (landed, None);
            }
        }
        let error = fail(&why);
        (
            landed,
            Some(CallFailure {
                error,
                uncertain: open,
            }),
        )
    }

    /// One attempt: sends the records at `pending`, without the SDK's retries.
    async fn put_once(&self, client: &Client, records: &[Record], pending: &[usize]) -> Answer {
        let entries: Result<Vec<PutRecordsRequestEntry>, _> = pending
            .iter()
            .map(|&i| {
                PutRecordsRequestEntry::builder()
                    .partition_key(&records[i].key)
                    .data(Blob::new(records[i].data.to_vec()))
                    .build()
            })
            .collect();
        let entries = match entries {
            Ok(entries) => entries,
            Err(e) => {
                return Answer::Refused {
                    text: format!("cannot make the request: {e}"),
                    again: false,
                };
            }
        };
        let mut req = client.put_records().set_records(Some(entries));
        req = match &self.stream {
            StreamRef::Arn(a) => req.stream_arn(a),
            StreamRef::Name(n) => req.stream_name(n),
        };
        let watch = AttemptWatch::default();
        let sent = req
            .customize()
            .config_override(
                aws_sdk_kinesis::config::Builder::default().retry_config(RetryConfig::disabled()),
            )
            .interceptor(watch.clone())
            .send()
            .await;
        match sent {
            Ok(out) => Answer::Results(
                out.records()
                    .iter()
                    .map(|r| match r.error_code().filter(|c| !c.is_empty()) {
                        Some(code) => Err((
                            code.to_string(),
                            r.error_message().unwrap_or("").to_string(),
                        )),
                        None => Ok(Landing {
                            shard: r.shard_id().unwrap_or("").to_string(),
                            sequence: r.sequence_number().unwrap_or("").to_string(),
                        }),
                    })
                    .collect(),
            ),
            Err(e) => {
                let text = sluice_platform::aws::describe_error(&e);
                if watch.verdict(&e) {
                    Answer::Open(text)
                } else {
                    let again = throttled(e.code())
                        || matches!(&e, SdkError::DispatchFailure(d)
                            if d.as_connector_error().is_some_and(never_sent));
                    Answer::Refused { text, again }
                }
            }
        }
    }
}
