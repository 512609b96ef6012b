//! `AWS_DYNAMODB_STREAM`: a DynamoDB stream event source mapping.
//!
//! One message per change record, a Debezium-style envelope as Substation makes it:
//! `{"source":{"ts_ms","table","connector":"dynamodb"},"ts_ms","op":"c|u|d","before",
//! "after"}` with the images as plain JSON (a missing image is `null`). Metadata:
//! `approximateCreationDateTime` (RFC 3339), `eventSourceArn`, `sequenceNumber`,
//! `sizeBytes`, `streamViewType`. `KEYS_ONLY` records carry no image and are skipped, as in
//! Substation. Unlike Substation, the table name comes from each record's ARN, not the
//! first one's. Undelivered records are answered in `batchItemFailures` by sequence number.
//! A record that cannot be read (an attribute value of an unknown type, an unknown
//! `eventName`, an image that is not convertible to JSON) fails alone, logged once with its
//! sequence number; the invocation fails only when the event is not a DynamoDB stream event.

use aws_lambda_events::event::dynamodb::{EventRecord, StreamViewType};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_engine::Message;

use super::{Function, HandlerError, HandlerKind, message, parse_event};

/// The event with each record left as JSON: a record is read on its own, so one that is
/// malformed (an attribute value of an unknown type, an unknown `eventName`) fails alone.
#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "Records")]
    records: Vec<Value>,
}

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    let event: Event = parse_event(HandlerKind::DynamodbStream, payload)?;
    let mut ids = Vec::with_capacity(event.records.len());
    let mut records = Vec::with_capacity(event.records.len());
    let now = super::now_ms();
    for (i, raw) in event.records.into_iter().enumerate() {
        // Without its sequence number a record cannot be reported: the event is not a
        // DynamoDB stream event.
        let seq = raw
            .pointer("/dynamodb/SequenceNumber")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                HandlerError::InvalidEvent(format!("the event's record {i} has no SequenceNumber"))
            })?
            .to_string();
        let record = record_messages(raw, &seq, now);
        if let Err(why) = &record {
            tracing::error!(sequence_number = %seq, error = %why, "record not processed");
        }
        records.push(record);
        ids.push(seq);
    }
    let run = f.run_records(records, false).await;
    f.batch_response(&run, &ids)
}

/// The message of one change record (none for `KEYS_ONLY`), or why it cannot be made.
fn record_messages(raw: Value, seq: &str, now: i64) -> Result<Vec<Message>, String> {
    let r: EventRecord = serde_json::from_value(raw)
        .map_err(|e| format!("record {seq}: not a DynamoDB stream record: {e}"))?;
    let c = r.change;
    let view = c.stream_view_type.unwrap_or_default();
    if view == StreamViewType::KeysOnly {
        return Ok(Vec::new());
    }
    let op = match r.event_name.as_str() {
        "INSERT" => "c",
        "MODIFY" => "u",
        "REMOVE" => "d",
        other => return Err(format!("record {seq}: unknown eventName {other:?}")),
    };
    let arn = r.event_source_arn.clone().unwrap_or_default();
    let table = table_of(&arn);
    let image = |item: serde_dynamo::Item| -> Result<Value, String> {
        if item.is_empty() {
            return Ok(Value::Null);
        }
        serde_dynamo::from_item(item)
            .map_err(|e| format!("record {seq}: an image is not convertible to JSON: {e}"))
    };
    let created = c.approximate_creation_date_time;
    let envelope = json!({
        "source": {
            "ts_ms": created.timestamp_millis(),
            "table": table,
            "connector": "dynamodb",
        },
        "ts_ms": now,
        "op": op,
        "before": image(c.old_image)?,
        "after": image(c.new_image)?,
    });
    let meta = json!({
        "approximateCreationDateTime": created.to_rfc3339(),
        "eventSourceArn": arn,
        "sequenceNumber": seq,
        "sizeBytes": c.size_bytes,
        "streamViewType": view.to_string(),
    });
    Ok(vec![message(envelope.to_string(), &meta)])
}

/// The table of a stream ARN: `arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL`.
fn table_of(arn: &str) -> &str {
    arn.split_once(":table/")
        .map(|(_, rest)| rest.split('/').next().unwrap_or(rest))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_names_table() {
        for (arn, want) in [
            (
                "arn:aws:dynamodb:us-east-1:123:table/orders/stream/2024-01-01T00:00:00.000",
                "orders",
            ),
            ("arn:aws:dynamodb:us-east-1:123:table/t", "t"),
            ("", ""),
        ] {
            assert_eq!(super::table_of(arn), want, "{arn}");
        }
    }
}
