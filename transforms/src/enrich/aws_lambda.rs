//! `enrich_aws_lambda`: invokes an AWS Lambda function synchronously (`RequestResponse`)
//! with the value at `object.source_key` as the payload, and writes the function's response
//! at `object.target_key`.
//!
//! Substation compatibility (`reference/substation.md` §2.1 row 8): the same type name and
//! settings (`aws.arn`, `aws.assume_role_arn`, `object.source_key`, `object.target_key`)
//! and default id. The payload is the value's text as GJSON's `String()` gives it (an
//! object or array as compact JSON, a number as written, a string without its quotes), and
//! it must be JSON: a string value is sent only if its text is itself JSON. A message
//! without a value at the source key passes through unchanged. A function error
//! (`FunctionError` set: the function threw, timed out or ran out of memory) is an error
//! carrying the function's `errorType` and `errorMessage`. `aws.arn` is sent as
//! `FunctionName` as configured ([`sluice_platform::aws::lambda`]).
//!
//! Where sluice differs from Substation:
//!
//! - **The response is written as JSON**: any JSON response (object, array, string,
//!   number, boolean, null) is written as that value; a response that is not JSON is
//!   written as a string (base64 if it is not UTF-8), an empty one as null. Substation
//!   inserts only objects and arrays as JSON and any other response as its raw text in a
//!   string (a function returning `"ok"` gives `"\"ok\""`).
//! - **Limits**: a payload over the synchronous invoke's 6 MiB is an error naming the
//!   limit, before any call (Lambda answers at most 6 MB too).
//! - **Settings**: `object.source_key` is required as well (Substation accepts its absence
//!   and then passes every message through); errors name the function and the error code.
//! - **Timeouts**: one attempt may last as long as a function may run (15 minutes), not
//!   sluice's usual 5-second bound; throttling, 5xx and network errors are retried by the
//!   SDK (`sluice_platform::aws`), so a function may run more than once for one message when its
//!   answer is lost.

use std::borrow::Cow;

use aws_sdk_lambda::Client;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait, value,
};
use tokio::sync::OnceCell;

use sluice_platform::aws::lambda::{self, Function, MAX_SYNC_PAYLOAD};
use sluice_platform::aws::{AwsSettings, AwsTarget, check_role, non_empty};

/// Settings of `enrich_aws_lambda`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The function and the role.
    pub aws: AwsSettings,
    /// `source_key` (the payload) and `target_key` (where the response goes); both required.
    pub object: ObjectSettings,
}

/// The `enrich_aws_lambda` transform.
pub(crate) struct EnrichAwsLambda {
    function: Function,
    target: AwsTarget,
    source: Key,
    destination: Key,
    client: OnceCell<Client>,
}

impl EnrichAwsLambda {
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
        let source = b
            .opt_key("object.source_key", &s.object.source_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.source_key",
                    "missing required option: the key whose value is the payload",
                )
            })?;
        let destination = b
            .opt_key("object.target_key", &s.object.target_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.target_key",
                    "missing required option: the key the response is written to",
                )
            })?;
        let target = AwsTarget {
            region: function.region.clone(),
            assume_role_arn: role,
            ..Default::default()
        };
        Ok(EnrichAwsLambda {
            function,
            target,
            source,
            destination,
            client: OnceCell::new(),
        })
    }

    /// Uses `client` instead of making one (tests with mocked responses).
    #[cfg(test)]
    pub(crate) fn with_client(mut self, client: Client) -> Self {
        self.client = OnceCell::new_with(Some(client));
        self
    }

    fn fail(&self, why: impl std::fmt::Display) -> TransformError {
        TransformError::failed(format!("lambda function {}: {why}", self.function.display))
    }

    /// The payload for `v`: its text, checked (size, JSON).
    fn payload(&self, v: &Value) -> Result<Vec<u8>, TransformError> {
        let text = value::to_text(v);
        lambda::check_payload(text.as_bytes(), MAX_SYNC_PAYLOAD, "synchronous")
            .map_err(|m| self.fail(format!("the value at {:?}: {m}", self.source.as_str())))?;
        Ok(text.into_owned().into_bytes())
    }

    /// Invokes the function with `payload`; its response, or the function's error.
    async fn invoke(&self, payload: Vec<u8>) -> Result<Vec<u8>, TransformError> {
        let client = lambda::client(&self.client, &self.target, &self.function, true).await?;
        let out = client
            .invoke()
            .function_name(&self.function.function_name)
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| {
                let (code, message) = lambda::error_code(&e);
                self.fail(format!("Invoke failed: {code}: {message}"))
            })?;
        let response = out
            .payload()
            .map(|p| p.as_ref().to_vec())
            .unwrap_or_default();
        if let Some(kind) = out.function_error() {
            return Err(self.fail(function_error(kind, &response)));
        }
        Ok(response)
    }
}

/// The text of a function error from its `FunctionError` header and its response: the
/// function's `errorType` and `errorMessage`, or the raw response when it has neither.
fn function_error(kind: &str, response: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(response).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|p| p.get(name))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    let detail = match (field("errorType"), field("errorMessage")) {
        (Some(t), Some(m)) => format!("{t}: {m}"),
        (Some(t), None) => t.to_string(),
        (None, Some(m)) => m.to_string(),
        (None, None) => {
            let raw = String::from_utf8_lossy(response);
            let raw: Cow<'_, str> = if raw.chars().count() > 500 {
                Cow::Owned(format!("{}...", raw.chars().take(500).collect::<String>()))
            } else {
                raw
            };
            format!("response {raw:?}")
        }
    };
    format!("the function failed ({kind}): {detail}")
}

/// The value a response is written as: its JSON, else SJSON's typing of the bytes; an
/// empty response is null.
fn response_value(response: &[u8]) -> Value {
    if response.iter().all(u8::is_ascii_whitespace) {
        return Value::Null;
    }
    serde_json::from_slice(response).unwrap_or_else(|_| value::from_bytes(response))
}

#[async_trait]
impl StatelessTransform for EnrichAwsLambda {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let payload = match msg.get(&self.source) {
            None => {
                out.push(msg);
                return Ok(());
            }
            Some(v) => self.payload(&v)?,
        };
        let response = self.invoke(payload).await?;
        msg.set(&self.destination, response_value(&response))?;
        out.push(msg);
        Ok(())
    }
}

/// The tests mock the Lambda API with the SDK's own test utilities (aws-smithy-mocks): an
/// emulator cannot stand in here, because invoking a function on moto runs it in a Docker
/// container, and this machine (and CI) has no Docker.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use aws_sdk_lambda::config::retry::RetryConfig;
    use aws_sdk_lambda::operation::invoke::{InvokeInput, InvokeOutput};
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use sluice_engine::{Transform, json, testing};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:lookup";

    fn settings() -> sluice_engine::Value {
        json!({"aws": {"arn": ARN}, "object": {"source_key": "req", "target_key": "res"}})
    }

    fn enrich(rules: &[&Rule]) -> EnrichAwsLambda {
        let client = mock_client!(aws_sdk_lambda, RuleMode::MatchAny, rules, |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        let function = lambda::parse_function(ARN).unwrap();
        EnrichAwsLambda {
            target: AwsTarget {
                region: function.region.clone(),
                ..Default::default()
            },
            function,
            source: Key::parse("req").unwrap(),
            destination: Key::parse("res").unwrap(),
            client: OnceCell::new(),
        }
        .with_client(client)
    }

    fn answer(payload: &str) -> InvokeOutput {
        InvokeOutput::builder()
            .status_code(200)
            .payload(Blob::new(payload.as_bytes().to_vec()))
            .build()
    }

    fn run(t: &EnrichAwsLambda, input: &str) -> Result<String, String> {
        let mut out = Vec::new();
        testing::block_on(t.transform(Message::new(input.as_bytes().to_vec()), &mut out))
            .map_err(|e| e.to_string())?;
        assert_eq!(out.len(), 1);
        Ok(String::from_utf8_lossy(out[0].data()).into_owned())
    }

    #[test]
    fn settings_table() {
        let r = registry();
        for s in [
            settings(),
            json!({"aws": {"arn": "lookup:live"}, "object": {"source_key": "meta x", "target_key": "y.z"}}),
        ] {
            testing::build(&r, json!({"type": "enrich_aws_lambda", "settings": s}))
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "enrich_aws_lambda",
            &[
                (
                    json!({"object": {"source_key": "a", "target_key": "b"}}),
                    "settings.aws.arn: missing required option",
                ),
                (
                    json!({"aws": {"arn": "arn:aws:lambda:us-east-1:1:function:"}, "object": {"source_key": "a", "target_key": "b"}}),
                    "settings.aws.arn: \"arn:aws:lambda:us-east-1:1:function:\" is not a Lambda function ARN",
                ),
                (
                    json!({"aws": {"arn": ARN}, "object": {"target_key": "b"}}),
                    "settings.object.source_key: missing required option",
                ),
                (
                    json!({"aws": {"arn": ARN}, "object": {"source_key": "a", "target_key": ""}}),
                    "settings.object.target_key: missing required option",
                ),
                (
                    json!({"aws": {"arn": ARN, "assume_role_arn": "arn:aws:iam::1:user/u"}, "object": {"source_key": "a", "target_key": "b"}}),
                    "settings.aws.assume_role_arn: \"arn:aws:iam::1:user/u\" is not an IAM role ARN",
                ),
            ],
        );
    }

    #[test]
    fn the_payload_and_the_response() {
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let s = seen.clone();
        let rule = mock!(Client::invoke)
            .match_requests(move |r: &InvokeInput| {
                s.lock().unwrap().push((
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
            .then_compute_output(|r: &InvokeInput| {
                // The function answers with what it was given, wrapped.
                let p = String::from_utf8_lossy(r.payload().unwrap().as_ref()).into_owned();
                answer(&format!(r#"{{"got":{p}}}"#))
            });
        let t = enrich(&[&rule]);
        // (input, output)
        let cases = [
            (
                r#"{"req":{"id":7,"tags":["a"]}}"#,
                r#"{"req":{"id":7,"tags":["a"]},"res":{"got":{"id":7,"tags":["a"]}}}"#,
            ),
            (r#"{"req":[1,2]}"#, r#"{"req":[1,2],"res":{"got":[1,2]}}"#),
            (r#"{"req":42}"#, r#"{"req":42,"res":{"got":42}}"#),
            // A string is sent as its text, which must be JSON itself.
            (
                r#"{"req":"{\"k\":1}"}"#,
                r#"{"req":"{\"k\":1}","res":{"got":{"k":1}}}"#,
            ),
            (r#"{"req":true}"#, r#"{"req":true,"res":{"got":true}}"#),
        ];
        for (input, want) in cases {
            assert_eq!(run(&t, input).unwrap(), want, "{input}");
        }
        let seen = seen.lock().unwrap();
        assert!(seen.iter().all(|(t, _)| t == "RequestResponse"));
        assert_eq!(seen[0].1, r#"{"id":7,"tags":["a"]}"#);
        assert_eq!(seen[3].1, r#"{"k":1}"#);
    }

    #[test]
    fn responses_are_written_as_json() {
        // (response payload, the value written)
        let cases = [
            (r#"{"a":1}"#, r#"{"a":1}"#),
            (r#"[1,"x"]"#, r#"[1,"x"]"#),
            (r#""ok""#, r#""ok""#),
            ("12345678901234567", "12345678901234567"),
            ("null", "null"),
            ("", "null"),
            ("not json", r#""not json""#),
        ];
        for (response, want) in cases {
            let response = response.to_string();
            let rule = mock!(Client::invoke).then_output(move || answer(&response));
            let t = enrich(&[&rule]);
            assert_eq!(
                run(&t, r#"{"req":{}}"#).unwrap(),
                format!(r#"{{"req":{{}},"res":{want}}}"#)
            );
        }
    }

    #[test]
    fn a_missing_source_passes_through_without_a_call() {
        let rule = mock!(Client::invoke).then_output(|| answer("{}"));
        let t = enrich(&[&rule]);
        assert_eq!(run(&t, r#"{"other":1}"#).unwrap(), r#"{"other":1}"#);
        assert_eq!(run(&t, "not json at all").unwrap(), "not json at all");
        assert_eq!(rule.num_calls(), 0);
    }

    #[test]
    fn payloads_must_be_json_and_fit() {
        let rule = mock!(Client::invoke).then_output(|| answer("{}"));
        let t = enrich(&[&rule]);
        let e = run(&t, r#"{"req":"plain text"}"#).unwrap_err();
        assert!(
            e.contains(
                r#"lambda function lookup: the value at "req": a Lambda payload must be JSON"#
            ),
            "{e}"
        );
        let e = run(&t, r#"{"req":null}"#).unwrap_err();
        assert!(e.contains("must be JSON"), "null's text is empty: {e}");
        let big = format!(r#"{{"req":["{}"]}}"#, "x".repeat(MAX_SYNC_PAYLOAD));
        let e = run(&t, &big).unwrap_err();
        assert!(
            e.contains("exceeds Lambda's synchronous invoke payload limit of 6291456 bytes"),
            "{e}"
        );
        assert_eq!(rule.num_calls(), 0);
    }

    #[test]
    fn a_function_error_carries_its_type_and_message() {
        let rule = mock!(Client::invoke).then_output(|| {
            InvokeOutput::builder()
                .status_code(200)
                .function_error("Unhandled")
                .payload(Blob::new(
                    br#"{"errorMessage":"no such user: 7","errorType":"KeyError","stackTrace":[]}"#
                        .to_vec(),
                ))
                .build()
        });
        let t = enrich(&[&rule]);
        let e = run(&t, r#"{"req":{"id":7}}"#).unwrap_err();
        assert_eq!(
            e,
            "lambda function lookup: the function failed (Unhandled): KeyError: no such user: 7"
        );
        // Without the usual fields, the raw response.
        assert_eq!(
            function_error("Handled", b"boom"),
            r#"the function failed (Handled): response "boom""#
        );
        assert_eq!(
            function_error(
                "Unhandled",
                br#"{"errorMessage":"Task timed out after 3.00 seconds"}"#
            ),
            "the function failed (Unhandled): Task timed out after 3.00 seconds"
        );
    }

    #[test]
    fn throttling_is_retried_then_an_error_naming_the_code() {
        let throttled = r#"{"__type":"TooManyRequestsException","message":"Rate Exceeded."}"#;
        let rule = mock!(Client::invoke)
            .sequence()
            .http_status(429, Some(throttled.into()))
            .output(|| answer(r#"{"ok":1}"#))
            .build();
        let t = enrich(&[&rule]);
        assert_eq!(
            run(&t, r#"{"req":{}}"#).unwrap(),
            r#"{"req":{},"res":{"ok":1}}"#
        );
        assert_eq!(rule.num_calls(), 2);

        let rule = mock!(Client::invoke)
            .sequence()
            .http_status(429, Some(throttled.into()))
            .repeatedly()
            .build();
        let t = enrich(&[&rule]);
        let e = run(&t, r#"{"req":{}}"#).unwrap_err();
        assert_eq!(
            e,
            "lambda function lookup: Invoke failed: TooManyRequestsException: Rate Exceeded."
        );
        assert_eq!(rule.num_calls(), 3, "the SDK's attempts");
    }

    #[test]
    fn compliance() {
        let rule = mock!(Client::invoke).then_output(|| answer("{}"));
        testing::check_compliance(Transform::stateless(enrich(&[&rule])));
    }
}
