//! `AWS_SNS`: an SNS subscription.
//!
//! One message per SNS record (its `Message`), with `timestamp`, `eventSubscriptionArn`,
//! `messageId` and `subject` from that record (Substation applies the first record's to
//! every one). SNS retries an asynchronous invoke as a whole, so any undelivered record
//! fails the invocation.

use aws_lambda_events::event::sns::SnsEvent;
use serde_json::{Value, json};

use super::{Delivery, Function, HandlerError, HandlerKind, message, parse_event};

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    let event: SnsEvent = parse_event(HandlerKind::Sns, payload)?;
    let records = event
        .records
        .into_iter()
        .map(|r| {
            let meta = json!({
                "timestamp": r.sns.timestamp.to_rfc3339(),
                "eventSubscriptionArn": r.event_subscription_arn,
                "messageId": r.sns.message_id,
                "subject": r.sns.subject,
            });
            vec![message(r.sns.message, &meta)]
        })
        .collect();
    let run = f.run(records, false).await;
    all_delivered(&run)
}

/// `null` when every record was delivered, else a function error naming the first failure.
pub(crate) fn all_delivered(run: &super::Run) -> Result<Value, HandlerError> {
    let failed: Vec<&str> = run
        .deliveries
        .iter()
        .filter_map(|d| match d {
            Delivery::Failed(w) => Some(w.as_str()),
            Delivery::Delivered => None,
        })
        .collect();
    match failed.first() {
        None => Ok(Value::Null),
        Some(first) => Err(HandlerError::DeliveryFailed(format!(
            "{} of {} records were not delivered (first: {first})",
            failed.len(),
            run.deliveries.len()
        ))),
    }
}
