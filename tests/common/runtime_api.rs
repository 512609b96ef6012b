//! A Lambda runtime API of the test's own, and a stub HTTP sink, for the tests that hold the
//! function to its deadline (`tests/lambda_once.rs`).
//!
//! cargo-lambda's emulator (`tests/lambda_e2e.rs`) gives every invocation its own fixed
//! timeout and cannot say when an answer came relative to it. [`RuntimeApi`] serves the
//! routes the bootstrap uses (`/2018-06-01/runtime/invocation/next`, `.../response`,
//! `.../error`, `/2018-06-01/runtime/init/error`; the Extensions API's registration is
//! refused, as a local emulator may, so the function logs a warning and goes on) and hands
//! each invocation out with the deadline the test asked for (`Lambda-Runtime-Deadline-Ms`),
//! set when the function picks it up, as Lambda does. It records when each answer came, so
//! a test measures it against that deadline. What Lambda does at the deadline (it kills the
//! environment) and its sources' retries (the same event again) are the test's to play.
//!
//! [`Sink`] is an HTTP endpoint for `send_http_post`: it answers 200 at once to each body,
//! except bodies holding one of the strings it is told to stall on, which it holds without
//! an answer until the test drops it. It records what it accepted, with when.
//!
//! Both speak just enough HTTP/1.1 for hyper's clients: keep-alive, `Content-Length` and
//! chunked request bodies, one thread per connection.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// One HTTP request as read from a connection.
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// Reads one request from `r`; `None` when the connection closed first.
fn read_request(r: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" {
                length = value.parse().ok()?;
            } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                // The last chunk's CRLF was read; trailers are not sent by these clients.
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some(Request { method, path, body })
}

/// Writes an answer with `status`, `headers` and `body`.
fn write_response(w: &mut TcpStream, status: u16, headers: &[(String, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Length: {}\r\n",
        if status < 400 { "OK" } else { "Error" },
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = w.write_all(head.as_bytes());
    let _ = w.write_all(body);
    let _ = w.flush();
}

/// What a handler does with one request.
enum Reply {
    /// Answer it.
    Answer(u16, Vec<(String, String)>, Vec<u8>),
    /// Close the connection without an answer.
    Close,
}

/// Serves `listener` on a thread of its own, each connection on its own thread, each
/// request answered by `handle` (given the connection, to check whether the peer is still
/// there while it waits).
fn serve(
    listener: TcpListener,
    handle: impl Fn(Request, &TcpStream) -> Reply + Send + Sync + 'static,
) {
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let handle = handle.clone();
            std::thread::spawn(move || {
                let Ok(read_half) = conn.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(read_half);
                let mut conn = conn;
                while let Some(req) = read_request(&mut reader) {
                    match handle(req, &conn) {
                        Reply::Answer(status, headers, body) => {
                            write_response(&mut conn, status, &headers, &body)
                        }
                        Reply::Close => {
                            let _ = conn.shutdown(Shutdown::Both);
                            return;
                        }
                    }
                }
            });
        }
    });
}

/// Whether the peer of `conn` closed it (it sends nothing while it waits for an answer).
fn peer_gone(conn: &TcpStream) -> bool {
    if conn.set_nonblocking(true).is_err() {
        return true;
    }
    let mut b = [0u8; 1];
    let gone = match conn.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    let _ = conn.set_nonblocking(false);
    gone
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// How an invocation was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `/response`, with its body.
    Response(Value),
    /// `/error`, with its body (`{"errorType","errorMessage"}`).
    Error(Value),
}

/// An invocation's answer and its timing.
#[derive(Debug, Clone)]
pub struct Answer {
    pub outcome: Outcome,
    /// When the function picked the invocation up.
    pub started: SystemTime,
    /// The deadline it was given (`Lambda-Runtime-Deadline-Ms`).
    pub deadline: SystemTime,
    /// When the answer came.
    pub at: SystemTime,
}

impl Answer {
    /// The response's body; panics on a function error.
    pub fn response(&self) -> &Value {
        match &self.outcome {
            Outcome::Response(v) => v,
            Outcome::Error(e) => panic!("a function error, not a response: {e}"),
        }
    }

    /// How long before the deadline the answer came (negative: after it), in ms.
    pub fn margin_ms(&self) -> i64 {
        epoch_ms(self.deadline) as i64 - epoch_ms(self.at) as i64
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<(String, Vec<u8>, Duration)>,
    started: HashMap<String, (SystemTime, SystemTime)>,
    answers: HashMap<String, Answer>,
    init_errors: Vec<Value>,
}

/// The runtime API (see the module documentation).
#[derive(Clone)]
pub struct RuntimeApi {
    port: u16,
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl RuntimeApi {
    /// Starts it on a free loopback port.
    pub fn start() -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().unwrap().port();
        let api = RuntimeApi {
            port,
            shared: Arc::new((Mutex::new(State::default()), Condvar::new())),
        };
        let me = api.clone();
        serve(listener, move |req, conn| me.route(req, conn));
        api
    }

    /// `AWS_LAMBDA_RUNTIME_API` for a function served by it.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn route(&self, req: Request, conn: &TcpStream) -> Reply {
        let path = req.path.as_str();
        let (lock, cv) = &*self.shared;
        let json = |s: &str| serde_json::from_slice(&req.body).unwrap_or(Value::String(s.into()));
        if req.method == "GET" && path.ends_with("/runtime/invocation/next") {
            let mut st = lock.lock().unwrap();
            loop {
                if let Some((id, body, timeout)) = st.queue.pop_front() {
                    let started = SystemTime::now();
                    let deadline = started + timeout;
                    st.started.insert(id.clone(), (started, deadline));
                    cv.notify_all();
                    let headers = vec![
                        ("Content-Type".into(), "application/json".into()),
                        ("Lambda-Runtime-Aws-Request-Id".into(), id.clone()),
                        (
                            "Lambda-Runtime-Deadline-Ms".into(),
                            epoch_ms(deadline).to_string(),
                        ),
                        (
                            "Lambda-Runtime-Invoked-Function-Arn".into(),
                            "arn:aws:lambda:us-east-1:123456789012:function:_".into(),
                        ),
                        ("Lambda-Runtime-Trace-Id".into(), format!("Root=1-{id}")),
                    ];
                    return Reply::Answer(200, headers, body);
                }
                // A function killed while it waited must not take the next event.
                if peer_gone(conn) {
                    return Reply::Close;
                }
                st = cv.wait_timeout(st, Duration::from_millis(50)).unwrap().0;
            }
        }
        let ok = || Reply::Answer(202, vec![], br#"{"status":"OK"}"#.to_vec());
        if req.method == "POST" && path.ends_with("/runtime/init/error") {
            let mut st = lock.lock().unwrap();
            st.init_errors.push(json("init error"));
            cv.notify_all();
            return ok();
        }
        if req.method == "POST"
            && let Some(rest) = path.split("/runtime/invocation/").nth(1)
            && let Some((id, what)) = rest.split_once('/')
        {
            let outcome = match what {
                "response" => Outcome::Response(json("")),
                "error" => Outcome::Error(json("")),
                _ => return Reply::Answer(404, vec![], vec![]),
            };
            let mut st = lock.lock().unwrap();
            let (started, deadline) = st.started.get(id).copied().unwrap_or_else(|| {
                let now = SystemTime::now();
                (now, now)
            });
            st.answers.insert(
                id.to_string(),
                Answer {
                    outcome,
                    started,
                    deadline,
                    at: SystemTime::now(),
                },
            );
            cv.notify_all();
            return ok();
        }
        // The Extensions API (the shutdown extension's registration): not served here.
        Reply::Answer(
            403,
            vec![],
            br#"{"errorType":"Extension.Unsupported","errorMessage":"not served by the test's runtime API"}"#.to_vec(),
        )
    }

    /// Queues `event` for the function, to be given `timeout` from when it picks it up;
    /// answers its request id.
    pub fn invoke(&self, event: &Value, timeout: Duration) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let id = format!(
            "req-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let (lock, cv) = &*self.shared;
        lock.lock()
            .unwrap()
            .queue
            .push_back((id.clone(), event.to_string().into_bytes(), timeout));
        cv.notify_all();
        id
    }

    /// Waits up to `within` for the function to pick invocation `id` up; its deadline.
    pub fn wait_started(&self, id: &str, within: Duration) -> Option<SystemTime> {
        let (lock, cv) = &*self.shared;
        let until = Instant::now() + within;
        let mut st = lock.lock().unwrap();
        loop {
            if let Some((_, deadline)) = st.started.get(id) {
                return Some(*deadline);
            }
            let left = until.checked_duration_since(Instant::now())?;
            st = cv.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Waits up to `within` for invocation `id`'s answer.
    pub fn wait_answer(&self, id: &str, within: Duration) -> Option<Answer> {
        let (lock, cv) = &*self.shared;
        let until = Instant::now() + within;
        let mut st = lock.lock().unwrap();
        loop {
            if let Some(a) = st.answers.get(id) {
                return Some(a.clone());
            }
            let left = until.checked_duration_since(Instant::now())?;
            st = cv.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Whether invocation `id` was answered by now.
    pub fn answered(&self, id: &str) -> bool {
        self.shared.0.lock().unwrap().answers.contains_key(id)
    }
}

/// What the [`Sink`] accepted (or holds): each body, with when.
pub type Accepted = Arc<Mutex<Vec<(Vec<u8>, Instant)>>>;

/// Bodies a [`KinesisStub`] refuses, each with how many more times.
type Throttled = Arc<Mutex<Vec<(Vec<u8>, usize)>>>;

/// A stub HTTP endpoint for `send_http_post` (see the module documentation).
pub struct Sink {
    port: u16,
    accepted: Accepted,
    stalled: Accepted,
    released: Arc<AtomicBool>,
}

impl Sink {
    /// Starts it: the first body holding each of `stall` is held without an answer until
    /// the sink is dropped (then its connection closes unanswered); later ones are accepted.
    pub fn start(stall: &[&str]) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().unwrap().port();
        let accepted: Accepted = Arc::default();
        let stalled: Accepted = Arc::default();
        let released = Arc::new(AtomicBool::new(false));
        let stall: Mutex<Vec<Vec<u8>>> =
            Mutex::new(stall.iter().map(|s| s.as_bytes().to_vec()).collect());
        let (acc, st, rel) = (accepted.clone(), stalled.clone(), released.clone());
        serve(listener, move |req, _| {
            let holds = {
                let mut stall = stall.lock().unwrap();
                let at = stall
                    .iter()
                    .position(|s| req.body.windows(s.len()).any(|w| w == s.as_slice()));
                at.map(|i| stall.remove(i)).is_some()
            };
            if holds {
                st.lock().unwrap().push((req.body, Instant::now()));
                while !rel.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                return Reply::Close;
            }
            acc.lock().unwrap().push((req.body, Instant::now()));
            Reply::Answer(200, vec![], b"{}".to_vec())
        });
        Sink {
            port,
            accepted,
            stalled,
            released,
        }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/in", self.port)
    }

    /// The bodies accepted so far, in order.
    pub fn accepted(&self) -> Vec<Vec<u8>> {
        self.accepted
            .lock()
            .unwrap()
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }

    /// The bodies held so far.
    pub fn stalled(&self) -> Vec<Vec<u8>> {
        self.stalled
            .lock()
            .unwrap()
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.released.store(true, Ordering::Relaxed);
    }
}

/// A stub Kinesis endpoint that answers `PutRecords` (AWS JSON 1.1) by itself: each record
/// is accepted (in the order of the call, with a growing sequence number) except the
/// first `throttle` times a record holding one of the strings it was told to throttle is
/// sent, which are answered `ProvisionedThroughputExceededException` in their entry, as
/// Kinesis answers a record over its shard's limit. It records what it accepted.
pub struct KinesisStub {
    port: u16,
    accepted: Accepted,
    throttle: Throttled,
}

impl KinesisStub {
    /// Starts it: records holding `throttle[i].0` are refused the first `throttle[i].1`
    /// times they come.
    pub fn start(throttle: &[(&str, usize)]) -> KinesisStub {
        use base64::Engine;
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().unwrap().port();
        let accepted: Accepted = Arc::default();
        let left: Throttled = Arc::new(Mutex::new(
            throttle
                .iter()
                .map(|(s, n)| (s.as_bytes().to_vec(), *n))
                .collect(),
        ));
        let throttling = left.clone();
        let seq = AtomicUsize::new(1);
        let acc = accepted.clone();
        serve(listener, move |req, _| {
            let json = vec![(
                "Content-Type".to_string(),
                "application/x-amz-json-1.1".to_string(),
            )];
            let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
                return Reply::Answer(
                    400,
                    json,
                    br#"{"__type":"SerializationException"}"#.to_vec(),
                );
            };
            let Some(records) = body["Records"].as_array() else {
                return Reply::Answer(
                    400,
                    json,
                    br#"{"__type":"UnknownOperationException","message":"only PutRecords"}"#
                        .to_vec(),
                );
            };
            let b64 = base64::engine::general_purpose::STANDARD;
            let mut failed = 0;
            let mut results = Vec::new();
            for r in records {
                let data = b64
                    .decode(r["Data"].as_str().unwrap_or_default())
                    .unwrap_or_default();
                let refused = {
                    let mut left = left.lock().unwrap();
                    left.iter_mut()
                        .find(|(s, n)| *n > 0 && data.windows(s.len()).any(|w| w == s.as_slice()))
                        .map(|(_, n)| *n -= 1)
                        .is_some()
                };
                if refused {
                    failed += 1;
                    results.push(serde_json::json!({
                        "ErrorCode": "ProvisionedThroughputExceededException",
                        "ErrorMessage": "Rate exceeded for shard shardId-000000000000",
                    }));
                } else {
                    acc.lock().unwrap().push((data, Instant::now()));
                    let n = seq.fetch_add(1, Ordering::Relaxed);
                    results.push(serde_json::json!({
                        "SequenceNumber": format!("{:056}", n),
                        "ShardId": "shardId-000000000000",
                    }));
                }
            }
            let answer = serde_json::json!({"FailedRecordCount": failed, "Records": results});
            Reply::Answer(200, json, answer.to_string().into_bytes())
        });
        KinesisStub {
            port,
            accepted,
            throttle: throttling,
        }
    }

    /// Accepts every record from now on.
    pub fn stop_throttling(&self) {
        self.throttle.lock().unwrap().clear();
    }

    /// Its endpoint (`AWS_ENDPOINT_URL_KINESIS`).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The data of the records accepted so far, in the order they were accepted.
    pub fn accepted(&self) -> Vec<Vec<u8>> {
        self.accepted
            .lock()
            .unwrap()
            .iter()
            .map(|(b, _)| b.clone())
            .collect()
    }
}
