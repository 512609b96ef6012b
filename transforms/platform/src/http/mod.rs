//! What the HTTP transforms (`enrich_http_get`, `enrich_http_post`, `send_http_post`)
//! share: their common settings (`url`, `headers`, `request.timeout`, `retry`,
//! `accept_client_errors`), the client, and one request with retries.
//!
//! The client is the AWS SDK's own hyper 1 + rustls 0.23 (`ring`) connector, already in
//! the build for the AWS transforms, so there is no second HTTP or TLS stack; it trusts the
//! system's certificates and uses no proxy. `url` and header values are [`Template`]s:
//! `${SECRET:id}` is filled from the secrets cache on every request (so a refreshed secret
//! is used at once; Substation fills headers once, when the transform is built) and
//! `${DATA}` where the transform says.
//!
//! Data in URLs (docs/security.md): `${DATA}` stands only after `scheme://host/` (a config
//! that puts it in the scheme or authority is refused) and is percent-encoded there, so
//! data is one path segment or query value and never changes the scheme, host or port or
//! adds segments. A `url` that is `${DATA}` alone (Substation's way to request whatever URL
//! the data holds) keeps that meaning: the data must be an `http://` or `https://` URL, and
//! such a transform cannot carry a secret in its headers, since data chooses the host.
//! A failed answer's body is shown redacted and cut after redaction, and not at all when the
//! request carried a secret (`secrets::redact_cut`).
//!
//! Retries follow Substation's client (hashicorp retryablehttp): a transport error, a
//! timeout, 429 and every 5xx but 501 are retried, `retry.count` times (default
//! [`DEFAULT_RETRIES`]), waiting `retry.delay` (default 1s) doubled per retry up to
//! [`MAX_BACKOFF`], or what a `Retry-After` header in seconds asks (up to the same bound).
//! Each attempt, the answer's body included, is bounded by `request.timeout` (default
//! [`DEFAULT_TIMEOUT`]) and an answer's body by [`MAX_RESPONSE_BYTES`].
//!
//! Where sluice differs from Substation: a 4xx answer is an error (it names the status and
//! the start of the body) unless `accept_client_errors` is true; Substation treats every
//! 4xx as success, so a rejected send is lost silently. A 3xx answer is an error too
//! (redirects are not followed). Errors show the URL as configured, placeholders unfilled,
//! and pass through `secrets::redact`, so no secret reaches a log.

use std::sync::OnceLock;
use std::time::Duration;

use aws_smithy_http_client::{Connector, tls};
use aws_smithy_runtime_api::client::http::HttpConnector;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::http::Headers;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use serde::Deserialize;
use sluice_engine::settings::GoDuration;
use sluice_engine::{Build, ConfigError, TransformError, Value};

use crate::secrets::{self, Template};

/// Retries after the first attempt when `retry.count` is not set (retryablehttp's).
pub const DEFAULT_RETRIES: u32 = 4;
/// The first wait before a retry when `retry.delay` is not set.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest one attempt may take when `request.timeout` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer body read.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// `request`: per-attempt limits.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct RequestSettings {
    /// The longest one attempt may take (connect, send, answer and its body).
    pub timeout: Option<GoDuration>,
}

/// `retry`: how often and how long to wait between attempts.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct RetrySettings {
    /// Retries after the first attempt.
    pub count: Option<u32>,
    /// The first wait; it doubles per retry.
    pub delay: Option<GoDuration>,
}

/// The settings every HTTP transform takes, gathered from its settings struct.
#[derive(Debug, Default)]
pub struct HttpOptions {
    /// `url` (required).
    pub url: Option<String>,
    /// `headers`: an object of name → value, or Substation v1's list of `{key, value}`.
    pub headers: Option<Value>,
    /// `request`.
    pub request: RequestSettings,
    /// `retry`.
    pub retry: RetrySettings,
    /// `accept_client_errors`: treat 4xx as success, as Substation does.
    pub accept_client_errors: bool,
}

/// An answer.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: Headers,
    /// The body.
    pub body: Vec<u8>,
}

/// A request that failed for good: why, and whether it may have been applied all the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong (the status and the start of the body, or the transport error), with
    /// the number of attempts when there was more than one.
    pub text: String,
    /// Whether some attempt may have reached the server and been applied: a transport
    /// error, a timeout or a 5xx answer (a 4xx, 429 or 3xx answer says that attempt was
    /// not, but not that an earlier one was not).
    pub uncertain: bool,
}

/// The HTTP client with its limits: one attempt's timeout and the retries. Its connector
/// is made on first use and shared by every request through it.
pub struct Client {
    timeout: Duration,
    retries: u32,
    backoff: Duration,
    connector: OnceLock<Connector>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish()
    }
}

/// A configured HTTP endpoint: the URL and header templates, and the client.
pub struct Endpoint {
    url: Template,
    headers: Vec<(String, Template)>,
    accept_client_errors: bool,
    client: Client,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url.as_str())
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("client", &self.client)
            .finish()
    }
}

impl Endpoint {
    /// Builds it from `o`; errors name the field.
    pub fn build(b: &Build<'_>, o: HttpOptions) -> Result<Self, ConfigError> {
        let url = o
            .url
            .filter(|u| !u.is_empty())
            .ok_or_else(|| b.field_error("url", "missing required option: the URL to request"))?;
        let url = Template::parse(&url).map_err(|m| b.field_error("url", m))?;
        let start = url.as_str().trim_start();
        let scheme_ok = ["http://", "https://", "${"].iter().any(|p| {
            start
                .get(..p.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(p))
        });
        if !scheme_ok {
            return Err(b.field_error(
                "url",
                format!("{:?} is not an http:// or https:// URL", url.as_str()),
            ));
        }
        let headers = parse_headers(b, o.headers)?;
        if url.uses_data() && url.data_in_authority() && !url.is_data_alone() {
            return Err(b.field_error(
                "url",
                format!(
                    "{:?}: ${{DATA}} may stand only after scheme://host/ (in the path, query or \
                     fragment), where it is percent-encoded; before it, data would choose the \
                     host (a URL wholly from data is \"${{DATA}}\" alone)",
                    url.as_str()
                ),
            ));
        }
        if url.is_data_alone()
            && let Some((name, _)) = headers
                .iter()
                .find(|(_, v)| v.secret_ids().next().is_some())
        {
            return Err(b.field_error(
                &format!("headers.{name}"),
                "the URL is ${DATA}: data chooses the host, so the request cannot carry a \
                 secret (${SECRET:...}) to it",
            ));
        }
        let timeout = o.request.timeout.map(|d| d.0).unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            return Err(b.field_error("request.timeout", "must be more than 0"));
        }
        Ok(Endpoint {
            url,
            headers,
            accept_client_errors: o.accept_client_errors,
            client: Client::new(
                timeout,
                o.retry.count.unwrap_or(DEFAULT_RETRIES),
                o.retry.delay.map(|d| d.0).unwrap_or(DEFAULT_BACKOFF),
            ),
        })
    }

    /// The URL template.
    pub fn url(&self) -> &Template {
        &self.url
    }

    /// What `${DATA}` in the URL stands for in `msg`: the text of the value at `source`, or
    /// the whole data without one. `Some(None)` when the URL has no `${DATA}`; `None` when
    /// the value is missing (the message then passes through unchanged, as in Substation).
    pub fn data_of(
        &self,
        source: Option<&sluice_engine::Key>,
        msg: &sluice_engine::Message,
    ) -> Option<Option<String>> {
        if !self.url.uses_data() {
            return Some(None);
        }
        let text = match source {
            Some(k) => msg
                .get(k)
                .map(|v| sluice_engine::value::to_text(&v).into_owned())?,
            None => String::from_utf8_lossy(msg.data()).into_owned(),
        };
        Some(Some(text))
    }

    /// `method` to the URL (`${DATA}` filled with `data`) with `body`, retried as the module
    /// documentation says. The error names the method and the URL as configured.
    pub async fn call(
        &self,
        method: &str,
        data: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<Response, TransformError> {
        let fail = |why: String| {
            TransformError::failed(secrets::redact(&format!(
                "{method} {}: {why}",
                self.url.as_str()
            )))
        };
        let url = self.url.render_url(data).map_err(|e| fail(e.to_string()))?;
        if self.url.is_data_alone() && !is_http_url(&url) {
            return Err(fail(
                "the URL is ${DATA} and the data is no http:// or https:// URL".to_string(),
            ));
        }
        let mut headers = Vec::with_capacity(self.headers.len() + 1);
        for (name, value) in &self.headers {
            let v = value
                .render(data)
                .map_err(|e| fail(format!("header {name}: {e}")))?;
            headers.push((name.as_str(), v));
        }
        let secret = self.url.secret_ids().next().is_some()
            || self
                .headers
                .iter()
                .any(|(_, v)| v.secret_ids().next().is_some())
            || body.is_some_and(secrets::holds_secret);
        let body = body.map_or_else(SdkBody::empty, |b| SdkBody::from(b.to_vec()));
        let req = request(method, &url, &headers, body).map_err(fail)?;
        let secret = secret || carries_credential(&req);
        let accept_client_errors = self.accept_client_errors;
        let answer = |status: u16| {
            (200..300).contains(&status)
                || (accept_client_errors && (400..500).contains(&status) && status != 429)
        };
        self.client
            .execute_carrying(req, answer, self.url.as_str(), secret)
            .await
            .map_err(|f| fail(f.text))
    }
}

impl Client {
    /// A client whose attempts each take at most `timeout`, retried `retries` times after
    /// the first, waiting `backoff` doubled per retry.
    pub fn new(timeout: Duration, retries: u32, backoff: Duration) -> Self {
        Client {
            timeout,
            retries,
            backoff,
            connector: OnceLock::new(),
        }
    }

    fn connector(&self) -> &Connector {
        self.connector.get_or_init(|| {
            Connector::builder()
                .tls_provider(tls::Provider::Rustls(
                    tls::rustls_provider::CryptoMode::Ring,
                ))
                .build()
        })
    }

    /// Sends `req` until it gets an answer whose status `answer` accepts, retrying
    /// transport errors, timeouts, 429 and 5xx but 501 as the module documentation says;
    /// any other status fails at once. `what` names the request in debug logs. A request
    /// with a header that usually holds a credential ([`carries_credential`]) carries a
    /// secret (see [`Client::execute_carrying`]).
    pub async fn execute(
        &self,
        req: HttpRequest,
        answer: impl Fn(u16) -> bool,
        what: &str,
    ) -> Result<Response, Failure> {
        let secret = carries_credential(&req);
        self.execute_carrying(req, answer, what, secret).await
    }

    /// [`Client::execute`], told whether the request carries a secret (in its URL, headers
    /// or body): the body of a failed answer to such a request may echo the secret, so it
    /// is left out of the error.
    pub async fn execute_carrying(
        &self,
        req: HttpRequest,
        answer: impl Fn(u16) -> bool,
        what: &str,
        secret: bool,
    ) -> Result<Response, Failure> {
        let mut attempt = 0u32;
        // Whether an attempt so far may have been applied: a later attempt's clear "no"
        // (a 429, a refused connection) does not undo an earlier timeout or 5xx.
        let mut maybe_applied = false;
        loop {
            let Some(this) = req.try_clone() else {
                return Err(Failure {
                    text: "the request cannot be repeated".to_string(),
                    uncertain: maybe_applied,
                });
            };
            // Inside a Lambda invocation an attempt ends when the work must stop, so that
            // the function answers in time; with no time left it is not made.
            let limit = match sluice_engine::invocation::call_deadline() {
                Some(at) => match at.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        let tries = if attempt > 0 {
                            format!(" after {attempt} attempts")
                        } else {
                            String::new()
                        };
                        return Err(Failure {
                            text: format!(
                                "not sent{tries}: the invocation's work had to stop {:?} before its deadline, to answer in time",
                                sluice_engine::invocation::WORK_MARGIN
                            ),
                            uncertain: maybe_applied,
                        });
                    }
                },
                None => None,
            };
            let (retryable, uncertain, why, retry_after) = match self.attempt(this, limit).await {
                Ok(r) if answer(r.status) => return Ok(r.into()),
                Ok(r) if r.status == 429 || (r.status >= 500 && r.status != 501) => (
                    true,
                    r.status != 429,
                    status_error(&r, secret),
                    r.retry_after,
                ),
                Ok(r) if (300..400).contains(&r.status) => (
                    false,
                    false,
                    format!("{} (redirects are not followed)", status_error(&r, secret)),
                    None,
                ),
                Ok(r) => (false, r.status >= 500, status_error(&r, secret), None),
                Err(e) => (true, true, e, None),
            };
            maybe_applied |= uncertain;
            let wait = retry_after.unwrap_or_else(|| {
                self.backoff
                    .saturating_mul(2u32.saturating_pow(attempt))
                    .min(MAX_BACKOFF)
            });
            let wait = wait.min(MAX_BACKOFF);
            // Inside an invocation, a wait that would take the work past the time kept to
            // answer is not waited: the request fails now (the source redelivers it).
            let out_of_time = sluice_engine::invocation::would_overrun(wait);
            if !retryable || attempt >= self.retries || out_of_time {
                let tries = if attempt > 0 {
                    format!(" (after {} attempts)", attempt + 1)
                } else {
                    String::new()
                };
                let stopped = if retryable && attempt < self.retries {
                    " (not retried: the invocation's deadline is near)"
                } else {
                    ""
                };
                return Err(Failure {
                    text: format!("{why}{tries}{stopped}"),
                    uncertain: maybe_applied,
                });
            }
            tracing::debug!(
                request = what,
                attempt = attempt + 1,
                error = %secrets::redact(&why),
                "HTTP request failed; retrying"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// One attempt, bounded by the timeout, and by `limit` when that is shorter (what an
    /// invocation has left for its work).
    async fn attempt(&self, req: HttpRequest, limit: Option<Duration>) -> Result<Attempt, String> {
        let call = async {
            let resp = self
                .connector()
                .call(req)
                .await
                .map_err(|e| format!("request failed: {}", error_chain(&e)))?;
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let retry_after = headers
                .get("retry-after")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = read_limited(ByteStream::new(resp.into_body())).await?;
            Ok(Attempt {
                status,
                headers,
                body,
                retry_after,
            })
        };
        let cut = limit.filter(|l| *l < self.timeout);
        tokio::time::timeout(cut.unwrap_or(self.timeout), call)
            .await
            .unwrap_or_else(|_| {
                Err(match cut {
                    Some(_) => format!(
                        "no complete answer before the invocation's work had to stop ({:?} before its deadline, to answer in time)",
                        sluice_engine::invocation::WORK_MARGIN
                    ),
                    None => format!(
                        "no complete answer within the timeout of {:?}",
                        self.timeout
                    ),
                })
            })
    }
}

/// The request (checked once, before the first attempt).
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, String)],
    body: SdkBody,
) -> Result<HttpRequest, String> {
    let mut req = HttpRequest::new(body);
    req.set_method(method).map_err(|e| e.to_string())?;
    req.set_uri(url)
        .map_err(|_| "the URL is not valid once its placeholders are filled".to_string())?;
    let h = req.headers_mut();
    h.insert("user-agent", concat!("sluice/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        h.try_insert(name.to_string(), value.clone())
            .map_err(|_| format!("header {name}: not a valid header value"))?;
    }
    Ok(req)
}

/// One attempt's answer.
struct Attempt {
    status: u16,
    headers: Headers,
    body: Vec<u8>,
    retry_after: Option<Duration>,
}

impl From<Attempt> for Response {
    fn from(a: Attempt) -> Self {
        Response {
            status: a.status,
            headers: a.headers,
            body: a.body,
        }
    }
}

/// Whether `req` has a header that usually holds a credential (`Authorization`,
/// `Proxy-Authorization`, `Cookie`).
pub fn carries_credential(req: &HttpRequest) -> bool {
    ["authorization", "proxy-authorization", "cookie"]
        .iter()
        .any(|h| req.headers().contains_key(*h))
}

/// Whether `url` starts with `http://` or `https://` (any case).
fn is_http_url(url: &str) -> bool {
    ["http://", "https://"].iter().any(|p| {
        url.get(..p.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(p))
    })
}

/// The most characters of an answer's body an error shows.
const BODY_IN_ERRORS: usize = 200;

/// `HTTP <status>: <start of the body>`, the body redacted before it is cut
/// (`secrets::redact_cut`); without the body when the request carried a secret
/// (`secret`), which the answer may echo in a form no redaction knows.
fn status_error(a: &Attempt, secret: bool) -> String {
    let text = String::from_utf8_lossy(&a.body);
    let text = text.trim();
    if text.is_empty() {
        format!("HTTP {}", a.status)
    } else if secret {
        format!(
            "HTTP {} (body omitted: the request carried a secret)",
            a.status
        )
    } else {
        format!(
            "HTTP {}: {}",
            a.status,
            secrets::redact_cut(text, BODY_IN_ERRORS)
        )
    }
}

/// The body, refused past [`MAX_RESPONSE_BYTES`].
async fn read_limited(mut body: ByteStream) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| format!("reading the answer: {}", error_chain(&e)))?
    {
        data.extend_from_slice(&chunk);
        if data.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "the answer is larger than {MAX_RESPONSE_BYTES} bytes"
            ));
        }
    }
    Ok(data)
}

/// An error and its causes, `: `-separated.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// `headers`: an object (`{"Authorization": "Bearer ${SECRET:token}"}`), or Substation
/// v1's list of `{key, value}`; values are templates.
fn parse_headers(b: &Build<'_>, v: Option<Value>) -> Result<Vec<(String, Template)>, ConfigError> {
    let pairs: Vec<(String, String, String)> = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .into_iter()
            .map(|(k, v)| {
                let field = format!("headers.{k}");
                match v {
                    Value::String(s) => Ok((field, k.to_string(), s.into_string())),
                    other => Err(b.field_error(
                        &field,
                        format!("a header value must be a string, not {other}"),
                    )),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let field = format!("headers[{i}]");
                let get = |k: &str| item.get(k).and_then(|v| v.as_str()).map(str::to_string);
                match (get("key"), get("value")) {
                    (Some(k), Some(v)) => Ok((field, k, v)),
                    _ => Err(b.field_error(
                        &field,
                        "a header in a list must be an object with string `key` and `value`",
                    )),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(b.field_error(
                "headers",
                format!("must be an object of header names to values, not {other}"),
            ));
        }
    };
    let mut out = Vec::with_capacity(pairs.len());
    for (field, name, value) in pairs {
        let valid_name = !name.is_empty()
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c));
        if !valid_name {
            return Err(b.field_error(&field, format!("{name:?} is not a valid header name")));
        }
        let t = Template::parse(&value).map_err(|m| b.field_error(&field, m))?;
        out.push((name, t));
    }
    Ok(out)
}

/// The value an answer's body is written as, by Substation's `SetValue` of the bytes
/// [`body_data`] gives: JSON as that JSON (an object or array keeping its compacted text, so
/// numbers and escapes stay as the server wrote them), anything else as SJSON types bytes.
pub fn body_value(body: &[u8]) -> Value {
    let data = body_data(body.to_vec());
    sluice_engine::json::parse::from_slice(&data)
        .unwrap_or_else(|| sluice_engine::value::from_bytes(&data))
}

/// The body as data, as Substation's HTTP enrichments make it: JSON compacted as Go's
/// `json.Compact` does (white space outside strings removed, nothing else changed), anything
/// else the bytes as they came.
pub fn body_data(body: Vec<u8>) -> Vec<u8> {
    if sluice_engine::json::parse::from_slice(&body).is_none() {
        return body;
    }
    compact(&body)
}

/// Valid JSON `text` without the white space outside its strings.
fn compact(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_compacted_as_go_compacts_them() {
        for (body, data, value) in [
            (
                "{ \"n\" : 1.50,\n \"s\": \"caf\\u00e9 \\\" x\", \"a\": [ 1e3 , true ] }\n",
                "{\"n\":1.50,\"s\":\"caf\\u00e9 \\\" x\",\"a\":[1e3,true]}",
                "{\"n\":1.50,\"s\":\"caf\\u00e9 \\\" x\",\"a\":[1e3,true]}",
            ),
            (" [ \"a b\" ] ", "[\"a b\"]", "[\"a b\"]"),
            (" 7 ", "7", "7"),
            ("\"a\\\\\" ", "\"a\\\\\"", "\"a\\\\\""),
            ("plain words", "plain words", "\"plain words\""),
            ("{ not json", "{ not json", "\"{ not json\""),
            ("", "", "\"\""),
        ] {
            assert_eq!(
                String::from_utf8(body_data(body.as_bytes().to_vec())).unwrap(),
                data,
                "{body:?}"
            );
            let v = body_value(body.as_bytes());
            assert_eq!(sluice_engine::value::to_json_text(&v), value, "{body:?}");
        }
    }

    fn post(url: &str) -> HttpRequest {
        request("POST", url, &[], SdkBody::from("x")).unwrap()
    }

    #[tokio::test]
    async fn inside_an_invocation_attempts_end_when_the_work_must_stop() {
        use sluice_engine::invocation::{WORK_MARGIN, with_deadline_since};
        use std::time::Instant;
        // An invocation that has run long enough for the whole margin to be kept.
        let long_ago = Instant::now() - Duration::from_secs(60);
        let slow = test_server::Server::start(|_| {
            test_server::Reply::ok("late").after(Duration::from_secs(5))
        });
        let client = Client::new(Duration::from_secs(10), 4, Duration::from_millis(1));
        // 300 ms of work left: the attempt is cut there, and not retried.
        let deadline = Instant::now() + WORK_MARGIN + Duration::from_millis(300);
        let started = Instant::now();
        let f = with_deadline_since(
            long_ago,
            deadline,
            client.execute(post(&slow.url()), |s| s == 200, "t"),
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(1500), "{f:?}");
        assert!(f.uncertain, "the request went out: {f:?}");
        assert!(
            f.text
                .starts_with("no complete answer before the invocation's work had to stop")
                && f.text
                    .ends_with("(not retried: the invocation's deadline is near)"),
            "{}",
            f.text
        );
        assert_eq!(slow.requests().len(), 1);
        // No time left: not sent at all.
        let f = with_deadline_since(
            long_ago,
            Instant::now() + WORK_MARGIN,
            client.execute(post(&slow.url()), |s| s == 200, "t"),
        )
        .await
        .unwrap_err();
        assert!(!f.uncertain, "{f:?}");
        assert!(f.text.starts_with("not sent: "), "{}", f.text);
        assert_eq!(slow.requests().len(), 1);
    }

    #[tokio::test]
    async fn an_earlier_attempt_that_may_have_been_applied_keeps_the_failure_uncertain() {
        let n = std::sync::atomic::AtomicUsize::new(0);
        let server = test_server::Server::start(move |_| {
            match n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => test_server::Reply::status(503, "busy"),
                _ => test_server::Reply::status(429, "slow down"),
            }
        });
        let client = Client::new(Duration::from_secs(5), 1, Duration::from_millis(1));
        let f = client
            .execute(post(&server.url()), |s| s == 200, "t")
            .await
            .unwrap_err();
        assert_eq!(f.text, "HTTP 429: slow down (after 2 attempts)");
        assert!(f.uncertain, "the 503 may have been applied");
    }
    /// What an error shows of a failed answer's body: redacted before it is cut, or nothing
    /// when the request carried a secret.
    #[test]
    fn status_errors_table() {
        secrets::store(
            "status-error-key",
            secrets::Secret::new("tok/\"en-9876"),
            Duration::ZERO,
        );
        let attempt = |body: &str| Attempt {
            status: 401,
            headers: Headers::new(),
            body: body.as_bytes().to_vec(),
            retry_after: None,
        };
        let long = "y".repeat(190);
        // (body, the request carried a secret, the error)
        let cases = [
            ("", false, "HTTP 401".to_string()),
            ("nope", false, "HTTP 401: nope".into()),
            (
                r#"{"msg":"bad key tok/\"en-9876"}"#,
                false,
                r#"HTTP 401: {"msg":"bad key <redacted>"}"#.into(),
            ),
            (
                "key=tok%2F%22en-9876",
                false,
                "HTTP 401: key=<redacted>".into(),
            ),
            (
                &format!("{long} tok/\"en-9876 more"),
                false,
                // Cut first, the secret's first 8 characters would show.
                format!("HTTP 401: {long} <redacted>..."),
            ),
            (
                "anything at all",
                true,
                "HTTP 401 (body omitted: the request carried a secret)".into(),
            ),
        ];
        for (body, secret, want) in cases {
            assert_eq!(status_error(&attempt(body), secret), want, "{body}");
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
pub mod test_server;
