//! `AWS_SQS`: an SQS event source mapping.
//!
//! One message per SQS message (its body), with `eventSourceArn`, `messageId`, `bodyMd5`
//! and `attributes` taken from that message (Substation applies the first message's to
//! every one). Undelivered messages are answered in `batchItemFailures` by `messageId`.

use aws_lambda_events::event::sqs::SqsEvent;
use serde_json::{Value, json};

use super::{Function, HandlerError, HandlerKind, message, parse_event};

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    let event: SqsEvent = parse_event(HandlerKind::Sqs, payload)?;
    let mut ids = Vec::with_capacity(event.records.len());
    let mut records = Vec::with_capacity(event.records.len());
    for (i, m) in event.records.into_iter().enumerate() {
        let id = m.message_id.ok_or_else(|| {
            HandlerError::InvalidEvent(format!("the event's record {i} has no messageId"))
        })?;
        let meta = json!({
            "eventSourceArn": m.event_source_arn,
            "messageId": id,
            "bodyMd5": m.md5_of_body,
            "attributes": m.attributes,
        });
        records.push(vec![message(m.body.unwrap_or_default(), &meta)]);
        ids.push(id);
    }
    let run = f.run(records, false).await;
    f.batch_response(&run, &ids)
}
