//! `AWS_DYNAMODB_STREAM`: a DynamoDB stream event source mapping.
//!
//! One message per change record, a Debezium-style envelope as Substation makes it:
//! `{"source":{"ts_ms","table","connector":"dynamodb"},"ts_ms","op":"c|u|d","before",
//! "after"}` with the images as plain JSON (a missing image is `null`). Metadata:
//! `approximateCreationDateTime` (RFC 3339), `eventSourceArn`, `sequenceNumber`,
//! `sizeBytes`, `streamViewType`. `KEYS_ONLY` records carry no image and are skipped, as in
//! Substation. Unlike Substation, the table name comes from each record's ARN, not the
//! first one's. Undelivered records are answered in `batchItemFailures` by sequence number.

use aws_lambda_events::event::dynamodb::{Event, StreamViewType};
use serde_json::{Value, json};

use super::{Error, Feed, Function, HandlerKind, message, parse_event};

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, Error> {
    let event: Event = parse_event(HandlerKind::DynamodbStream, payload)?;
    let mut ids = Vec::with_capacity(event.records.len());
    let mut records = Vec::with_capacity(event.records.len());
    let now = super::now_ms();
    for (i, r) in event.records.into_iter().enumerate() {
        let c = r.change;
        let seq = c
            .sequence_number
            .clone()
            .ok_or_else(|| format!("the event's record {i} has no SequenceNumber"))?;
        ids.push(seq.clone());
        let view = c.stream_view_type.unwrap_or_default();
        if view == StreamViewType::KeysOnly {
            records.push(Vec::new());
            continue;
        }
        let op = match r.event_name.as_str() {
            "INSERT" => "c",
            "MODIFY" => "u",
            "REMOVE" => "d",
            other => return Err(format!("record {seq}: unknown eventName {other:?}").into()),
        };
        let arn = r.event_source_arn.clone().unwrap_or_default();
        let table = table_of(&arn);
        let image = |item: serde_dynamo::Item| -> Result<Value, Error> {
            if item.is_empty() {
                return Ok(Value::Null);
            }
            serde_dynamo::from_item(item).map_err(|e| {
                format!("record {seq}: an image is not convertible to JSON: {e}").into()
            })
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
        records.push(vec![message(envelope.to_string(), &meta)]);
    }
    let run = f.run(records, Feed::Whole, false).await;
    f.batch_response(&run, &ids)
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
