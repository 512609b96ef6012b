//! What `send_aws_lambda` and `enrich_aws_lambda` share: naming the function (`aws.arn`),
//! the payload limits and rules of `Invoke`, the client, and reading an `Invoke` error.
//!
//! `aws.arn` is sent as `FunctionName` exactly as configured, as Substation does, so a
//! qualifier (`:alias`, `:3`) chooses a version; the ARN's region is the client's. The
//! forms `Invoke` accepts: a function ARN (`arn:aws:lambda:REGION:ACCOUNT:function:NAME`,
//! optionally `:QUALIFIER`), a name (`NAME` or `NAME:QUALIFIER`), or a partial ARN
//! (`ACCOUNT:function:NAME`); the last two take the region from `AWS_REGION`.
//!
//! Limits (AWS's `Invoke` API reference): a synchronous invoke carries at most 6 MB in the
//! request and 6 MB in the response, an asynchronous (`Event`) one at most 1 MB. "MB" is
//! taken as MiB here, the larger reading: a payload over it is an error before any call,
//! and one between the two readings is left for Lambda to judge
//! (`RequestTooLargeException`). A payload must be JSON.

use aws_sdk_lambda::Client;
use aws_sdk_lambda::config::timeout::TimeoutConfig;
use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
use std::time::Duration;

use super::{Arn, AwsTarget, CONNECT_TIMEOUT, lazy_client};
use sluice_engine::TransformError;

/// The most bytes of an asynchronous (`Event`) invoke's payload (1 MB).
pub const MAX_ASYNC_PAYLOAD: usize = 1024 * 1024;
/// The most bytes of a synchronous (`RequestResponse`) invoke's request payload (6 MB).
pub const MAX_SYNC_PAYLOAD: usize = 6 * 1024 * 1024;
/// The longest a function may run (Lambda's maximum function timeout).
pub const MAX_FUNCTION_RUN: Duration = Duration::from_secs(15 * 60);

/// A function named by `aws.arn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// What is sent as `FunctionName` (the setting as configured).
    pub function_name: String,
    /// How errors name it: the name, with its qualifier if any.
    pub display: String,
    /// The region, from a full ARN.
    pub region: Option<String>,
}

/// Lambda's function name rule: 1 to 64 of `[a-zA-Z0-9-_]`.
fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A version or alias: `$LATEST`, or 1 to 128 of `[a-zA-Z0-9-_]`.
fn valid_qualifier(s: &str) -> bool {
    s == "$LATEST"
        || ((1..=128).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// `NAME` or `NAME:QUALIFIER`.
fn valid_name_and_qualifier(s: &str) -> bool {
    match s.split_once(':') {
        None => valid_name(s),
        Some((name, q)) => valid_name(name) && valid_qualifier(q),
    }
}

/// Parses `aws.arn` (not empty) into the function it names; the error says what is wrong.
pub fn parse_function(arn: &str) -> Result<Function, String> {
    let function = |display: &str, region: Option<String>| Function {
        function_name: arn.to_string(),
        display: display.to_string(),
        region,
    };
    if arn.starts_with("arn:") {
        let a = Arn::parse(arn)?;
        match a.resource.strip_prefix("function:") {
            Some(rest)
                if a.service == "lambda"
                    && !a.region.is_empty()
                    && valid_name_and_qualifier(rest) =>
            {
                Ok(function(rest, Some(a.region)))
            }
            _ => Err(format!(
                "{arn:?} is not a Lambda function ARN \
                 (expected arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER])"
            )),
        }
    } else {
        let partial = arn.split_once(":function:").filter(|(account, _)| {
            account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())
        });
        let rest = partial.map_or(arn, |(_, rest)| rest);
        if valid_name_and_qualifier(rest) {
            Ok(function(rest, None))
        } else {
            Err(format!(
                "{arn:?} is neither a Lambda function ARN \
                 (arn:aws:lambda:REGION:ACCOUNT:function:NAME) nor a function name \
                 (NAME[:QUALIFIER], NAME 1 to 64 letters, digits, '-', '_')"
            ))
        }
    }
}

/// Checks a payload before it is sent: at most `limit` bytes, and JSON (one value).
pub fn check_payload(payload: &[u8], limit: usize, invoke: &str) -> Result<(), String> {
    if payload.len() > limit {
        return Err(format!(
            "a payload of {} bytes exceeds Lambda's {invoke} invoke payload limit of {limit} bytes",
            payload.len()
        ));
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(payload)
        .map(|_| ())
        .map_err(|e| format!("a Lambda payload must be JSON, and this is not: {e}"))
}

/// The Lambda client in `cell`, made on first use from `target`'s configuration. A
/// synchronous invoke lasts as long as the function runs (up to 15 minutes), so with
/// `synchronous` one attempt may take that long, instead of sluice's usual bound.
pub async fn client<'c>(
    cell: &'c tokio::sync::OnceCell<Client>,
    target: &AwsTarget,
    function: &Function,
    synchronous: bool,
) -> Result<&'c Client, TransformError> {
    let no_region = || {
        format!(
            "lambda function {}: no AWS region: give the function's ARN in aws.arn or set AWS_REGION",
            function.display
        )
    };
    lazy_client(cell, target, no_region, |conf| {
        let mut b = aws_sdk_lambda::config::Builder::from(conf);
        if synchronous {
            let run = MAX_FUNCTION_RUN + Duration::from_secs(30);
            b = b.timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_attempt_timeout(run)
                    .operation_timeout(run * 2)
                    .build(),
            );
        }
        Client::from_conf(b.build())
    })
    .await
}

/// The error code of a failed call (`TooManyRequestsException`, ...), or what kind of
/// failure it was when the service did not answer with one (`TimeoutError`, ...); and its
/// message.
pub fn error_code<E, R>(e: &SdkError<E, R>) -> (String, String)
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let code = match e {
        SdkError::ServiceError(s) => s.err().code().unwrap_or("ServiceError"),
        SdkError::TimeoutError(_) => "TimeoutError",
        SdkError::DispatchFailure(_) => "DispatchFailure",
        SdkError::ResponseError(_) => "ResponseError",
        SdkError::ConstructionFailure(_) => "ConstructionFailure",
        _ => "SdkError",
    };
    let message = match e {
        SdkError::ServiceError(s) => s.err().message().map(str::to_string),
        _ => None,
    }
    .unwrap_or_else(|| super::error_chain(e));
    (code.to_string(), message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_table() {
        // (aws.arn, display, region)
        let ok = [
            (
                "arn:aws:lambda:eu-west-1:123456789012:function:enrich",
                "enrich",
                Some("eu-west-1"),
            ),
            (
                "arn:aws:lambda:eu-west-1:123456789012:function:enrich:prod",
                "enrich:prod",
                Some("eu-west-1"),
            ),
            ("enrich", "enrich", None),
            ("my_fn-2:$LATEST", "my_fn-2:$LATEST", None),
            ("123456789012:function:enrich", "enrich", None),
        ];
        for (arn, display, region) in ok {
            let f = parse_function(arn).unwrap_or_else(|e| panic!("{arn}: {e}"));
            assert_eq!(f.function_name, arn, "sent as configured");
            assert_eq!(f.display, display, "{arn}");
            assert_eq!(f.region.as_deref(), region, "{arn}");
        }
        let bad = [
            ("arn:aws:s3:::bucket", "is not a Lambda function ARN"),
            (
                "arn:aws:lambda::1:function:f",
                "is not a Lambda function ARN",
            ),
            ("arn:aws:lambda:r:1:layer:f", "is not a Lambda function ARN"),
            (
                "arn:aws:lambda:r:1:function:a b",
                "is not a Lambda function ARN",
            ),
            ("a b", "nor a function name"),
            ("f:", "nor a function name"),
            (&"x".repeat(65), "nor a function name"),
            ("1:function:f", "nor a function name"),
        ];
        for (arn, why) in bad {
            let e = parse_function(arn).unwrap_err();
            assert!(e.contains(why), "{arn}: {e}");
        }
    }

    #[test]
    fn payloads_table() {
        // (payload, limit, error containing; "" = accepted)
        let cases: [(&[u8], usize, &str); 8] = [
            (br#"{"a":1}"#, 100, ""),
            (b"[1,2]", 100, ""),
            (b"42", 100, ""),
            (b" \"s\" ", 100, ""),
            (b"not json", 100, "must be JSON"),
            (b"", 100, "must be JSON"),
            (b"{} {}", 100, "must be JSON"),
            (
                br#"{"a":1}"#,
                6,
                "payload of 7 bytes exceeds Lambda's async invoke payload limit of 6 bytes",
            ),
        ];
        for (payload, limit, want) in cases {
            let got = check_payload(payload, limit, "async");
            match want {
                "" => assert!(got.is_ok(), "{payload:?}: {got:?}"),
                w => assert!(got.unwrap_err().contains(w), "{payload:?}"),
            }
        }
        assert_eq!(MAX_ASYNC_PAYLOAD, 1_048_576);
        assert_eq!(MAX_SYNC_PAYLOAD, 6_291_456);
    }
}
