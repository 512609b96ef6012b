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
//! The response must stay under Lambda's 6 MB: records whose data would not fit are
//! answered `ProcessingFailed` (Firehose writes them to its `processing-failed/` prefix)
//! and logged, rather than the whole invocation failing again on every retry.

use aws_lambda_events::event::firehose::KinesisFirehoseEvent;
use base64::Engine;
use serde_json::{Value, json};

use super::{Delivery, Error, Feed, Function, HandlerKind, message, parse_event};

/// Lambda's synchronous response limit.
pub const RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, Error> {
    handle_with_limit(f, payload, RESPONSE_LIMIT).await
}

pub(crate) async fn handle_with_limit(
    f: &Function,
    payload: Value,
    limit: usize,
) -> Result<Value, Error> {
    let event: KinesisFirehoseEvent = parse_event(HandlerKind::DataFirehose, payload)?;
    let mut ids = Vec::with_capacity(event.records.len());
    let mut records = Vec::with_capacity(event.records.len());
    for (i, r) in event.records.into_iter().enumerate() {
        let id = r
            .record_id
            .ok_or_else(|| format!("the event's record {i} has no recordId"))?;
        let meta = json!({
            "approximateArrivalTimestamp": r.approximate_arrival_timestamp.0.to_rfc3339(),
            "recordId": id,
        });
        records.push(vec![message(r.data.0, &meta)]);
        ids.push(id);
    }
    let run = f.run(records, Feed::PerRecord, true).await;
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
