//! `AWS_DATA_FIREHOSE`: a Firehose data transformation.
//!
//! One response record per input `recordId`: `Ok` with the data of the first message that
//! came out of the pipeline for it (Substation's rule; more outputs are discarded),
//! `Dropped` when none did, `ProcessingFailed` when its processing failed. Each record goes
//! through the pipeline on its own, so an error marks that record only; then one ctrl
//! flushes what the pipeline's sends hold (Substation sends none here, so its batched sends
//! never flush), and a record whose messages that flush could not deliver is
//! `ProcessingFailed` too. Metadata: `approximateArrivalTimestamp` (RFC 3339), `recordId`.
//!
//! A record whose data cannot be decoded (not base64, or not a string) is answered
//! `ProcessingFailed` alone and logged once with its `recordId`; the others are processed.
//! The invocation fails only when the event is not a Firehose event at all.
//!
//! The response must stay under Lambda's 6 MB: records whose data would not fit are
//! answered `ProcessingFailed` (Firehose writes them to its `processing-failed/` prefix)
//! and logged, rather than the whole invocation failing again on every retry.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Delivery, Function, HandlerError, HandlerKind, message, parse_event};

/// A Firehose transformation event, as much of it as the handler reads. Its own type rather
/// than aws_lambda_events': a record whose data is not base64 must fail alone, not make the
/// whole event unreadable.
#[derive(Debug, Deserialize)]
struct FirehoseEvent {
    records: Vec<FirehoseRecord>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FirehoseRecord {
    record_id: Option<String>,
    /// Epoch milliseconds.
    #[serde(default)]
    approximate_arrival_timestamp: Value,
    /// The decoded data, or why it could not be decoded.
    #[serde(deserialize_with = "super::base64_or_reason")]
    data: Result<Vec<u8>, String>,
}

/// Lambda's synchronous response limit.
pub(crate) const RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    handle_with_limit(f, payload, RESPONSE_LIMIT).await
}

pub(crate) async fn handle_with_limit(
    f: &Function,
    payload: Value,
    limit: usize,
) -> Result<Value, HandlerError> {
    let event: FirehoseEvent = parse_event(HandlerKind::DataFirehose, payload)?;
    let mut ids = Vec::with_capacity(event.records.len());
    let mut records = Vec::with_capacity(event.records.len());
    for (i, r) in event.records.into_iter().enumerate() {
        let id = r.record_id.ok_or_else(|| {
            HandlerError::InvalidEvent(format!("the event's record {i} has no recordId"))
        })?;
        match r.data {
            Ok(data) => {
                let arrival = r
                    .approximate_arrival_timestamp
                    .as_i64()
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|t| t.to_rfc3339());
                let meta = json!({
                    "approximateArrivalTimestamp": arrival,
                    "recordId": id,
                });
                records.push(Ok(vec![message(data, &meta)]));
            }
            Err(why) => records.push(Err(format!("record {id}: {why}"))),
        }
        ids.push(id);
    }
    let run = f.run_records(records, true).await;
    let mut first: Vec<Option<bytes::Bytes>> = vec![None; ids.len()];
    for (idx, data) in run.outputs {
        if let Some(i) = idx
            && first[i].is_none()
        {
            first[i] = Some(data);
        }
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    // `{"records":[]}` plus, per record, `{"recordId":"..","result":"..","data":".."},`.
    let mut size = 16usize;
    let mut out = Vec::with_capacity(ids.len());
    let mut too_big = 0usize;
    for (i, id) in ids.iter().enumerate() {
        let (result, data) = match (&run.deliveries[i], &first[i]) {
            (Delivery::Failed(why), _) => {
                tracing::warn!(record_id = %id, error = %why, "record ProcessingFailed");
                ("ProcessingFailed", String::new())
            }
            (Delivery::Delivered, None) => ("Dropped", String::new()),
            (Delivery::Delivered, Some(d)) => ("Ok", b64.encode(d)),
        };
        let entry = 48 + id.len() + data.len();
        let (result, data) = if size + entry > limit && result == "Ok" {
            too_big += 1;
            ("ProcessingFailed", String::new())
        } else {
            (result, data)
        };
        size += 48 + id.len() + data.len();
        out.push(json!({ "recordId": id, "result": result, "data": data }));
    }
    if too_big > 0 {
        tracing::error!(
            records = too_big,
            limit,
            "records did not fit in the Lambda response and are ProcessingFailed; lower the Firehose buffer size"
        );
    }
    Ok(json!({ "records": out }))
}
