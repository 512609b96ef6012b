//! `send_aws_eventbridge`: puts each batch onto an Amazon EventBridge event bus with
//! `PutEvents`.
//!
//! Substation compatibility: the same type name, settings (`aws.arn`, `aws.assume_role_arn`,
//! `description`, `batch`, `auxiliary_transforms`, `object.batch_key`) and default id (the
//! type name), and the same events: `Source` is `substation.<id>` (the transform's id),
//! `DetailType` is `description` (default `Substation Transform`), `Detail` is the item's
//! data. `aws.arn` is optional: the bus's ARN (`arn:aws:events:REGION:ACCOUNT:event-bus/NAME`,
//! sent as `EventBusName`, its region used) or its name; absent, the account's default bus.
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 52):
//!
//! - **Limits** (the API's): at most 10 entries per call, where Substation sends up to a
//!   whole batch (1,000 by the library's default), which the API refuses; and at most
//!   256 KiB (262,144 bytes) per call, counting each entry as AWS does (`Source` +
//!   `DetailType` + `Detail`, in UTF-8 bytes; sluice sets no `Time` or `Resources`). A
//!   batch is split into calls of at most that, in order. An entry over 256 KiB on its own
//!   is an error naming the limit when its message arrives (Substation's constant is
//!   256 MiB), so it never blocks a batch.
//! - **Detail must be a JSON object**, as EventBridge requires: other data is an error when
//!   it arrives, not a failed entry later.
//! - **Partial failures**: the entries a call reports with an `ErrorCode` are put again,
//!   only those, with exponential backoff and full jitter and a bound
//!   (`RetryPolicy::DEFAULT`); throttling and 5xx of the whole call are retried by the SDK
//!   (`sluice_platform::aws`). What still fails is reported to the batcher as exactly those items, so
//!   only their messages' acknowledgements fail, and the error names the bus and the error
//!   codes. A failed call fails the entries it carried and those of the later calls of the
//!   batch. Substation ignores failed entries (they are lost).

use super::aws_destination::{AwsDestination, aws_send, send_calls};
use super::aws_records::{
    self, AttemptWatch, AwsSettings, CallError, PutFailure, Stream, check_role, non_empty,
    put_with_retries, record_result,
};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use bytes::Bytes;
use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Value, async_trait};
use sluice_platform::aws::{Arn, AwsTarget};

/// Most entries in one `PutEvents` call.
pub(crate) const MAX_ENTRIES: usize = 10;
/// Most bytes in one `PutEvents` call, the entries counted by [`entry_size`].
pub(crate) const MAX_CALL_BYTES: usize = 256 * 1024;
/// The `DetailType` when `description` is not set (Substation's).
pub(crate) const DEFAULT_DESCRIPTION: &str = "Substation Transform";
/// Most characters of a `DetailType`.
pub(crate) const MAX_DETAIL_TYPE: usize = 128;
/// Most characters of a `Source`.
pub(crate) const MAX_SOURCE: usize = 256;

/// Settings of `send_aws_eventbridge`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The bus (optional) and the role.
    pub aws: AwsSettings,
    /// The events' `DetailType`.
    pub description: Option<String>,
    /// Batch limits (capped at 10 entries and 256 KiB).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
}

/// The size AWS counts for an entry with these parts and no `Time` or `Resources`: the
/// UTF-8 bytes of `Source`, `DetailType` and `Detail`
/// (<https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html>).
pub(crate) fn entry_size(source: &str, detail_type: &str, detail: &[u8]) -> usize {
    source.len() + detail_type.len() + detail.len()
}

/// The bus named by `aws.arn`: what is sent as `EventBusName` (`None` for the default
/// bus), its name for messages, and its region (from an ARN).
pub(crate) fn parse_bus(
    arn: Option<String>,
) -> Result<(Option<String>, String, Option<String>), String> {
    let Some(arn) = non_empty(arn) else {
        return Ok((None, "default".to_string(), None));
    };
    let valid_name = |n: &str| {
        (1..=256).contains(&n.len())
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
    };
    if arn.starts_with("arn:") {
        let a = Arn::parse(&arn)?;
        let name = a.resource.strip_prefix("event-bus/").unwrap_or("");
        if a.service != "events" || a.region.is_empty() || !valid_name(name) {
            return Err(format!(
                "{arn:?} is not an EventBridge event bus ARN \
                 (expected arn:aws:events:REGION:ACCOUNT:event-bus/NAME)"
            ));
        }
        let name = name.to_string();
        Ok((Some(arn), name, Some(a.region)))
    } else if valid_name(&arn) {
        Ok((Some(arn.clone()), arn, None))
    } else {
        Err(format!(
            "{arn:?} is neither an EventBridge event bus ARN \
             (arn:aws:events:REGION:ACCOUNT:event-bus/NAME) nor an event bus name \
             (1 to 256 letters, digits, '/', '.', '_', '-')"
        ))
    }
}

/// An EventBridge event bus as a destination.
pub(crate) struct EventBridge {
    aws: AwsDestination<Client>,
    bus: Option<String>,
    source: String,
    detail_type: String,
}

impl EventBridge {
    /// The bus `bus` (`None`: the default bus) named `name`, its events from `source` of
    /// type `detail_type`, reached with `target`.
    pub(crate) fn new(
        bus: Option<String>,
        name: String,
        source: String,
        detail_type: String,
        target: AwsTarget,
    ) -> Self {
        EventBridge {
            aws: AwsDestination::new(
                "eventbridge bus",
                name,
                target,
                "give the bus's ARN in aws.arn or set AWS_REGION",
            ),
            bus,
            source,
            detail_type,
        }
    }

    /// The bytes an entry takes besides its `Detail`.
    fn overhead(&self) -> usize {
        entry_size(&self.source, &self.detail_type, b"")
    }

    /// Puts `items` (one call's worth) until each was accepted or the attempts are spent.
    /// On failure: the indexes (into `items`) not accepted, why, and whether they may have been applied.
    async fn put(&self, client: &Client, items: &[Bytes]) -> Result<(), PutFailure> {
        let stream = Stream {
            kind: self.aws.kind(),
            name: self.aws.name(),
            operation: "PutEvents",
            records: "entries",
        };
        put_with_retries(stream, self.aws.retry(), items.len(), |pending| {
            let entries: Vec<PutEventsRequestEntry> = pending
                .iter()
                .map(|&i| {
                    PutEventsRequestEntry::builder()
                        .set_event_bus_name(self.bus.clone())
                        .source(&self.source)
                        .detail_type(&self.detail_type)
                        // Checked to be a JSON object (so UTF-8) before it was batched.
                        .detail(String::from_utf8_lossy(&items[i]))
                        .build()
                })
                .collect();
            let watch = AttemptWatch::default();
            let req = client
                .put_events()
                .set_entries(Some(entries))
                .customize()
                .interceptor(watch.clone())
                .send();
            async move {
                let out = req.await.map_err(|e| CallError::sdk(&e, &watch))?;
                Ok(out
                    .entries()
                    .iter()
                    .map(|r| record_result(r.error_code(), r.error_message()))
                    .collect())
            }
        })
        .await
    }
}

#[async_trait]
impl Destination for EventBridge {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let client = self.aws.client(Client::new).await?;
        let overhead = self.overhead();
        let calls = aws_records::calls(
            &batch.items,
            |i| overhead + i.len(),
            MAX_ENTRIES,
            MAX_CALL_BYTES,
        );
        send_calls(calls, batch.items.len(), |range| {
            self.put(client, &batch.items[range])
        })
        .await
    }

    fn check(&self, item: &[u8]) -> Result<(), String> {
        let size = self.overhead() + item.len();
        if size > MAX_CALL_BYTES {
            return Err(format!(
                "eventbridge bus {}: an entry of {size} bytes (Source {} + DetailType {} + \
                 Detail {}) exceeds EventBridge's limit of {MAX_CALL_BYTES} bytes",
                self.aws.name(),
                self.source.len(),
                self.detail_type.len(),
                item.len()
            ));
        }
        let object = item
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{')
            && serde_json::from_slice::<serde::de::IgnoredAny>(item).is_ok();
        if !object {
            return Err(format!(
                "eventbridge bus {}: an event's Detail must be a JSON object; the data is not one",
                self.aws.name()
            ));
        }
        Ok(())
    }
}

aws_send!(EventBridge, Client);

/// The `send_aws_eventbridge` transform.
pub(crate) type SendAwsEventbridge = Sender<EventBridge>;

impl Sender<EventBridge> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let (bus, name, region) = parse_bus(s.aws.arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let detail_type =
            non_empty(s.description).unwrap_or_else(|| DEFAULT_DESCRIPTION.to_string());
        if detail_type.chars().count() > MAX_DETAIL_TYPE {
            return Err(b.field_error(
                "description",
                format!(
                    "is the events' DetailType, at most {MAX_DETAIL_TYPE} characters; this one has {}",
                    detail_type.chars().count()
                ),
            ));
        }
        let source = format!("substation.{}", b.id());
        if source.chars().count() > MAX_SOURCE {
            return Err(b.error(
                Some("id".to_string()),
                format!(
                    "the events' Source is substation.<id>, at most {MAX_SOURCE} characters; \
                     this id makes it {}",
                    source.chars().count()
                ),
            ));
        }
        let target = AwsTarget {
            region,
            assume_role_arn: role,
            ..Default::default()
        };
        let dest = EventBridge::new(bus, name, source, detail_type, target);
        let item_size = MAX_CALL_BYTES - dest.overhead();
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps {
                count: MAX_ENTRIES,
                size: MAX_CALL_BYTES,
                item_size,
            },
            dest,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use crate::send::aws_destination::{AwsSend, RetryPolicy};
    use crate::send::batcher::Undelivered;
    use aws_sdk_eventbridge::config::retry::RetryConfig;
    use aws_sdk_eventbridge::operation::put_events::{PutEventsInput, PutEventsOutput};
    use aws_sdk_eventbridge::types::PutEventsResultEntry;
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use sluice_engine::StatefulTransform;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::batch::BatchLimits;
    use sluice_engine::{Message, Transform, json, testing};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:events:eu-west-1:123456789012:event-bus/audit";
    const SOURCE: &str = "substation.send_aws_eventbridge";

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 3,
        base: Duration::from_millis(1),
        max: Duration::from_millis(2),
    };

    fn bridge_for(arn: Option<&str>, rules: &[&Rule]) -> EventBridge {
        let client = mock_client!(aws_sdk_eventbridge, RuleMode::MatchAny, rules, |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        let (bus, name, region) = parse_bus(arn.map(String::from)).unwrap();
        EventBridge::new(
            bus,
            name,
            SOURCE.into(),
            DEFAULT_DESCRIPTION.into(),
            AwsTarget {
                region: region.or(Some("eu-west-1".into())),
                ..Default::default()
            },
        )
        .with_client(client)
        .with_retry(FAST)
    }

    fn bridge(rules: &[&Rule]) -> EventBridge {
        bridge_for(Some(ARN), rules)
    }

    fn batch(items: &[&str]) -> Outgoing {
        Outgoing {
            key: String::new(),
            items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
            ..Default::default()
        }
    }

    fn results(codes: &[Option<&str>]) -> PutEventsOutput {
        let failed = codes.iter().filter(|c| c.is_some()).count() as i32;
        let entries = codes
            .iter()
            .enumerate()
            .map(|(i, c)| match c {
                None => PutEventsResultEntry::builder()
                    .event_id(format!("e{i}"))
                    .build(),
                Some(code) => PutEventsResultEntry::builder()
                    .error_code(*code)
                    .error_message("slow down")
                    .build(),
            })
            .collect();
        PutEventsOutput::builder()
            .failed_entry_count(failed)
            .set_entries(Some(entries))
            .build()
    }

    fn ok(n: usize) -> PutEventsOutput {
        results(&vec![None; n])
    }

    /// What each call sent: [(bus, source, detail type, detail)].
    type Call = Vec<(Option<String>, String, String, String)>;
    type Seen = Arc<Mutex<Vec<Call>>>;

    fn recorder() -> (
        Seen,
        impl Fn(&PutEventsInput) -> bool + Send + Sync + 'static,
    ) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        (seen, move |r: &PutEventsInput| {
            let call = r
                .entries()
                .iter()
                .map(|e| {
                    (
                        e.event_bus_name().map(String::from),
                        e.source().unwrap_or("").to_string(),
                        e.detail_type().unwrap_or("").to_string(),
                        e.detail().unwrap_or("").to_string(),
                    )
                })
                .collect();
            s.lock().unwrap().push(call);
            true
        })
    }

    fn details(call: &Call) -> Vec<&str> {
        call.iter().map(|e| e.3.as_str()).collect()
    }

    #[test]
    fn settings_table() {
        let r = registry();
        for s in [
            json!({}),
            json!({"aws": {"arn": ARN}}),
            json!({"aws": {"arn": "audit"}, "description": "x".repeat(128)}),
            json!({"aws": {"arn": "aws.partner/example.com/1/events"}}),
            json!({"batch": {"count": 1000, "size": 100000000}}),
        ] {
            testing::build(&r, json!({"type": "send_aws_eventbridge", "settings": s}))
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "send_aws_eventbridge",
            &[
                (
                    json!({"aws": {"arn": "arn:aws:sns:us-east-1:1:topic"}}),
                    "is not an EventBridge event bus ARN",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:events::1:event-bus/b"}}),
                    "is not an EventBridge event bus ARN",
                ),
                (json!({"aws": {"arn": "my bus"}}), "nor an event bus name"),
                (
                    json!({"description": "x".repeat(129)}),
                    "description: is the events' DetailType, at most 128 characters; this one has 129",
                ),
                (
                    json!({"id": "i".repeat(250)}),
                    "the events' Source is substation.<id>, at most 256 characters",
                ),
                (
                    json!({"aws": {"assume_role_arn": "arn:aws:iam::1:user/u"}}),
                    "aws.assume_role_arn",
                ),
            ],
        );
        assert_eq!(
            parse_bus(None).unwrap(),
            (None, "default".to_string(), None)
        );
        assert_eq!(
            parse_bus(Some(ARN.into())).unwrap(),
            (
                Some(ARN.to_string()),
                "audit".to_string(),
                Some("eu-west-1".to_string())
            )
        );
    }

    #[test]
    fn entry_sizes_follow_aws() {
        // The example of the formula: every part in UTF-8 bytes.
        assert_eq!(entry_size("src", "ünï", br#"{"a":1}"#), 3 + 5 + 7);
        let b = bridge(&[]);
        assert_eq!(b.overhead(), SOURCE.len() + DEFAULT_DESCRIPTION.len());
    }

    /// (data, the error's distinctive part or "" for accepted)
    #[test]
    fn what_eventbridge_cannot_take_is_an_error_when_it_arrives() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "send_aws_eventbridge", "settings": {"aws": {"arn": ARN}, "id": "eb"}}),
        )
        .unwrap();
        // Source "substation.eb" (13) + DetailType "Substation Transform" (20).
        let room = MAX_CALL_BYTES - 13 - 20;
        let fits = format!(r#"{{"a":"{}"}}"#, "x".repeat(room - 8));
        let over = format!(r#"{{"a":"{}"}}"#, "x".repeat(room - 7));
        let table: Vec<(&str, String)> = vec![
            ("", r#"{"a":1}"#.into()),
            ("", " \n{\"nested\":{\"b\":[1,2]}}".into()),
            ("", fits),
            (
                "eventbridge bus audit: an entry of 262145 bytes (Source 13 + DetailType 20 + Detail 262112) exceeds EventBridge's limit of 262144 bytes",
                over,
            ),
            ("Detail must be a JSON object", "[1,2]".into()),
            ("Detail must be a JSON object", "\"text\"".into()),
            ("Detail must be a JSON object", "plain text".into()),
            ("Detail must be a JSON object", r#"{"a":"#.into()),
            ("Detail must be a JSON object", r#"{"a":1} trailing"#.into()),
            ("Detail must be a JSON object", String::new()),
        ];
        for (want, data) in table {
            let got = testing::block_on(t.transform(Message::new(data.clone()), &mut Vec::new()));
            if want.is_empty() {
                got.unwrap_or_else(|e| panic!("{}: {e}", &data[..data.len().min(40)]));
            } else {
                let e = got.unwrap_err().to_string();
                assert!(e.contains(want), "{e}");
                assert!(e.contains("data could not be sent"), "{e}");
            }
        }
        let e = testing::block_on(t.transform(Message::new(&b"\xff"[..]), &mut Vec::new()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Detail must be a JSON object"), "{e}");
    }

    #[tokio::test]
    async fn entries_carry_source_detail_type_and_bus() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_events)
            .match_requests(m)
            .then_compute_output(|r| ok(r.entries().len()));
        bridge(&[&rule])
            .send(&batch(&[r#"{"a":1}"#]))
            .await
            .unwrap();
        bridge_for(None, &[&rule])
            .send(&batch(&[r#"{"b":2}"#]))
            .await
            .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen[0],
            vec![(
                Some(ARN.to_string()),
                SOURCE.to_string(),
                DEFAULT_DESCRIPTION.to_string(),
                r#"{"a":1}"#.to_string()
            )]
        );
        assert_eq!(seen[1][0].0, None, "the default bus: no EventBusName");
    }

    #[tokio::test]
    async fn calls_hold_at_most_10_entries_and_256_kib_by_entry_size() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_events)
            .match_requests(m)
            .then_compute_output(|r| ok(r.entries().len()));
        let b = bridge(&[&rule]);
        let items: Vec<String> = (0..21).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        b.send(&batch(&refs)).await.unwrap();
        // Two details that fit 256 KiB by their data alone but not with their Source and
        // DetailType: two calls.
        let half = (MAX_CALL_BYTES - 2 * b.overhead()) / 2 + 1;
        let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(half - 8));
        assert!(2 * big.len() <= MAX_CALL_BYTES);
        b.send(&batch(&[big.as_str(), big.as_str()])).await.unwrap();
        let seen = seen.lock().unwrap();
        let sizes: Vec<usize> = seen.iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![10, 10, 1, 1, 1]);
        assert_eq!(details(&seen[2]), vec![r#"{"n":20}"#]);
    }

    #[tokio::test]
    async fn partial_failures_resend_only_the_failed_entries() {
        let (seen, m) = recorder();
        let rule = mock!(Client::put_events)
            .match_requests(m)
            .sequence()
            .output(|| {
                results(&[
                    None,
                    Some("ThrottlingException"),
                    None,
                    Some("InternalFailure"),
                ])
            })
            .output(|| ok(2))
            .build();
        bridge(&[&rule])
            .send(&batch(&[
                r#"{"i":0}"#,
                r#"{"i":1}"#,
                r#"{"i":2}"#,
                r#"{"i":3}"#,
            ]))
            .await
            .unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(details(&seen[1]), vec![r#"{"i":1}"#, r#"{"i":3}"#]);
    }

    #[tokio::test]
    async fn persistent_failures_are_exactly_the_undelivered_items() {
        let rule = mock!(Client::put_events).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .entries()
                .iter()
                .map(|e| (e.detail() == Some(r#"{"i":2}"#)).then_some("ThrottlingException"))
                .collect();
            results(&codes)
        });
        let e = bridge(&[&rule])
            .send(&batch(&[r#"{"i":0}"#, r#"{"i":1}"#, r#"{"i":2}"#]))
            .await
            .unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items(vec![2]));
        let text = e.error.to_string();
        assert!(
            text.contains("eventbridge bus audit: 1 of 3 entries not accepted after 3 PutEvents attempts: 1 × ThrottlingException (slow down)"),
            "{text}"
        );
        assert_eq!(rule.num_calls(), 3);
    }

    #[tokio::test]
    async fn a_failed_call_fails_it_and_the_calls_after_it() {
        let rule_ok = mock!(Client::put_events)
            .sequence()
            .output(|| ok(10))
            .build();
        let rule_err = mock!(Client::put_events)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"ResourceNotFoundException","message":"Event bus audit does not exist."}"#.into()),
            )
            .build();
        let items: Vec<String> = (0..12).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let e = bridge(&[&rule_ok, &rule_err])
            .send(&batch(&refs))
            .await
            .unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items(vec![10, 11]));
        let text = e.error.to_string();
        assert!(
            text.contains("eventbridge bus audit: PutEvents failed"),
            "{text}"
        );
        assert!(text.contains("ResourceNotFoundException"), "{text}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn acks_fail_for_exactly_the_undelivered_messages() {
        let rule = mock!(Client::put_events).then_compute_output(|r| {
            let codes: Vec<Option<&str>> = r
                .entries()
                .iter()
                .map(|e| (e.detail() == Some(r#"{"a":1}"#)).then_some("InternalFailure"))
                .collect();
            results(&codes)
        });
        let s = Sender::from_parts(
            bridge(&[&rule]),
            BatchLimits::from(BatchSettings::default()).capped(MAX_ENTRIES, MAX_CALL_BYTES),
            MAX_CALL_BYTES,
            None,
            None,
        );
        let mut trackers = Vec::new();
        let mut out = Vec::new();
        for d in [r#"{"a":1}"#, r#"{"b":2}"#] {
            let (t, tok) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(tok);
            s.transform(m, &mut out).await.unwrap();
            trackers.push(t);
        }
        drop(out);
        assert!(s.transform(Message::ctrl(), &mut Vec::new()).await.is_err());
        assert_eq!(trackers[0].status(), AckStatus::Pending);
        assert_eq!(trackers[1].status(), AckStatus::Delivered);
        s.abort("gave up").await;
        assert_eq!(trackers[0].status(), AckStatus::Failed);
    }

    #[test]
    fn compliance() {
        let rule = mock!(Client::put_events).then_compute_output(|r| ok(r.entries().len()));
        let t = Transform::stateful(Sender::from_parts(
            bridge(&[&rule]),
            BatchLimits::from(BatchSettings::default()).capped(MAX_ENTRIES, MAX_CALL_BYTES),
            MAX_CALL_BYTES,
            None,
            None,
        ));
        testing::check_compliance(t);
    }

    #[tokio::test]
    async fn failures_say_whether_they_may_have_been_applied() {
        for (answers, want) in sluice_platform::aws::outcome::ANSWERS_TABLE {
            let (last, first) = answers.split_last().unwrap();
            let mut seq = mock!(Client::put_events).sequence();
            for status in first {
                seq = seq.http_status(*status, None);
            }
            let rule = seq.http_status(*last, None).repeatedly().build();
            let d = bridge(&[&rule]);
            let e = d.send(&batch(&[r#"{"a":1}"#])).await.unwrap_err();
            assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
        }
    }
}
