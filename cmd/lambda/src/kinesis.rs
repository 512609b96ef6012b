//! `AWS_KINESIS_DATA_STREAM`: a Kinesis event source mapping.
//!
//! Each Kinesis record becomes its messages: the user records of a KPL aggregated record
//! (see [`super::kpl`]), or the record's data. Metadata, per record (Substation takes the
//! stream ARN from the last record): `approximateArrivalTimestamp` (RFC 3339),
//! `stream` (the event source ARN), `partitionKey` (the user record's), `sequenceNumber`
//! (and `subSequenceNumber` for a user record of an aggregated one).
//!
//! A record is delivered when all its user records are; the response's
//! `batchItemFailures` lists the others, lowest sequence number first (Lambda checkpoints
//! at the lowest one and retries from there: every record after it comes again, the
//! delivered ones included, which a lock skips when the send is inside it or duplicates are
//! dropped).
//!
//! Order: the pipeline keeps the records' order, and each send delivers its batches in
//! order and makes no later call after one failed. What is not kept is the order of a
//! partition key across a partial failure of one call: a `PutRecords` (or any batch call)
//! that accepts a later record of a key and refuses an earlier one (throttled) leaves the
//! later one at the sink first, and the earlier one follows when it is sent again, by the
//! send's retries or the source's. A send with `batch: { count: 1 }` (one call per record;
//! a failure ends the invocation's work, the rest failed unsent) keeps it. docs/lambda.md,
//! "Order per partition key"; `tests/lambda_once.rs` checks both. A record that cannot be decoded (data that is
//! not base64, or not a string; a corrupt KPL aggregate) fails alone: it is logged once
//! with its sequence number and listed in `batchItemFailures`, and the other records are
//! processed. The invocation fails only when the event is not a Kinesis event at all.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Function, HandlerError, HandlerKind, kpl, message, parse_event};

/// A Kinesis event, as much of it as the handler reads. Its own type rather than
/// aws_lambda_events': each record's data is decoded from base64 as it is parsed (the
/// event's text is never held twice), and `approximateArrivalTimestamp` keeps its
/// milliseconds (aws_lambda_events 1.2 reads `1700000000.5` as .005 s).
#[derive(Debug, Deserialize)]
pub struct KinesisEvent {
    #[serde(rename = "Records")]
    records: Vec<KinesisEventRecord>,
}

#[derive(Debug, Deserialize)]
struct KinesisEventRecord {
    kinesis: KinesisRecord,
    #[serde(rename = "eventSourceARN", default)]
    event_source_arn: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KinesisRecord {
    /// The decoded data, or why it could not be decoded (that record alone fails).
    #[serde(deserialize_with = "super::base64_or_reason")]
    data: Result<Vec<u8>, String>,
    #[serde(default)]
    partition_key: String,
    sequence_number: String,
    #[serde(default)]
    approximate_arrival_timestamp: Value,
}

/// Handles an event given as JSON (in-process callers and tests).
pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    handle_event(f, parse_event(HandlerKind::KinesisDataStream, payload)?).await
}

/// Handles a parsed event (the bootstrap parses it straight from the runtime API's body).
pub(crate) async fn handle_event(f: &Function, event: KinesisEvent) -> Result<Value, HandlerError> {
    let mut records = Vec::with_capacity(event.records.len());
    let mut ids = Vec::with_capacity(event.records.len());
    for r in event.records {
        let k = r.kinesis;
        let arrival = epoch_seconds_rfc3339(&k.approximate_arrival_timestamp);
        let stream = r.event_source_arn.unwrap_or_default();
        let data = match k.data {
            Ok(d) => bytes::Bytes::from(d),
            Err(why) => {
                tracing::error!(sequence_number = %k.sequence_number, error = %why, "record not processed");
                records.push(Err(format!("record {}: {why}", k.sequence_number)));
                ids.push(k.sequence_number);
                continue;
            }
        };
        let msgs = record_messages(
            data,
            arrival.as_deref(),
            &stream,
            &k.partition_key,
            &k.sequence_number,
        )
        .inspect_err(|e| {
            tracing::error!(sequence_number = %k.sequence_number, error = %e, "record not processed");
        })
        .map_err(|e| format!("record {}: {e}", k.sequence_number));
        ids.push(k.sequence_number);
        records.push(msgs);
    }
    let run = f.run_records(records, false).await;
    // Lowest sequence number first: sequence numbers are decimal strings of up to 128 bits.
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| (ids[a].len(), &ids[a]).cmp(&(ids[b].len(), &ids[b])));
    let run = super::Run {
        deliveries: order.iter().map(|&i| run.deliveries[i].clone()).collect(),
        outputs: Vec::new(),
        error: run.error,
    };
    let ids: Vec<String> = order.iter().map(|&i| ids[i].clone()).collect();
    f.batch_response(&run, &ids)
}

/// The messages of one Kinesis record, with the metadata Substation's handler gives them:
/// the user records of a KPL aggregate (with `subSequenceNumber`), or the record's data.
/// `arrival` is its approximate arrival time in RFC 3339. Shared by the Lambda handler and
/// `sluice tap`, so that a config sees the same messages from either. Fails when the data is
/// a corrupt KPL aggregate.
pub fn record_messages(
    data: bytes::Bytes,
    arrival: Option<&str>,
    stream: &str,
    partition_key: &str,
    sequence_number: &str,
) -> Result<Vec<sluice_engine::Message>, kpl::KplError> {
    Ok(match kpl::deaggregate(&data)? {
        None => vec![message(
            data,
            &json!({
                "approximateArrivalTimestamp": arrival,
                "stream": stream,
                "partitionKey": partition_key,
                "sequenceNumber": sequence_number,
            }),
        )],
        Some(users) => users
            .into_iter()
            .enumerate()
            .map(|(n, u)| {
                message(
                    u.data,
                    &json!({
                        "approximateArrivalTimestamp": arrival,
                        "stream": stream,
                        "partitionKey": u.partition_key,
                        "sequenceNumber": sequence_number,
                        "subSequenceNumber": n,
                    }),
                )
            })
            .collect(),
    })
}

/// An arrival time in milliseconds since the epoch in RFC 3339, as the handler writes it.
pub fn rfc3339_millis(millis: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(millis).map(|t| t.to_rfc3339())
}

/// An epoch-seconds time as Kinesis events carry it (a number with millisecond precision,
/// e.g. `1700000000.5`, or the same as a string) in RFC 3339; `None` when it is neither.
fn epoch_seconds_rfc3339(v: &Value) -> Option<String> {
    let secs = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.parse::<f64>().ok()?,
        _ => return None,
    };
    let millis = (secs * 1000.0).round();
    if !millis.is_finite() {
        return None;
    }
    rfc3339_millis(millis as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_with_their_data_decoded_or_fail_naming_the_field() {
        let ok: KinesisEvent = serde_json::from_value(json!({"Records": [{
            "kinesis": {"data": "aGk=", "partitionKey": "p", "sequenceNumber": "1",
                        "approximateArrivalTimestamp": 1700000000.25},
            "eventSourceARN": "arn:s"}]}))
        .unwrap();
        assert_eq!(ok.records[0].kinesis.data.as_deref(), Ok(&b"hi"[..]));
        assert_eq!(ok.records[0].event_source_arn.as_deref(), Some("arn:s"));
        // A record whose data cannot be decoded parses, with the reason; the event is read.
        let bad: KinesisEvent = serde_json::from_value(json!({"Records": [
            {"kinesis": {"data": "!!", "sequenceNumber": "1"}},
            {"kinesis": {"data": 5, "sequenceNumber": "2"}},
            {"kinesis": {"data": {"x": [1]}, "sequenceNumber": "3"}},
            {"kinesis": {"data": "aGk=", "sequenceNumber": "4"}}]}))
        .unwrap();
        let why: Vec<String> = bad
            .records
            .iter()
            .map(|r| r.kinesis.data.clone().err().unwrap_or_default())
            .collect();
        assert!(why[0].contains("not base64"), "{why:?}");
        assert_eq!(why[1], "data is a number, not a base64 string");
        assert_eq!(why[2], "data is an object, not a base64 string");
        assert_eq!(why[3], "");
        let missing =
            serde_json::from_value::<KinesisEvent>(json!({"Records": [{"kinesis": {"data": ""}}]}))
                .unwrap_err();
        assert!(missing.to_string().contains("sequenceNumber"), "{missing}");
    }

    #[test]
    fn arrival_times_keep_their_milliseconds() {
        let cases = [
            (json!(1700000000.5), Some("2023-11-14T22:13:20.500+00:00")),
            (json!(1700000000.98), Some("2023-11-14T22:13:20.980+00:00")),
            (json!(1700000000.987), Some("2023-11-14T22:13:20.987+00:00")),
            (json!(1700000000), Some("2023-11-14T22:13:20+00:00")),
            (
                json!("1700000000.05"),
                Some("2023-11-14T22:13:20.050+00:00"),
            ),
            (json!(null), None),
            (json!("soon"), None),
        ];
        for (v, want) in cases {
            assert_eq!(epoch_seconds_rfc3339(&v).as_deref(), want, "{v}");
        }
    }
}
