//! `send_aws_lambda`: invokes an AWS Lambda function asynchronously (`InvocationType`
//! `Event`) once per item of each batch, the item as the payload.
//!
//! Substation compatibility: the same type name and settings (`aws.arn`,
//! `aws.assume_role_arn`, `batch`, `auxiliary_transforms`, `object.batch_key`) and default
//! id. `aws.arn` is sent as `FunctionName` as configured: a function ARN (whose region is
//! used), or a name or partial ARN (region from `AWS_REGION`); see [`sluice_platform::aws::lambda`].
//!
//! Where sluice differs from Substation (`reference/substation.md` §2.1 row 54):
//!
//! - **Limits**: an item is at most 1 MiB ([`MAX_ASYNC_PAYLOAD`], the `Event` invoke's
//!   payload limit) and must be JSON, as Lambda requires; a message that breaks either is an
//!   error when it arrives, naming the limit or the JSON error, so it never blocks a batch
//!   (items made by auxiliary transforms are checked before their batch is sent). Substation
//!   checks against 256 MiB (its comment says 256 KB) and lets Lambda reject non-JSON.
//! - **Concurrency**: up to `concurrency` invokes in flight (a sluice setting, default
//!   [`DEFAULT_CONCURRENCY`]); Substation invokes one item after the other. Lambda queues
//!   asynchronous events itself, so the order in which the function runs them is not the
//!   order of the input either way.
//! - **Per-item results**: a failed invoke (after the SDK's retries of throttling, 5xx and
//!   network errors, `sluice_platform::aws`) fails only its item: the others are delivered and their
//!   messages' acknowledgements succeed, and the failed ones stay queued for a retry (see
//!   the batcher) with an error naming the function and the error codes. Substation
//!   stops at the first failure and, on retry, invokes every item of the batch again.

use aws_sdk_lambda::Client;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use futures::stream::{self, StreamExt};
use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};

use super::aws_destination::{AwsDestination, aws_send};
use super::aws_records::{AttemptWatch, Failures};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use sluice_platform::aws::lambda::{self, Function, MAX_ASYNC_PAYLOAD};
use sluice_platform::aws::{AwsSettings, AwsTarget, check_role, non_empty};

/// Invokes in flight at once when `concurrency` is not set.
pub(crate) const DEFAULT_CONCURRENCY: usize = 16;

/// Settings of `send_aws_lambda`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The function and the role.
    pub aws: AwsSettings,
    /// Batch limits: when invokes happen (each item is one invoke).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
    /// Invokes in flight at once (at least 1).
    pub concurrency: Option<usize>,
}

/// An item is an `Event` invoke's payload: at most 1 MiB of JSON.
fn check_item(item: &[u8]) -> Result<(), String> {
    lambda::check_payload(item, MAX_ASYNC_PAYLOAD, "asynchronous")
}

/// A Lambda function, invoked asynchronously, as a destination.
pub(crate) struct Lambda {
    aws: AwsDestination<Client>,
    function: Function,
    concurrency: usize,
}

impl Lambda {
    /// The function, reached with `target`, with up to `concurrency` invokes in flight.
    pub(crate) fn new(function: Function, target: AwsTarget, concurrency: usize) -> Self {
        Lambda {
            aws: AwsDestination::new(
                "lambda function",
                function.display.clone(),
                target,
                "give the function's ARN in aws.arn or set AWS_REGION",
            ),
            function,
            concurrency: concurrency.max(1),
        }
    }
}

#[async_trait]
impl Destination for Lambda {
    fn check(&self, item: &[u8]) -> Result<(), String> {
        check_item(item)
    }

    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        // Asynchronous invokes return at once: the client's usual timeouts hold.
        let client = self.aws.client(Client::new).await?;
        // Built before they are streamed, so that the stream's type holds no closure over
        // borrowed items (which async_trait's `Send` future cannot express).
        let invokes: Vec<_> = batch
            .items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let watch = AttemptWatch::default();
                let call = client
                    .invoke()
                    .function_name(&self.function.function_name)
                    .invocation_type(InvocationType::Event)
                    .payload(Blob::new(item.to_vec()))
                    .customize()
                    .interceptor(watch.clone())
                    .send();
                async move {
                    let r = call.await;
                    let uncertain = r.as_ref().err().is_some_and(|e| watch.verdict(e));
                    (i, r, uncertain)
                }
            })
            .collect();
        let mut results: Vec<_> = stream::iter(invokes)
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        results.sort_by_key(|(i, _, _)| *i);
        let mut failed = Vec::new();
        let mut failures = Failures::default();
        let mut uncertain = false;
        for (i, r, maybe) in results {
            if let Err(e) = r {
                let (code, message) = lambda::error_code(&e);
                failures.add(&code, &message);
                failed.push(i);
                uncertain |= maybe;
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        tracing::debug!(function = %self.function.display, failed = failed.len(), "Invoke failed");
        let error = TransformError::failed(format!(
            "lambda function {}: {} of {} asynchronous invokes failed: {failures}",
            self.function.display,
            failed.len(),
            batch.items.len()
        ));
        Err(SendError::items(failed, error).uncertain(uncertain))
    }
}

aws_send!(Lambda, Client);

/// The `send_aws_lambda` transform.
pub(crate) type SendAwsLambda = Sender<Lambda>;

impl Sender<Lambda> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let arn = non_empty(s.aws.arn).ok_or_else(|| {
            b.field_error(
                "aws.arn",
                "missing required option: the function's ARN \
                 (arn:aws:lambda:REGION:ACCOUNT:function:NAME) or its name",
            )
        })?;
        let function = lambda::parse_function(&arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let concurrency = s.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        if concurrency == 0 {
            return Err(b.field_error("concurrency", "must be at least 1"));
        }
        let target = AwsTarget {
            region: function.region.clone(),
            assume_role_arn: role,
            ..Default::default()
        };
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps {
                count: usize::MAX,
                size: usize::MAX,
                item_size: MAX_ASYNC_PAYLOAD,
            },
            Lambda::new(function, target, concurrency),
        )
    }
}

/// The tests mock the Lambda API with the SDK's own test utilities (aws-smithy-mocks): an
/// emulator cannot stand in here, because invoking a function on moto runs it in a Docker
/// container, and this machine (and CI) has no Docker.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use crate::send::aws_destination::AwsSend;
    use crate::send::batcher::Undelivered;
    use aws_sdk_lambda::config::retry::RetryConfig;
    use aws_sdk_lambda::operation::invoke::{InvokeInput, InvokeOutput};
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use bytes::Bytes;
    use sluice_engine::StatefulTransform;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::batch::BatchLimits;
    use sluice_engine::{Message, Transform, json, testing};
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:lambda:eu-west-1:123456789012:function:sink";

    fn lambda_with(rules: &[&Rule], concurrency: usize) -> Lambda {
        let client = mock_client!(aws_sdk_lambda, RuleMode::MatchAny, rules, |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        let function = lambda::parse_function(ARN).unwrap();
        let target = AwsTarget {
            region: function.region.clone(),
            ..Default::default()
        };
        Lambda::new(function, target, concurrency).with_client(client)
    }

    fn accepted() -> InvokeOutput {
        InvokeOutput::builder().status_code(202).build()
    }

    fn batch(items: &[&str]) -> Outgoing {
        Outgoing {
            key: String::new(),
            items: items.iter().map(|i| Bytes::from(i.to_string())).collect(),
            ..Default::default()
        }
    }

    /// Records each invoke's function name, invocation type and payload.
    type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

    fn recorder() -> (Seen, impl Fn(&InvokeInput) -> bool + Send + Sync + 'static) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        (seen, move |r: &InvokeInput| {
            s.lock().unwrap().push((
                r.function_name().unwrap_or("").to_string(),
                r.invocation_type()
                    .map(|t| t.as_str())
                    .unwrap_or("")
                    .to_string(),
                r.payload()
                    .map(|p| String::from_utf8_lossy(p.as_ref()).into_owned())
                    .unwrap_or_default(),
            ));
            true
        })
    }

    fn payload_is(r: &InvokeInput, want: &str) -> bool {
        r.payload().is_some_and(|p| p.as_ref() == want.as_bytes())
    }

    #[test]
    fn settings_table() {
        let r = registry();
        for s in [
            json!({"aws": {"arn": ARN}}),
            json!({"aws": {"arn": "sink"}, "concurrency": 1}),
            json!({"aws": {"arn": "sink:prod", "assume_role_arn": "arn:aws:iam::1:role/r"}}),
            json!({"aws": {"arn": ARN}, "batch": {"count": 5}, "auxiliary_transforms": []}),
        ] {
            testing::build(&r, json!({"type": "send_aws_lambda", "settings": s}))
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "send_aws_lambda",
            &[
                (json!({}), "settings.aws.arn: missing required option"),
                (
                    json!({"aws": {"arn": ""}}),
                    "settings.aws.arn: missing required option",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:sqs:us-east-1:1:q"}}),
                    "is not a Lambda function ARN",
                ),
                (json!({"aws": {"arn": "a/b"}}), "nor a function name"),
                (
                    json!({"aws": {"arn": ARN, "assume_role_arn": "nope"}}),
                    "settings.aws.assume_role_arn",
                ),
                (
                    json!({"aws": {"arn": ARN}, "concurrency": 0}),
                    "settings.concurrency: must be at least 1",
                ),
                (
                    json!({"aws": {"arn": ARN}, "concurrency": -1}),
                    "settings.concurrency",
                ),
            ],
        );
    }

    #[test]
    fn items_are_checked_when_they_arrive() {
        let t = testing::build(
            &registry(),
            json!({"type": "send_aws_lambda", "settings": {"aws": {"arn": ARN}}}),
        )
        .unwrap();
        let send = |data: Vec<u8>| {
            testing::block_on(t.transform(Message::new(data), &mut Vec::new()))
                .map_err(|e| e.to_string())
        };
        let e = send(b"not json".to_vec()).unwrap_err();
        assert!(e.contains("a Lambda payload must be JSON"), "{e}");
        let mut big = b"\"".to_vec();
        big.resize(MAX_ASYNC_PAYLOAD, b'x');
        big.push(b'"');
        let e = send(big).unwrap_err();
        assert!(
            e.contains(
                "data could not be sent: a payload of 1048577 bytes exceeds Lambda's asynchronous invoke payload limit of 1048576 bytes"
            ),
            "{e}"
        );
        // Accepted (and held until the batch closes: nothing is invoked yet).
        send(br#"{"ok":true}"#.to_vec()).unwrap();
    }

    #[tokio::test]
    async fn each_item_is_one_event_invoke_of_the_function() {
        let (seen, m) = recorder();
        let rule = mock!(Client::invoke)
            .match_requests(m)
            .then_output(accepted);
        let l = lambda_with(&[&rule], 4);
        l.send(&batch(&[r#"{"n":1}"#, r#"{"n":2}"#, "[3]"]))
            .await
            .unwrap();
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (ARN.into(), "Event".into(), "[3]".into()),
                (ARN.into(), "Event".into(), r#"{"n":1}"#.into()),
                (ARN.into(), "Event".into(), r#"{"n":2}"#.into()),
            ]
        );
    }

    #[tokio::test]
    async fn a_throttled_invoke_is_retried_by_the_sdk() {
        let throttled = r#"{"__type":"TooManyRequestsException","message":"Rate Exceeded."}"#;
        let rule = mock!(Client::invoke)
            .sequence()
            .http_status(429, Some(throttled.into()))
            .output(accepted)
            .build();
        let l = lambda_with(&[&rule], 1);
        l.send(&batch(&["{}"])).await.unwrap();
        assert_eq!(rule.num_calls(), 2);
    }

    fn throttling() -> aws_sdk_lambda::operation::invoke::InvokeError {
        aws_sdk_lambda::operation::invoke::InvokeError::TooManyRequestsException(
            aws_sdk_lambda::types::error::TooManyRequestsException::builder()
                .message("Rate Exceeded.")
                .meta(
                    aws_sdk_lambda::error::ErrorMetadata::builder()
                        .code("TooManyRequestsException")
                        .message("Rate Exceeded.")
                        .build(),
                )
                .build(),
        )
    }

    #[tokio::test]
    async fn a_failed_invoke_fails_only_its_item() {
        let fail = mock!(Client::invoke)
            .match_requests(|r| payload_is(r, r#"{"n":2}"#))
            .then_error(throttling);
        let missing = mock!(Client::invoke)
            .match_requests(|r| payload_is(r, r#"{"n":4}"#))
            .sequence()
            .http_status(
                404,
                Some(
                    r#"{"__type":"ResourceNotFoundException","Message":"Function not found: sink"}"#
                        .into(),
                ),
            )
            .repeatedly()
            .build();
        let ok = mock!(Client::invoke).then_output(accepted);
        let l = lambda_with(&[&fail, &missing, &ok], 16);
        let e = l
            .send(&batch(&[
                r#"{"n":1}"#,
                r#"{"n":2}"#,
                r#"{"n":3}"#,
                r#"{"n":4}"#,
            ]))
            .await
            .unwrap_err();
        assert_eq!(e.undelivered, Undelivered::Items(vec![1, 3]));
        let text = e.error.to_string();
        assert!(
            text.contains("lambda function sink: 2 of 4 asynchronous invokes failed: 1 × TooManyRequestsException (Rate Exceeded.)"),
            "{text}"
        );
        assert!(
            text.contains("1 × ResourceNotFoundException (Function not found: sink)"),
            "{text}"
        );
        // The throttled invoke was tried as often as the SDK retries (3 attempts).
        assert_eq!(fail.num_calls(), 3);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn acks_fail_for_exactly_the_failed_invokes() {
        let fail = mock!(Client::invoke)
            .match_requests(|r| payload_is(r, r#""b""#))
            .then_error(throttling);
        let ok = mock!(Client::invoke).then_output(accepted);
        let s = Sender::from_parts(
            lambda_with(&[&fail, &ok], 16),
            BatchLimits::from(BatchSettings::default()),
            MAX_ASYNC_PAYLOAD,
            None,
            None,
        );
        let mut trackers = Vec::new();
        let mut out = Vec::new();
        for d in [r#""a""#, r#""b""#, r#""c""#] {
            let (t, tok) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(tok);
            s.transform(m, &mut out).await.unwrap();
            trackers.push(t);
        }
        drop(out);
        let e = s
            .transform(Message::ctrl(), &mut Vec::new())
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("lambda function sink: 1 of 3"),
            "{e}"
        );
        let status: Vec<AckStatus> = trackers.iter().map(|t| t.status()).collect();
        assert_eq!(
            status,
            vec![
                AckStatus::Delivered,
                AckStatus::Pending,
                AckStatus::Delivered
            ]
        );
        assert_eq!(
            s.undelivered(),
            1,
            "only the failed item is kept for a retry"
        );
        s.abort("gave up").await;
        assert_eq!(trackers[1].status(), AckStatus::Failed);
        assert_eq!(trackers[0].status(), AckStatus::Delivered);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn invokes_in_flight_are_bounded_by_concurrency() {
        // The mocks answer at once, so a loopback endpoint that answers each invoke after a
        // delay shows how many are in flight.
        let delay = Duration::from_millis(20);
        for concurrency in [1usize, 4, 16] {
            let (endpoint, most, server) = sluice_platform::aws::test_support::slow_endpoint(
                delay,
                "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
            )
            .await;
            let conf = aws_sdk_lambda::Config::builder()
                .behavior_version(aws_sdk_lambda::config::BehaviorVersion::latest())
                .region(aws_sdk_lambda::config::Region::new("us-east-1"))
                .credentials_provider(aws_sdk_lambda::config::Credentials::new(
                    "test", "test", None, None, "test",
                ))
                .endpoint_url(endpoint)
                .http_client(sluice_platform::aws::https_client())
                .build();
            let function = lambda::parse_function("sink").unwrap();
            let l = Lambda::new(function, AwsTarget::default(), concurrency)
                .with_client(Client::from_conf(conf));
            let items: Vec<String> = (0..32).map(|i| i.to_string()).collect();
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            let started = std::time::Instant::now();
            l.send(&batch(&refs)).await.unwrap();
            let took = started.elapsed();
            assert_eq!(
                most.load(Ordering::SeqCst),
                concurrency,
                "in flight at most"
            );
            // 32 invokes in waves of `concurrency`, each wave at least `delay`.
            assert!(
                took >= delay * (32 / concurrency) as u32,
                "{concurrency}: {took:?}"
            );
            server.abort();
        }
    }

    #[test]
    fn auxiliary_outputs_must_be_json_too() {
        let rule = mock!(Client::invoke).then_output(accepted);
        let aux = testing::build_pipeline(
            &registry(),
            json!([{"type": "string_append", "settings": {"suffix": "!"}}]),
        )
        .unwrap();
        let s = Sender::from_parts(
            lambda_with(&[&rule], 1),
            BatchLimits::from(BatchSettings::default()),
            MAX_ASYNC_PAYLOAD,
            None,
            Some(aux),
        );
        testing::block_on(s.transform(Message::new(&b"{}"[..]), &mut Vec::new())).unwrap();
        let e = testing::block_on(s.transform(Message::ctrl(), &mut Vec::new()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a Lambda payload must be JSON"), "{e}");
        assert_eq!(rule.num_calls(), 0, "nothing of the batch was invoked");
    }

    #[test]
    fn compliance() {
        let rule = mock!(Client::invoke).then_output(accepted);
        let t = Transform::stateful(Sender::from_parts(
            lambda_with(&[&rule], 2),
            BatchLimits::from(BatchSettings::default()),
            MAX_ASYNC_PAYLOAD,
            None,
            None,
        ));
        testing::check_compliance(t);
    }

    #[tokio::test]
    async fn failures_say_whether_they_may_have_been_applied() {
        for (answers, want) in sluice_platform::aws::outcome::ANSWERS_TABLE {
            let (last, first) = answers.split_last().unwrap();
            let mut seq = mock!(Client::invoke).sequence();
            for status in first {
                seq = seq.http_status(*status, None);
            }
            let rule = seq.http_status(*last, None).repeatedly().build();
            let d = lambda_with(&[&rule], 1);
            let e = d.send(&batch(&[r#"{"a":1}"#])).await.unwrap_err();
            assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
        }
    }
}
