//! Whether a failed AWS call may have been applied anyway: the one classification every
//! AWS send uses to tell the batcher a failure is **uncertain** (`SendError::uncertain`),
//! so that a lock leaves the messages' keys for the next attempt to check instead of
//! releasing them, and so that the Kinesis send reads the stream back instead of blindly
//! sending again.
//!
//! A call may have been applied when the request went out and no trustworthy "no" came
//! back:
//!
//! - an answer other than a 4xx that says the call failed: a 5xx (the service failed
//!   somewhere after receiving the request), or an error in a 200 (S3 does that);
//! - a timeout of an attempt or of the whole operation (the request may have arrived);
//! - a connection that failed after it was established (reset, closed, a response cut
//!   short), or an answer that could not be read, unless its status was a 4xx;
//! - anything else we cannot place (conservative: an uncertain failure only costs a check).
//!
//! It was certainly not applied when the service said no (a 4xx: throttling, validation,
//! access) or the request never left: it could not be built or signed, credentials could
//! not be had, the name did not resolve, the connection was refused or timed out while
//! being established ([`never_sent`]).
//!
//! The SDK retries throttling, 5xx and I/O errors itself, and its final error describes
//! only the last attempt: a timeout followed by a throttled retry ends as "throttled",
//! although the first attempt may have been applied. So a call watches every attempt with
//! an [`AttemptWatch`] (an interceptor added to the one operation) and the verdict is
//! [`maybe_applied`] of the final error or of any attempt the watch saw.

use std::error::Error as StdError;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_smithy_runtime_api::client::dns::ResolveDnsError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::{ConnectorError, SdkError};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// Whether a failed call may have been applied, from its final error alone (see the module
/// documentation). With an [`AttemptWatch`] on the call, use [`AttemptWatch::verdict`].
pub fn maybe_applied<E>(e: &SdkError<E, HttpResponse>) -> bool {
    match e {
        SdkError::ConstructionFailure(_) => false,
        SdkError::TimeoutError(_) => true,
        SdkError::DispatchFailure(d) => d.as_connector_error().is_none_or(connector_maybe_applied),
        SdkError::ResponseError(r) => status_maybe_applied(r.raw().status().as_u16()),
        SdkError::ServiceError(s) => status_maybe_applied(s.raw().status().as_u16()),
        _ => true,
    }
}

/// Whether a failure answered with HTTP status `status` leaves the outcome open: anything
/// but a 4xx (a 5xx, or an error in a success's status).
pub fn status_maybe_applied(status: u16) -> bool {
    !(400..500).contains(&status)
}

/// Whether a connection failure may have let the request through: not when it was never
/// sent ([`never_sent`]) or the request was unusable (a "user" error of the HTTP client).
pub fn connector_maybe_applied(c: &ConnectorError) -> bool {
    !(c.is_user() || never_sent(c))
}

/// Whether a connection failure happened before the request could be written: refused,
/// unreachable, a name that did not resolve, a connect timeout (the HTTP client reports
/// these as errors of its connect step).
pub fn never_sent(c: &ConnectorError) -> bool {
    let mut cause: Option<&(dyn StdError + 'static)> = Some(c);
    while let Some(e) = cause {
        if let Some(h) = e.downcast_ref::<hyper_util::client::legacy::Error>()
            && h.is_connect()
        {
            return true;
        }
        if e.is::<ResolveDnsError>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::HostUnreachable
                    | std::io::ErrorKind::NetworkUnreachable
                    | std::io::ErrorKind::AddrNotAvailable
            )
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Watches every attempt of one operation and remembers whether any failed in a way that
/// may have been applied. Add a clone to the operation (`.customize().interceptor(w.clone())`)
/// and ask [`AttemptWatch::verdict`] when it failed.
#[derive(Debug, Clone, Default)]
pub struct AttemptWatch(Arc<AtomicBool>);

impl AttemptWatch {
    /// Whether an attempt seen so far failed in a way that may have been applied.
    pub fn saw_maybe_applied(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Whether the operation that failed with `e` may have been applied: one of its
    /// attempts may have been, or the whole operation timed out (its last attempt was
    /// dropped unseen).
    pub fn verdict<E>(&self, e: &SdkError<E, HttpResponse>) -> bool {
        self.saw_maybe_applied() || matches!(e, SdkError::TimeoutError(_))
    }
}

impl Intercept for AttemptWatch {
    fn name(&self) -> &'static str {
        "sluice::AttemptWatch"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let Some(Err(e)) = context.output_or_error() else {
            return Ok(());
        };
        let status = context.response().map(|r| r.status().as_u16());
        let maybe = if e.is_timeout_error() {
            true
        } else if let Some(c) = e.as_connector_error() {
            connector_maybe_applied(c)
        } else {
            // An answer that says no or could not be read (its status says), or a failure
            // of the SDK's own steps before sending (signing, credentials: no answer).
            status.is_some_and(status_maybe_applied)
        };
        if maybe {
            self.0.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// A failed call's text and whether it may have been applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// What failed, for the error message.
    pub text: String,
    /// Whether the call may have been applied.
    pub uncertain: bool,
}

impl CallError {
    /// The failure `e` of a call whose attempts `watch` saw.
    pub fn sdk<E>(e: &SdkError<E, HttpResponse>, watch: &AttemptWatch) -> CallError
    where
        E: StdError + aws_smithy_types::error::metadata::ProvideErrorMetadata + 'static,
    {
        CallError {
            text: super::describe_error(e),
            uncertain: watch.verdict(e),
        }
    }

    /// A certain failure with text `text` (nothing was sent).
    pub fn certain(text: impl Into<String>) -> CallError {
        CallError {
            text: text.into(),
            uncertain: false,
        }
    }
}

impl From<String> for CallError {
    fn from(text: String) -> Self {
        CallError::certain(text)
    }
}

/// The HTTP answers a send's tests give a call (each once, the last repeated for the SDK's
/// retries) and whether the failure that follows may have been applied: a 5xx; a 4xx; a
/// 5xx retried by the SDK into a 4xx (the first attempt may have been applied).
#[cfg(any(test, feature = "test-support"))]
pub const ANSWERS_TABLE: &[(&[u16], bool)] =
    &[(&[500], true), (&[400], false), (&[503, 400], true)];

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_kinesis::Client;
    use aws_sdk_kinesis::config::retry::RetryConfig;
    use aws_sdk_kinesis::config::timeout::TimeoutConfig;
    use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
    use aws_sdk_kinesis::operation::list_streams::ListStreamsOutput;
    use aws_smithy_mocks::{RuleMode, mock, mock_client};
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn response(status: u16) -> HttpResponse {
        HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty())
    }

    #[test]
    fn final_errors_table() {
        type E = SdkError<std::io::Error, HttpResponse>;
        let io = |k| Box::new(std::io::Error::from(k));
        let table: Vec<(&str, E, bool)> = vec![
            ("construction", SdkError::construction_failure("no"), false),
            ("timeout", SdkError::timeout_error("slow"), true),
            (
                "reset after connecting",
                SdkError::dispatch_failure(ConnectorError::io(io(
                    std::io::ErrorKind::ConnectionReset,
                ))),
                true,
            ),
            (
                "refused",
                SdkError::dispatch_failure(ConnectorError::io(io(
                    std::io::ErrorKind::ConnectionRefused,
                ))),
                false,
            ),
            (
                "connector timeout",
                SdkError::dispatch_failure(ConnectorError::timeout("t".into())),
                true,
            ),
            (
                "unusable request",
                SdkError::dispatch_failure(ConnectorError::user("bad".into())),
                false,
            ),
            (
                "unreadable answer",
                SdkError::response_error("garbled", response(200)),
                true,
            ),
            (
                "unreadable refusal",
                SdkError::response_error("garbled", response(400)),
                false,
            ),
            (
                "an error in a 200",
                SdkError::service_error(std::io::Error::other("x"), response(200)),
                true,
            ),
            (
                "500",
                SdkError::service_error(std::io::Error::other("x"), response(500)),
                true,
            ),
            (
                "503",
                SdkError::service_error(std::io::Error::other("x"), response(503)),
                true,
            ),
            (
                "400 throttled",
                SdkError::service_error(std::io::Error::other("x"), response(400)),
                false,
            ),
            (
                "404",
                SdkError::service_error(std::io::Error::other("x"), response(404)),
                false,
            ),
        ];
        for (what, e, want) in table {
            assert_eq!(maybe_applied(&e), want, "{what}");
            assert_eq!(
                AttemptWatch::default().verdict(&e),
                what == "timeout",
                "{what}: an unwatched call only knows a timeout"
            );
        }
    }

    /// A client for `endpoint` with `attempts` attempts and a short attempt timeout.
    fn client(endpoint: &str, attempts: u32) -> Client {
        let conf = aws_sdk_kinesis::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("a", "b", None, None, "test"))
            .endpoint_url(endpoint)
            .http_client(crate::aws::https_client())
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(attempts)
                    .with_initial_backoff(Duration::from_millis(1)),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_millis(300))
                    .build(),
            )
            .build();
        Client::from_conf(conf)
    }

    async fn call(c: &Client) -> (bool, bool, String) {
        let watch = AttemptWatch::default();
        let e = c
            .list_streams()
            .customize()
            .interceptor(watch.clone())
            .send()
            .await
            .unwrap_err();
        (
            maybe_applied(&e),
            watch.verdict(&e),
            crate::aws::describe_error(&e),
        )
    }

    /// A loopback server that reads each request and then does `then` with the socket.
    async fn server(then: &'static str) -> (String, tokio::task::JoinHandle<()>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 65536];
                    let _ = s.read(&mut buf).await;
                    match then {
                        "close" => drop(s),
                        "half" => {
                            let _ = s
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{")
                                .await;
                        }
                        _ => tokio::time::sleep(Duration::from_secs(5)).await,
                    }
                });
            }
        });
        (url, task)
    }

    #[tokio::test]
    async fn real_connection_failures_are_told_apart() {
        // Refused: a port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (at_end, watched, text) = call(&client(&format!("http://127.0.0.1:{port}"), 2)).await;
        assert!(!at_end && !watched, "refused is never sent: {text}");

        for (then, why) in [
            ("close", "closed after the request went out"),
            ("half", "an answer cut short"),
            ("hang", "an attempt timeout"),
        ] {
            let (url, task) = server(then).await;
            let (at_end, watched, text) = call(&client(&url, 1)).await;
            assert!(at_end && watched, "{why}: {text}");
            task.abort();
        }
    }

    #[tokio::test]
    async fn inside_an_invocation_a_hung_call_is_cut_when_the_work_must_stop() {
        use sluice_engine::invocation::{WORK_MARGIN, with_deadline_since};
        use std::time::Instant;
        // An invocation that has run long enough for the whole margin to be kept.
        let long_ago = Instant::now() - Duration::from_secs(60);
        // The SDK's own attempt timeout is far: the invocation's is what cuts the call.
        let slow = |url: &str| {
            let conf = aws_sdk_kinesis::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new("us-east-1"))
                .credentials_provider(Credentials::new("a", "b", None, None, "test"))
                .endpoint_url(url)
                .http_client(crate::aws::https_client())
                .retry_config(
                    RetryConfig::standard()
                        .with_max_attempts(3)
                        .with_initial_backoff(Duration::from_millis(1)),
                )
                .timeout_config(
                    TimeoutConfig::builder()
                        .operation_attempt_timeout(Duration::from_secs(30))
                        .build(),
                )
                .build();
            Client::from_conf(conf)
        };
        let (url, task) = server("hang").await;
        let c = slow(&url);
        let started = Instant::now();
        let deadline = Instant::now() + WORK_MARGIN + Duration::from_millis(300);
        let (at_end, watched, text) = with_deadline_since(long_ago, deadline, call(&c)).await;
        assert!(started.elapsed() < Duration::from_secs(2), "{text}");
        assert!(at_end && watched, "cut after the request went out: {text}");
        assert!(
            text.contains("no answer in time: the Lambda invocation's deadline is near"),
            "{text}"
        );
        // With no time left the call is not made, and that is certain.
        let (at_end, watched, text) =
            with_deadline_since(long_ago, Instant::now() + WORK_MARGIN, call(&c)).await;
        assert!(!at_end && !watched, "never sent: {text}");
        assert!(
            text.contains("not sent: the Lambda invocation's deadline is near"),
            "{text}"
        );
        task.abort();
    }

    #[tokio::test]
    async fn a_retried_call_keeps_an_ambiguous_first_attempt() {
        let throttled = r#"{"__type":"LimitExceededException","message":"slow down"}"#;
        // 500, then throttled for good: the final error alone says "certain".
        let rule = mock!(Client::list_streams)
            .sequence()
            .http_status(500, None)
            .http_status(400, Some(throttled.into()))
            .times(2)
            .build();
        let c = mock_client!(aws_sdk_kinesis, RuleMode::Sequential, [&rule], |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        let watch = AttemptWatch::default();
        let e = c
            .list_streams()
            .customize()
            .interceptor(watch.clone())
            .send()
            .await
            .unwrap_err();
        assert_eq!(rule.num_calls(), 3);
        assert!(!maybe_applied(&e), "the last attempt was throttled");
        assert!(watch.verdict(&e), "the first attempt may have been applied");
        assert!(CallError::sdk(&e, &watch).uncertain);

        // Throttled, then fine: nothing ambiguous was seen.
        let rule = mock!(Client::list_streams)
            .sequence()
            .http_status(400, Some(throttled.into()))
            .output(|| {
                ListStreamsOutput::builder()
                    .has_more_streams(false)
                    .set_stream_names(Some(Vec::new()))
                    .build()
                    .unwrap()
            })
            .build();
        let c = mock_client!(aws_sdk_kinesis, RuleMode::Sequential, [&rule], |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(3)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        let watch = AttemptWatch::default();
        c.list_streams()
            .customize()
            .interceptor(watch.clone())
            .send()
            .await
            .unwrap();
        assert!(!watch.saw_maybe_applied());
    }
}
