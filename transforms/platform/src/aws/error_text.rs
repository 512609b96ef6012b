//! The words for a failed AWS call: one line a person can act on, for every service.
//!
//! The SDK's own renderings are not that: its `Display` says `dispatch failure`, and its
//! `DisplayErrorContext` appends the error's `Debug` form (`(DispatchFailure(DispatchFailure
//! { source: ConnectorError { ... } }))`). [`describe_error`] says what happened instead:
//! the service's code and message (and that it is a refusal or throttling when it is one),
//! no credentials, an endpoint that cannot be reached, a timeout, an answer that could not
//! be read; with the innermost causes in their own words. Callers add the service,
//! operation and resource (`kinesis stream x: PutRecords failed: ...`).

use std::error::Error;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use super::MAX_ATTEMPTS;

/// Error codes that mean the caller was throttled (the SDK retried them).
const THROTTLING: [&str; 8] = [
    "ThrottlingException",
    "Throttling",
    "ThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "SlowDown",
];

/// Error codes that mean the caller may not do this.
const DENIED: [&str; 5] = [
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnrecognizedClientException",
    "InvalidSignatureException",
];

/// The text of a failed SDK call, in one line (see the module documentation).
pub fn describe_error<E>(e: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + Error + 'static,
{
    if let Some(code) = e.code() {
        let answer = match e.message() {
            // A service's message may quote what the request carried (a secret from
            // `utility_secret` put into an item, say): redacted like every error text.
            Some(m) if !m.is_empty() => format!("{code} ({})", crate::secrets::redact(m)),
            _ => code.to_string(),
        };
        if THROTTLING.contains(&code) {
            return format!("throttled, still after {MAX_ATTEMPTS} tries: {answer}");
        }
        if DENIED.contains(&code) {
            return format!("access denied: {answer}");
        }
        return answer;
    }
    match e {
        SdkError::ServiceError(s) => format!("HTTP {}", s.raw().status().as_u16()),
        SdkError::DispatchFailure(d) => {
            let Some(conn) = d.as_connector_error() else {
                return format!("the request was not sent: {}", error_chain(e));
            };
            if let Some(c) = credentials_error(conn) {
                return match c {
                    CredentialsError::CredentialsNotLoaded(_) => "no AWS credentials found \
                        (none in the environment, the profile, a web identity token, the \
                        container or instance metadata)"
                        .to_string(),
                    other => format!(
                        "AWS credentials could not be loaded: {}",
                        error_chain(other)
                    ),
                };
            }
            if conn.is_timeout() {
                format!("the endpoint did not answer in time: {}", error_chain(conn))
            } else if conn.is_io() {
                format!("the endpoint cannot be reached: {}", error_chain(conn))
            } else {
                // The connection broke before an answer was read ("connection closed before
                // message completed"): the request may have reached the service and been
                // applied, which a caller must not be told otherwise.
                format!(
                    "the connection broke before an answer came (the call may have been applied): {}",
                    error_chain(conn)
                )
            }
        }
        SdkError::TimeoutError(_) => "timed out: no answer within the call's time limit".into(),
        SdkError::ResponseError(_) => format!("the answer could not be read: {}", error_chain(e)),
        SdkError::ConstructionFailure(_) => {
            format!("the request could not be made: {}", error_chain(e))
        }
        _ => error_chain(e),
    }
}

/// The credentials error among `e`'s causes, if any.
fn credentials_error<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a CredentialsError> {
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(c) = err.downcast_ref::<CredentialsError>() {
            return Some(c);
        }
        cur = err.source();
    }
    None
}

/// `e` and its causes, each in its own words, joined by `: `, leaving out the SDK's
/// generic layers (`dispatch failure`, `io error`, `other`) and repeats. One line, never
/// a `Debug` form.
pub fn error_chain(e: &(dyn Error + 'static)) -> String {
    const GENERIC: [&str; 7] = [
        "timeout",
        "dispatch failure",
        "io error",
        "other",
        "response error",
        "service error",
        "failed to construct request",
    ];
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string().replace(['\n', '\r'], " ");
        let text = text.trim().to_string();
        let generic = GENERIC.contains(&text.as_str());
        if !text.is_empty() && !generic && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    if parts.is_empty() {
        return e.to_string();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_types::body::SdkBody;

    fn service_error(
        status: u16,
        code: &str,
        message: &str,
    ) -> SdkError<GetItemError, HttpResponse> {
        let meta = aws_smithy_types::error::ErrorMetadata::builder()
            .code(code)
            .message(message)
            .build();
        let raw = HttpResponse::new(
            aws_smithy_runtime_api::http::StatusCode::try_from(status).unwrap(),
            SdkBody::empty(),
        );
        SdkError::service_error(GetItemError::generic(meta), raw)
    }

    fn dispatch(conn: ConnectorError) -> SdkError<GetItemError, HttpResponse> {
        SdkError::dispatch_failure(conn)
    }

    #[test]
    fn each_failure_in_words() {
        let refused = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let no_creds = CredentialsError::not_loaded("environment variable not set");
        let imds = CredentialsError::provider_error("failed to load IMDS session token");
        let table: Vec<(SdkError<GetItemError, HttpResponse>, &str)> = vec![
            (
                service_error(
                    400,
                    "ResourceNotFoundException",
                    "Requested resource not found",
                ),
                "ResourceNotFoundException (Requested resource not found)",
            ),
            (
                service_error(
                    400,
                    "ProvisionedThroughputExceededException",
                    "Rate exceeded",
                ),
                "throttled, still after 8 tries: ProvisionedThroughputExceededException (Rate exceeded)",
            ),
            (
                service_error(
                    400,
                    "AccessDeniedException",
                    "User: arn:aws:iam::1:user/u is not authorized to perform: dynamodb:GetItem on resource: t",
                ),
                "access denied: AccessDeniedException (User: arn:aws:iam::1:user/u is not authorized to perform: dynamodb:GetItem on resource: t)",
            ),
            (
                dispatch(ConnectorError::io(Box::new(refused))),
                "the endpoint cannot be reached: Connection refused (os error 111)",
            ),
            (
                dispatch(ConnectorError::timeout("connect timed out".into())),
                "the endpoint did not answer in time: connect timed out",
            ),
            (
                dispatch(ConnectorError::other(Box::new(no_creds), None)),
                "no AWS credentials found (none in the environment, the profile, a web identity token, the container or instance metadata)",
            ),
            (
                dispatch(ConnectorError::other(Box::new(imds), None)),
                "AWS credentials could not be loaded: an error occurred while loading credentials: failed to load IMDS session token",
            ),
            (
                dispatch(ConnectorError::other(
                    "connection closed before message completed".into(),
                    None,
                )),
                "the connection broke before an answer came (the call may have been applied): connection closed before message completed",
            ),
        ];
        for (e, want) in table {
            let got = describe_error(&e);
            assert_eq!(got, want);
            assert!(
                !got.contains('\n') && !got.contains("ConnectorError"),
                "{got}"
            );
        }
    }
}
