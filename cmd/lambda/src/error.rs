//! The function errors the handlers return, as the Lambda runtime API receives them.
//!
//! A function error reaches the runtime API as `{"errorType", "errorMessage"}`. Left to
//! lambda_runtime, `errorType` is the Rust type name of the boxed error
//! (`&alloc::boxed::Box<dyn core::error::Error + ...>`), the same for every failure, and
//! an event that does not parse is answered by the runtime itself with its own type name
//! and a message ending in a newline. An operator filtering CloudWatch Logs, a Step
//! Functions `Catch`, or an on-failure destination needs a short name that says what went
//! wrong and stays the same across releases, so each failure is a [`HandlerError`] variant
//! whose [`HandlerError::kind`] is its `errorType`, and `From<HandlerError> for Diagnostic`
//! is lambda_runtime's own hook for choosing it. The message is one line: Lambda's console
//! and `aws lambda invoke` show it as is, and a newline in it would split CloudWatch log
//! events.
//!
//! The names, and what to do about each, are in docs/lambda.md ("Function errors").

use lambda_runtime::Diagnostic;

use super::HandlerKind;
use super::autoscale::ScaleError;

/// A function error: the invocation failed and its source retries it (or, for a
/// synchronous invoke, the caller sees the error). Its `Display` is the one-line message.
#[derive(thiserror::Error)]
pub enum HandlerError {
    /// The event is not of the handler's shape: not JSON, not the event source's event, or
    /// a record without the identifier the response must name it by.
    #[error("{}", one_line(.0))]
    InvalidEvent(String),
    /// Records were not delivered (or the pipeline failed) and there is no per-record way
    /// to say which: the mapping has no `ReportBatchItemFailures`, or the source (SNS, S3)
    /// retries whole invocations.
    #[error("{}", one_line(.0))]
    DeliveryFailed(String),
    /// The function's configuration cannot serve the invocation (a `Function` built for a
    /// handler that runs no pipeline).
    #[error("{}", one_line(.0))]
    ConfigError(String),
    /// The Kinesis autoscaler: an AWS call (Kinesis, CloudWatch) failed.
    #[error("{}", one_line(.0))]
    AwsCallFailed(String),
    /// The Kinesis autoscaler: the stream was still resharding at the invocation's deadline.
    #[error("{}", one_line(.0))]
    ShardsStillUpdating(String),
}

impl HandlerError {
    /// Every `errorType`, in the order of the enum (docs/lambda.md lists them).
    pub const KINDS: [&'static str; 5] = [
        "InvalidEvent",
        "DeliveryFailed",
        "ConfigError",
        "AwsCallFailed",
        "ShardsStillUpdating",
    ];

    /// The `errorType` the runtime API receives: a short name that stays the same.
    pub fn kind(&self) -> &'static str {
        match self {
            HandlerError::InvalidEvent(_) => Self::KINDS[0],
            HandlerError::DeliveryFailed(_) => Self::KINDS[1],
            HandlerError::ConfigError(_) => Self::KINDS[2],
            HandlerError::AwsCallFailed(_) => Self::KINDS[3],
            HandlerError::ShardsStillUpdating(_) => Self::KINDS[4],
        }
    }

    /// The event is not a `kind` event, because of `why`.
    pub(crate) fn invalid_event(kind: HandlerKind, why: impl std::fmt::Display) -> HandlerError {
        HandlerError::InvalidEvent(format!(
            "the event is not a valid {} event: {why}",
            kind.name()
        ))
    }

    /// The autoscaler's error with `message`, of the kind of `cause` (when several alarms
    /// failed, the message counts them and names the first, whose kind it takes).
    pub(crate) fn scale(cause: &ScaleError, message: String) -> HandlerError {
        match cause {
            ScaleError::Aws { .. } => HandlerError::AwsCallFailed(message),
            ScaleError::StillUpdating { .. } => HandlerError::ShardsStillUpdating(message),
        }
    }
}

impl From<ScaleError> for HandlerError {
    fn from(e: ScaleError) -> HandlerError {
        HandlerError::scale(&e, e.to_string())
    }
}

/// `errorType: message`, so that wherever the error is formatted with `{:?}` it reads like
/// the error, not like a Rust value. lambda_runtime requires `Debug` and logs a handler's
/// error with it; the bootstrap's logs leave that line out, as a copy of the handler's own
/// `invocation failed` line (`telemetry::init_logs`).
impl std::fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {self}", self.kind())
    }
}

impl From<HandlerError> for Diagnostic {
    fn from(e: HandlerError) -> Diagnostic {
        Diagnostic {
            error_type: e.kind().to_string(),
            error_message: e.to_string(),
        }
    }
}

/// `text` on one line: its lines trimmed and joined by a space, blank ones left out (the
/// words are kept; a pipeline or SDK error may carry newlines).
fn one_line(text: &str) -> String {
    if !text.contains(['\n', '\r']) {
        return text.to_string();
    }
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_error_type_and_a_one_line_message() {
        let cases: Vec<(HandlerError, &str, &str)> = vec![
            (
                HandlerError::invalid_event(HandlerKind::Sqs, "missing field `Records`"),
                "InvalidEvent",
                "the event is not a valid AWS_SQS event: missing field `Records`",
            ),
            (
                HandlerError::DeliveryFailed(
                    "1 of 2 records were not delivered (first: boom\n  at line 3\n)".into(),
                ),
                "DeliveryFailed",
                "1 of 2 records were not delivered (first: boom at line 3 )",
            ),
            (
                HandlerError::ConfigError("AWS_KINESIS_AUTOSCALE runs no pipeline".into()),
                "ConfigError",
                "AWS_KINESIS_AUTOSCALE runs no pipeline",
            ),
            (
                ScaleError::Aws {
                    service: "Kinesis",
                    operation: "ListShards",
                    target: "stream s".into(),
                    cause: "ResourceNotFoundException (Stream s not found.)".into(),
                }
                .into(),
                "AwsCallFailed",
                "Kinesis ListShards of stream s failed: ResourceNotFoundException \
                 (Stream s not found.)",
            ),
            (
                ScaleError::StillUpdating {
                    stream: "s".into(),
                    to: 4,
                }
                .into(),
                "ShardsStillUpdating",
                "Kinesis stream s was still UPDATING to 4 shards at the invocation's \
                 deadline: its alarms were not rewritten (the next alarm rewrites them for \
                 the new count; give the function a longer timeout)",
            ),
        ];
        let mut seen = Vec::new();
        for (e, kind, message) in cases {
            assert_eq!(e.kind(), kind);
            assert_eq!(e.to_string(), message);
            assert_eq!(format!("{e:?}"), format!("{kind}: {message}"));
            let d = Diagnostic::from(e);
            assert_eq!(d.error_type, kind);
            assert_eq!(d.error_message, message);
            assert!(!d.error_message.contains('\n'));
            seen.push(kind);
        }
        assert_eq!(seen, HandlerError::KINDS, "every variant is covered");
    }

    #[test]
    fn several_alarms_take_the_first_failures_kind() {
        let first = ScaleError::StillUpdating {
            stream: "s".into(),
            to: 2,
        };
        let e = HandlerError::scale(
            &first,
            format!("2 of 3 alarms could not be handled (first: {first})"),
        );
        assert_eq!(e.kind(), "ShardsStillUpdating");
        assert!(e.to_string().starts_with("2 of 3 alarms"), "{e}");
    }

    #[test]
    fn a_body_that_is_not_the_event_is_invalid_event() {
        use super::super::Event;
        let kinesis = Some(HandlerKind::KinesisDataStream);
        let cases: &[(Option<HandlerKind>, &str, Option<&str>)] = &[
            (None, r#"{"Records": []}"#, None),
            (kinesis, r#"{"Records": []}"#, None),
            (
                None,
                "{",
                Some("EOF while parsing an object at line 1 column 1"),
            ),
            (
                kinesis,
                "{",
                Some("EOF while parsing an object at line 1 column 1"),
            ),
            (
                kinesis,
                r#"{"nope": 1}"#,
                Some("missing field `Records` at line 1 column 11"),
            ),
            (
                kinesis,
                r#"{"Records": [{"kinesis": {"data": "aGk="}}]}"#,
                Some("missing field `sequenceNumber` at line 1 column 41"),
            ),
        ];
        for (kind, body, want) in cases {
            let event = Event::read(*kind, &mut serde_json::Deserializer::from_str(body));
            match (event, want) {
                (Event::Invalid(why), Some(want)) => {
                    let e = HandlerError::invalid_event(kind.unwrap_or(HandlerKind::Sqs), why);
                    assert_eq!(e.kind(), "InvalidEvent");
                    assert!(e.to_string().ends_with(want), "{body}: {e}");
                }
                (Event::Json(_) | Event::Kinesis(_), None) => {}
                (Event::Invalid(why), None) => panic!("{body}: {why}"),
                (_, Some(want)) => panic!("{body}: read, not {want:?}"),
            }
        }
    }

    #[test]
    fn one_line_keeps_the_words() {
        for (text, want) in [
            ("plain", "plain"),
            ("a\nb", "a b"),
            ("a\r\n  b  \n\n", "a b"),
            ("\n", ""),
        ] {
            assert_eq!(one_line(text), want, "{text:?}");
        }
    }
}
