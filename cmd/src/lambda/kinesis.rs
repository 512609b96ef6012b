//! `AWS_KINESIS_DATA_STREAM`: a Kinesis event source mapping.
//!
//! Each Kinesis record becomes its messages: the user records of a KPL aggregated record
//! (see [`super::kpl`]), or the record's data. Metadata, per record (Substation takes the
//! stream ARN from the last record): `approximateArrivalTimestamp` (RFC 3339),
//! `stream` (the event source ARN), `partitionKey` (the user record's), `sequenceNumber`
//! (and `subSequenceNumber` for a user record of an aggregated one). Order is kept.
//!
//! A record is delivered when all its user records are; the response's
//! `batchItemFailures` lists the others, lowest sequence number first (Lambda checkpoints
//! at the lowest one and retries from there).

use aws_lambda_events::event::kinesis::KinesisEvent;
use serde_json::{Value, json};

use super::{Delivery, Error, Feed, Function, HandlerKind, kpl, message, parse_event};

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, Error> {
    // aws_lambda_events reads the digits after the point as milliseconds (1700000000.5 as
    // .005, 1700000000.98 as .098), so the arrival times are read from the event here.
    let arrivals: Vec<Option<String>> = match payload.get("Records") {
        Some(Value::Array(rs)) => rs
            .iter()
            .map(|r| epoch_seconds_rfc3339(&r["kinesis"]["approximateArrivalTimestamp"]))
            .collect(),
        _ => Vec::new(),
    };
    let event: KinesisEvent = parse_event(HandlerKind::KinesisDataStream, payload)?;
    let mut records = Vec::with_capacity(event.records.len());
    let mut ids = Vec::with_capacity(event.records.len());
    let mut corrupt: Vec<(usize, String)> = Vec::new();
    for (i, r) in event.records.into_iter().enumerate() {
        let k = r.kinesis;
        let arrival = arrivals
            .get(i)
            .cloned()
            .flatten()
            .unwrap_or_else(|| k.approximate_arrival_timestamp.0.to_rfc3339());
        let stream = r.event_source_arn.unwrap_or_default();
        let data = bytes::Bytes::from(k.data.0);
        let msgs = match kpl::deaggregate(&data) {
            Ok(None) => vec![message(
                data,
                &json!({
                    "approximateArrivalTimestamp": arrival,
                    "stream": stream,
                    "partitionKey": k.partition_key,
                    "sequenceNumber": k.sequence_number,
                }),
            )],
            Ok(Some(users)) => users
                .into_iter()
                .enumerate()
                .map(|(n, u)| {
                    message(
                        u.data,
                        &json!({
                            "approximateArrivalTimestamp": arrival,
                            "stream": stream,
                            "partitionKey": u.partition_key,
                            "sequenceNumber": k.sequence_number,
                            "subSequenceNumber": n,
                        }),
                    )
                })
                .collect(),
            Err(e) => {
                corrupt.push((i, format!("record {}: {e}", k.sequence_number)));
                Vec::new()
            }
        };
        ids.push(k.sequence_number);
        records.push(msgs);
    }
    let mut run = f.run(records, Feed::Whole, false).await;
    for (i, why) in corrupt {
        tracing::error!(sequence_number = %ids[i], error = %why, "record not processed");
        run.deliveries[i] = Delivery::Failed(why);
    }
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
    chrono::DateTime::from_timestamp_millis(millis as i64).map(|t| t.to_rfc3339())
}

#[cfg(test)]
mod tests {
    use super::*;

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
