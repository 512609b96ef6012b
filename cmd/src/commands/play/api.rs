//! The playground's HTTP API: routing, the guards every request passes, and the JSON in
//! and out.
//!
//! | route               | body in             | body out                               |
//! |---------------------|---------------------|----------------------------------------|
//! | `GET /`             |                     | the page (`page.html`)                 |
//! | `GET /api/examples` |                     | `[{name, config, input}]`              |
//! | `POST /api/run`     | `{config, input}`   | [`runner::RunReport`]                  |
//! | `POST /api/test`    | `{config}`          | [`runner::TestReport`]                 |
//! | `POST /api/fmt`     | `{config}`          | `{config}` (formatted)                 |
//!
//! Errors are `{"error": "..."}` with a 4xx status for what the request got wrong (422: the
//! config does not compile, build or run; 413: too big; 408: too slow) and 5xx for the
//! server's own failures.
//!
//! Guards, because a server that runs configs runs code as the user: a POST must say
//! `Content-Type: application/json` (a web page the user visits cannot send that to another
//! origin without a CORS preflight, which this server never grants), an `Origin`, when
//! sent, must be this server's own, and on a loopback address the `Host` must be a loopback
//! name (a DNS-rebinding page arrives with its own host name). Nothing from a request ever
//! becomes a process environment variable (Substation's playground sets them); ext-strs
//! come only from the command line.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HOST, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_engine::Registry;
use tokio::sync::{OnceCell, Semaphore};

use super::runner;

/// The page, with its script and styles.
const PAGE: &str = include_str!("page.html");
/// The example offered when the server's directory has no `examples/`.
const BUILT_IN_EXAMPLE: &str = include_str!("../../../../examples/demo/config.jsonnet");

/// The largest request body accepted (config and input together).
pub const MAX_BODY: usize = 1024 * 1024;
/// How long one run, or one config's tests, may take.
pub const TIME_LIMIT: Duration = Duration::from_secs(10);
/// Runs at a time; more wait for a turn.
const CONCURRENT_RUNS: usize = 2;

/// What every request handler shares.
pub struct Server {
    registry: Registry,
    ext: Vec<(String, String)>,
    addr: SocketAddr,
    runs: Semaphore,
    examples: OnceCell<Arc<Vec<Example>>>,
}

/// An example config with its sample input.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// Its path under the server's directory (`examples/hello/config.jsonnet`).
    pub name: String,
    pub config: String,
    pub input: String,
}

/// An error for the page: a status and a message.
#[derive(Debug)]
struct ApiError(StatusCode, String);

impl ApiError {
    fn bad(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    /// The config or the run failed: the message as the CLI prints it (`{:#}`).
    fn config(e: anyhow::Error) -> ApiError {
        ApiError(StatusCode::UNPROCESSABLE_ENTITY, format!("{e:#}"))
    }
}

type Reply = Result<Response<Full<Bytes>>, ApiError>;

#[derive(Deserialize)]
struct RunRequest {
    config: String,
    #[serde(default)]
    input: String,
}

#[derive(Deserialize)]
struct ConfigRequest {
    config: String,
}

impl Server {
    pub fn new(ext: Vec<(String, String)>, addr: SocketAddr) -> Server {
        Server {
            registry: sluice_transforms::registry(),
            ext,
            addr,
            runs: Semaphore::new(CONCURRENT_RUNS),
            examples: OnceCell::new(),
        }
    }

    /// Answers one request; never fails (errors become JSON replies).
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
        let reply = match self.guard(&req) {
            Ok(()) => self.route(req).await,
            Err(e) => Err(e),
        };
        Ok(reply.unwrap_or_else(|ApiError(status, message)| {
            json_reply(status, &json!({ "error": message }))
        }))
    }

    fn guard(&self, req: &Request<Incoming>) -> Result<(), ApiError> {
        let forbidden = |m: String| ApiError(StatusCode::FORBIDDEN, m);
        let host = req
            .headers()
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if self.addr.ip().is_loopback() && !is_loopback_host(host) {
            return Err(forbidden(format!(
                "Host {host:?} is not a loopback name; open the playground at http://{}/",
                self.addr
            )));
        }
        if let Some(origin) = req.headers().get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if origin != format!("http://{host}") {
                return Err(forbidden(format!(
                    "requests from {origin:?} are not accepted; only the playground's own page \
                     may call its API"
                )));
            }
        }
        if req.method() == Method::POST {
            let json = req
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|c| c.to_str().ok())
                .is_some_and(|c| c.starts_with("application/json"));
            if !json {
                return Err(ApiError(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "the API takes Content-Type: application/json".into(),
                ));
            }
        }
        Ok(())
    }

    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Reply {
        let path = req.uri().path().to_string();
        match (req.method().clone(), path.as_str()) {
            (Method::GET, "/") => Ok(Response::builder()
                .header(CONTENT_TYPE, "text/html; charset=utf-8")
                .body(Full::new(Bytes::from_static(PAGE.as_bytes())))
                .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?),
            (Method::GET, "/api/examples") => {
                let examples = self.examples().await?;
                Ok(json_reply(StatusCode::OK, &*examples))
            }
            (Method::POST, "/api/run") => {
                let r: RunRequest = body(req).await?;
                let ext = self.ext.clone();
                let report = self
                    .blocking(move |registry| {
                        runner::run(registry, &r.config, &r.input, &ext, TIME_LIMIT)
                    })
                    .await?;
                Ok(json_reply(StatusCode::OK, &report))
            }
            (Method::POST, "/api/test") => {
                let r: ConfigRequest = body(req).await?;
                let ext = self.ext.clone();
                let report = self
                    .blocking(move |registry| runner::test(registry, &r.config, &ext, TIME_LIMIT))
                    .await?;
                Ok(json_reply(StatusCode::OK, &report))
            }
            (Method::POST, "/api/fmt") => {
                let r: ConfigRequest = body(req).await?;
                let config = self.blocking(move |_| runner::format(&r.config)).await?;
                Ok(json_reply(StatusCode::OK, &json!({ "config": config })))
            }
            (_, "/" | "/api/examples" | "/api/run" | "/api/test" | "/api/fmt") => Err(ApiError(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{} {path}: method not allowed", req.method()),
            )),
            _ => Err(ApiError(
                StatusCode::NOT_FOUND,
                format!("{path}: not found"),
            )),
        }
    }

    /// Runs `work` on a blocking thread, one of [`CONCURRENT_RUNS`] at a time, within
    /// [`TIME_LIMIT`] (plus a second for the work's own limit to answer first). A run past the
    /// limit is answered with 408; its thread is left to finish on its own (Jsonnet
    /// evaluation cannot be interrupted), and its turn is given back.
    async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Registry) -> anyhow::Result<T> + Send + 'static,
    ) -> Result<T, ApiError> {
        let _turn = self
            .runs
            .acquire()
            .await
            .map_err(|e| ApiError(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
        let me = self.clone();
        let task = tokio::task::spawn_blocking(move || work(&me.registry));
        match tokio::time::timeout(TIME_LIMIT + Duration::from_secs(1), task).await {
            Err(_) => Err(ApiError(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the run took longer than {} s and was abandoned (sluice play's time limit)",
                    TIME_LIMIT.as_secs()
                ),
            )),
            Ok(Err(join)) => Err(ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the run stopped unexpectedly: {join}"),
            )),
            Ok(Ok(result)) => result.map_err(|e| {
                if e.is::<runner::TooSlow>() {
                    ApiError(StatusCode::REQUEST_TIMEOUT, format!("{e:#}"))
                } else {
                    ApiError::config(e)
                }
            }),
        }
    }

    /// The examples, read once (the first time the page asks).
    async fn examples(self: &Arc<Self>) -> Result<Arc<Vec<Example>>, ApiError> {
        let me = self.clone();
        self.examples
            .get_or_try_init(|| async move {
                let ext = me.ext.clone();
                tokio::task::spawn_blocking(move || Arc::new(read_examples(Path::new("."), &ext)))
                    .await
                    .map_err(|e| {
                        ApiError(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("reading the examples stopped unexpectedly: {e}"),
                        )
                    })
            })
            .await
            .cloned()
    }
}

/// Whether `host` (a `Host` header: name and port) names this machine's loopback.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The request body as `T`, at most [`MAX_BODY`] bytes.
async fn body<T: serde::de::DeserializeOwned>(req: Request<Incoming>) -> Result<T, ApiError> {
    let bytes = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                ApiError(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request is larger than {} KiB (sluice play's input limit)",
                        MAX_BODY / 1024
                    ),
                )
            } else {
                ApiError::bad(format!("reading the request: {e}"))
            }
        })?
        .to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad(format!("the request's JSON: {e}")))
}

fn json_reply(status: StatusCode, value: &impl Serialize) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(value)
        .unwrap_or_else(|e| format!("{{\"error\":\"serializing the reply: {e}\"}}").into_bytes());
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

/// Every config under `dir/examples` (`.jsonnet`, in path order) with its sample input;
/// the built-in demo alone when there is no such directory. An example that does not
/// compile is listed with no input (the page shows its error when it is run).
pub fn read_examples(dir: &Path, ext: &[(String, String)]) -> Vec<Example> {
    let root = dir.join("examples");
    let mut files = Vec::new();
    if root.is_dir() {
        walk(&root, &mut files);
    }
    files.sort();
    let examples: Vec<Example> = files
        .iter()
        .filter_map(|f| {
            let config = std::fs::read_to_string(f).ok()?;
            let name = f
                .strip_prefix(dir)
                .unwrap_or(f)
                .to_string_lossy()
                .into_owned();
            Some(example(name, config, ext))
        })
        .collect();
    if examples.is_empty() {
        return vec![example(
            "examples/demo/config.jsonnet".into(),
            BUILT_IN_EXAMPLE.into(),
            ext,
        )];
    }
    examples
}

fn example(name: String, config: String, ext: &[(String, String)]) -> Example {
    let input = sluice_config::compile_text(runner::CONFIG_NAME, &config, ext, None)
        .map(|json| runner::sample_input(&json))
        .unwrap_or_default();
    Example {
        name,
        config,
        input,
    }
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for p in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "jsonnet") {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for (host, want) in [
            ("127.0.0.1:8080", true),
            ("localhost:8080", true),
            ("LOCALHOST", true),
            ("[::1]:8080", true),
            ("127.1.2.3", true),
            ("evil.example:8080", false),
            ("192.168.1.2:8080", false),
            ("", false),
        ] {
            assert_eq!(is_loopback_host(host), want, "{host}");
        }
    }

    #[test]
    fn examples_fall_back_to_the_built_in_demo() {
        let empty = tempfile::tempdir().unwrap();
        let list = read_examples(empty.path(), &[]);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].name, "examples/demo/config.jsonnet");
        assert!(list[0].input.contains("ConsoleLogin"), "{}", list[0].input);
    }
}
