//! The playground's HTTP API: routing, the guards every request passes, and the JSON in
//! and out.
//!
//! | route               | body in             | body out                               |
//! |---------------------|---------------------|----------------------------------------|
//! | `GET /`             |                     | the page (`page.html`)                 |
//! | `GET /play.js`      |                     | its script (`play.js`)                 |
//! | `GET /play.css`     |                     | its styles (`play.css`)                |
//! | `GET /api/examples` |                     | `[{name, config, input}]`              |
//! | `POST /api/run`     | `{config, input}`   | [`runner::RunReport`]                  |
//! | `POST /api/test`    | `{config}`          | [`runner::TestReport`]                 |
//! | `POST /api/fmt`     | `{config}`          | `{config}` (formatted)                 |
//!
//! Errors are `{"error": "..."}` with a 4xx status for what the request got wrong (422: the
//! config does not compile, build or run or needs an `--allow-*` flag; 413: too big; 408:
//! too slow; 401/403: no token, a wrong token or a foreign Host or Origin) and 5xx for the
//! server's own failures. A run that fails at run time is answered 422 with its
//! [`runner::RunReport`] (the steps before the failing transform, `failed` and `error`).
//!
//! Every request first passes [`sluice_cmd::play_guard`] (the token, the Host, the
//! Origin, the content type), and every response carries its security headers (no
//! framing, no inline script, no sniffing, no Referer). `GET /?token=…` with the right token
//! is answered with a redirect to `/` that sets the token's cookie. Runs, tests and formats
//! happen in worker processes ([`super::worker`]), two at a time, killed at the time limit;
//! what a config may reach is decided by the `--allow-*` flags ([`super::trust`]), which
//! the page shows in a banner. Nothing from a request ever becomes a process environment
//! variable (Substation's playground sets them); ext-strs come only from the command line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_cmd::play_guard::{Admit, Guard, SECURITY_HEADERS};
use tokio::sync::{OnceCell, Semaphore, oneshot};

use super::runner;
use super::trust::Trust;
use super::worker::{self, Job, Order};

/// The page; `<!--TRUST-->` in it becomes the banner of the `--allow-*` flags.
const PAGE: &str = include_str!("page.html");
/// The page's script and styles, files of their own because the CSP allows nothing inline.
const SCRIPT: &str = include_str!("play.js");
const STYLES: &str = include_str!("play.css");
/// The example offered when the server's directory has no `examples/`.
const BUILT_IN_EXAMPLE: &str = include_str!("../../../../examples/demo/config.jsonnet");

/// The largest request body accepted (config and input together).
pub(super) const MAX_BODY: usize = 1024 * 1024;
/// How long a request's body may take to arrive once its headers have.
const BODY_TIME: Duration = Duration::from_secs(30);
/// How long one run, or one config's tests, may take.
pub(super) const TIME_LIMIT: Duration = Duration::from_secs(10);
/// How long past [`TIME_LIMIT`] a worker may take before it is killed (its own limit
/// answers first when the pipeline is what is slow; compiling is not bounded from inside).
const GRACE: Duration = Duration::from_secs(1);
/// Workers at a time; more wait for a turn.
const CONCURRENT_RUNS: usize = 2;

/// What every request handler shares.
pub(super) struct Server {
    guard: Guard,
    ext: Vec<(String, String)>,
    trust: Trust,
    page: String,
    runs: Arc<Semaphore>,
    examples: OnceCell<Arc<Vec<Example>>>,
}

/// An example config with its sample input.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Example {
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
    pub(super) fn new(ext: Vec<(String, String)>, trust: Trust, guard: Guard) -> Server {
        Server {
            guard,
            ext,
            trust,
            page: PAGE.replace("<!--TRUST-->", &banner(trust)),
            runs: Arc::new(Semaphore::new(CONCURRENT_RUNS)),
            examples: OnceCell::new(),
        }
    }

    /// Answers one request; never fails (errors become JSON replies). Every reply carries
    /// [`SECURITY_HEADERS`].
    pub(super) async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
        let reply = match self.guard.check(req.method(), req.uri(), req.headers()) {
            Ok(Admit::Route) => self.route(req).await,
            Ok(Admit::SetCookie(cookie)) => Response::builder()
                .status(StatusCode::SEE_OTHER)
                .header(LOCATION, "/")
                .header(SET_COOKIE, cookie)
                .body(Full::new(Bytes::new()))
                .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
            Err(refused) => Err(ApiError(refused.status, refused.message)),
        };
        let mut resp = reply.unwrap_or_else(|ApiError(status, message)| {
            json_reply(status, &json!({ "error": message }))
        });
        for (name, value) in SECURITY_HEADERS {
            resp.headers_mut().insert(
                hyper::header::HeaderName::from_static(name),
                hyper::header::HeaderValue::from_static(value),
            );
        }
        Ok(resp)
    }

    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Reply {
        let path = req.uri().path().to_string();
        match (req.method().clone(), path.as_str()) {
            (Method::GET, "/") => asset("text/html; charset=utf-8", self.page.clone()),
            (Method::GET, "/play.js") => asset("text/javascript; charset=utf-8", SCRIPT.into()),
            (Method::GET, "/play.css") => asset("text/css; charset=utf-8", STYLES.into()),
            (Method::GET, "/api/examples") => {
                let examples = self.examples().await?;
                Ok(json_reply(StatusCode::OK, &*examples))
            }
            (Method::POST, "/api/run") => {
                let r: RunRequest = body(req).await?;
                self.in_worker(Job::Run {
                    config: r.config,
                    input: r.input,
                })
                .await
            }
            (Method::POST, "/api/test") => {
                let r: ConfigRequest = body(req).await?;
                self.in_worker(Job::Test { config: r.config }).await
            }
            (Method::POST, "/api/fmt") => {
                let r: ConfigRequest = body(req).await?;
                self.in_worker(Job::Fmt { config: r.config }).await
            }
            (
                _,
                "/" | "/play.js" | "/play.css" | "/api/examples" | "/api/run" | "/api/test"
                | "/api/fmt",
            ) => Err(ApiError(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{} {path}: method not allowed", req.method()),
            )),
            _ => Err(ApiError(
                StatusCode::NOT_FOUND,
                format!("{path}: not found"),
            )),
        }
    }

    /// Does `job` in a worker process ([`worker`]), one of [`CONCURRENT_RUNS`] at a time.
    /// The turn is held by a task of its own until the process has ended (answered, or
    /// been killed at [`TIME_LIMIT`] + [`GRACE`]), so that a request that goes away does
    /// not give back a turn whose work still runs; going away kills the process at once.
    async fn in_worker(self: &Arc<Self>, job: Job) -> Reply {
        let turn = self
            .runs
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| ApiError(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
        let order = Order {
            job,
            ext: self.ext.clone(),
            trust: self.trust,
            limit_ms: TIME_LIMIT.as_millis() as u64,
        };
        // Dropped with this future when the request goes away: the worker is then killed.
        let (_cancel, cancelled) = oneshot::channel::<()>();
        let answer = tokio::spawn(async move {
            let answer = worker::run(&order, TIME_LIMIT + GRACE, cancelled).await;
            drop(turn);
            answer
        })
        .await
        .map_err(|e| {
            ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the run stopped unexpectedly: {e}"),
            )
        })?;
        let status =
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Ok(json_reply(status, &answer.body))
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

/// The page's banner for the `--allow-*` flags given: empty when none.
fn banner(trust: Trust) -> String {
    let flags = trust.flags();
    if flags.is_empty() {
        return String::new();
    }
    let list: Vec<String> = flags.iter().map(|f| format!("<code>{f}</code>")).collect();
    format!(
        "<div id=\"trust\" role=\"alert\">This playground was started with {}: a config run \
         here can {}. Run only configs you have read.</div>",
        list.join(", "),
        [
            (trust.env, "read your environment variables"),
            (trust.files, "read and write your files"),
            (trust.network, "call the network as you"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, what)| *what)
        .collect::<Vec<_>>()
        .join(", ")
    )
}

fn asset(content_type: &'static str, text: String) -> Reply {
    Response::builder()
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(text)))
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// The request body as `T`, at most [`MAX_BODY`] bytes.
async fn body<T: serde::de::DeserializeOwned>(req: Request<Incoming>) -> Result<T, ApiError> {
    let collected =
        tokio::time::timeout(BODY_TIME, Limited::new(req.into_body(), MAX_BODY).collect())
            .await
            .map_err(|_| {
                ApiError(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request's body took longer than {} s to arrive",
                        BODY_TIME.as_secs()
                    ),
                )
            })?;
    let bytes = collected
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
///
/// Symbolic links are not followed (neither `examples` itself nor anything under it): a
/// link in the examples would otherwise show the page any file the server can read.
pub(super) fn read_examples(dir: &Path, ext: &[(String, String)]) -> Vec<Example> {
    let root = dir.join("examples");
    let mut files = Vec::new();
    if std::fs::symlink_metadata(&root).is_ok_and(|m| m.is_dir()) {
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

/// The `.jsonnet` files under `dir`, by the entries' own types (`DirEntry::file_type` does
/// not follow links, so a link is neither a directory to enter nor a file to read).
fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let Ok(kind) = e.file_type() else { continue };
        let p = e.path();
        if kind.is_dir() {
            walk(&p, out);
        } else if kind.is_file() && p.extension().is_some_and(|x| x == "jsonnet") {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_fall_back_to_the_built_in_demo() {
        let empty = tempfile::tempdir().unwrap();
        let list = read_examples(empty.path(), &[]);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].name, "examples/demo/config.jsonnet");
        assert!(list[0].input.contains("ConsoleLogin"), "{}", list[0].input);
    }

    #[test]
    fn examples_do_not_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret.jsonnet");
        std::fs::write(&secret, "{ transforms: [], secret: 'hunter2' }").unwrap();
        let ex = dir.path().join("examples");
        std::fs::create_dir_all(ex.join("real")).unwrap();
        std::fs::write(ex.join("real/config.jsonnet"), "{ transforms: [] }").unwrap();
        std::os::unix::fs::symlink(&secret, ex.join("link.jsonnet")).unwrap();
        std::os::unix::fs::symlink(dir.path(), ex.join("up")).unwrap();
        let names: Vec<String> = read_examples(dir.path(), &[])
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["examples/real/config.jsonnet"]);
        // A linked examples directory is not read at all.
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(&ex, other.path().join("examples")).unwrap();
        let list = read_examples(other.path(), &[]);
        assert_eq!(list[0].name, "examples/demo/config.jsonnet");
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn the_banner_names_the_flags() {
        assert_eq!(banner(Trust::default()), "");
        let b = banner(Trust {
            files: true,
            network: true,
            env: false,
        });
        assert!(
            b.contains("<code>--allow-files</code>, <code>--allow-network</code>"),
            "{b}"
        );
        assert!(
            b.contains("read and write your files, call the network as you"),
            "{b}"
        );
    }
}
