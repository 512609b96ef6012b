//! `sluice play`, run as a process: its API over plain HTTP (every route, the guards, the
//! limits), the warning on a non-loopback address, and its page driven in a real headless
//! browser (tests/play/browser.mjs: Debian's chromium through playwright-core), asserting
//! on what the script saw.
//!
//! The browser test needs chromium (`apt-get install chromium`, as scripts/test.sh does) and
//! playwright-core (`scripts/emulators.sh install`); without them it fails and says so.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::workspace_root;

// The defences of issue 51 (token, headers, rebinding, nesting, spinning runs, connection
// limits, example links, the --allow-* flags), with this file's helpers.
mod security;

/// A running `sluice play`, stopped when dropped.
struct Play {
    child: Child,
    /// `http://127.0.0.1:PORT/?token=...`, as it printed it.
    url: String,
    /// `127.0.0.1:PORT`
    addr: String,
    /// The token in its URL.
    token: String,
}

impl Play {
    /// Starts `sluice play --addr addr` in the workspace root (so it lists `examples/`) and
    /// reads the URL it prints.
    fn start(addr: &str) -> Play {
        Play::start_in(&workspace_root(), addr, &[])
    }

    /// Starts `sluice play --addr addr flags...` in `dir`.
    fn start_in(dir: &std::path::Path, addr: &str, flags: &[&str]) -> Play {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["play", "--addr", addr])
            .args(flags)
            .current_dir(dir)
            .env_remove("SLUICE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sluice play");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reading the URL line");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in sluice play's first line: {line:?}"))
            .to_string();
        let (base, token) = url
            .split_once("/?token=")
            .unwrap_or_else(|| panic!("no token in sluice play's URL: {url:?}"));
        let addr = base.trim_start_matches("http://").to_string();
        let token = token.to_string();
        Play {
            child,
            url,
            addr,
            token,
        }
    }

    /// The cookie the page holds once opened with the token.
    fn cookie(&self) -> String {
        let port = self.addr.rsplit_once(':').unwrap().1;
        format!("sluice_play_{port}={}", self.token)
    }

    /// A request with the token's cookie (as the page sends them).
    fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String) {
        let cookie = self.cookie();
        let mut all = vec![("Cookie", cookie.as_str())];
        all.extend_from_slice(headers);
        request(&self.addr, method, path, &all, body)
    }

    /// POSTs JSON to the API with the token; the status and the reply as JSON.
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, text) = self.call(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        );
        let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text:?}"));
        (status, json)
    }

    /// Stops it and returns what it wrote to standard error.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for Play {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request (`Connection: close`) with `headers`; the status and the body.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let (status, _, body) = request_with_head(addr, method, path, headers, body);
    (status, body)
}

/// [`request`], with the reply's head (status line and headers) too.
fn request_with_head(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connecting to sluice play");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server refusing a large body may close before reading all of it.
    let _ = stream.write_all(body);
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {reply:?}"));
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_string(), b.to_string()))
        .unwrap_or_default();
    (status, head, body)
}

const CONFIG: &str = r#"local sub = std.extVar('sub');
{
  tests: [{
    name: 'upper',
    transforms: [sub.tf.test.message({ value: { a: 'b' } })],
    condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
  }],
  transforms: [
    sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } }),
    sub.tf.obj.insert({ obj: { trg: 'n' }, value: 1 }),
    sub.tf.send.stdout(),
  ],
}
"#;

#[test]
fn api_runs_tests_formats_and_lists_examples() {
    let play = Play::start("127.0.0.1:0");

    let (status, page) = play.call("GET", "/", &[], b"");
    assert_eq!(status, 200);
    assert!(page.contains("<title>sluice play</title>"), "{page}");

    let (status, r) = play.post(
        "/api/run",
        &json!({"config": CONFIG, "input": "{\"a\":\"b\"}\n{\"a\":\"c\"}"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        r["stdout"],
        "{\"a\":\"B\",\"n\":1}\n{\"a\":\"C\",\"n\":1}\n"
    );
    assert_eq!(r["output"][1]["data"], r#"{"a":"C","n":1}"#);
    let steps = r["steps"].as_array().unwrap();
    let types: Vec<_> = steps.iter().map(|s| s["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["string_to_upper", "object_insert", "send_stdout"]);
    assert_eq!(steps[0]["messages"][0]["data"], r#"{"a":"B"}"#);
    assert_eq!(steps[1]["index"], 1);
    // What each step changed, per message.
    assert_eq!(steps[0]["changes"]["messages"][1]["changed"], json!(["a"]));
    assert_eq!(steps[1]["changes"]["messages"][0]["added"], json!(["n"]));
    assert_eq!(steps[2]["changes"]["messages"][0]["added"], json!([]));
    assert_eq!(r["failed"], Value::Null, "{r}");

    // A transform that fails at run time: 422 with the steps before it and where it failed.
    let failing = CONFIG.replace(
        "sub.tf.send.stdout(),",
        "sub.tf.obj.cp({ obj: { src: 'a' } }),\n    sub.tf.obj.insert({ obj: { trg: 'x' }, value: 1 }),",
    );
    let (status, r) = play.post(
        "/api/run",
        &json!({"config": failing, "input": "{\"a\":\"b\"}"}),
    );
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["failed"]["index"], 3, "{r}");
    assert_eq!(r["failed"]["at"], "transforms[3] (object_insert)", "{r}");
    assert_eq!(r["steps"].as_array().unwrap().len(), 3, "{r}");
    assert_eq!(r["steps"][2]["messages"][0]["data"], "B", "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.starts_with("running config.jsonnet: transforms[3] (object_insert): "),
        "{error}"
    );

    // Errors: 422 with the place, as the CLI prints it.
    let (status, r) = play.post(
        "/api/run",
        &json!({"config": "{ transforms: [\n  error 'boom' ] }"}),
    );
    assert_eq!(status, 422, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("config.jsonnet:2:3"),
        "{r}"
    );
    let bad = "{ transforms: [{ type: 'string_to_uper', settings: {} }] }";
    let (status, r) = play.post("/api/run", &json!({ "config": bad }));
    assert_eq!(status, 422, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("transforms[0]"),
        "{r}"
    );
    assert!(
        r["error"].as_str().unwrap().contains("string_to_upper"),
        "{r}"
    );

    let (status, r) = play.post("/api/test", &json!({ "config": CONFIG }));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["passed"], true, "{r}");
    assert!(
        r["report"]
            .as_str()
            .unwrap()
            .contains("--- PASS: upper (1 outputs)"),
        "{r}"
    );
    let failing = CONFIG.replace("value: 'B'", "value: 'Z'");
    let (_, r) = play.post("/api/test", &json!({ "config": failing }));
    assert_eq!(r["passed"], false, "{r}");
    assert!(
        r["report"].as_str().unwrap().contains("--- FAIL: upper"),
        "{r}"
    );

    let (status, r) = play.post("/api/fmt", &json!({"config": "{a:1,\n    b:[ ]}"}));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["config"], "{\n  a: 1,\n  b: [],\n}\n");
    let (status, r) = play.post("/api/fmt", &json!({"config": "{a:"}));
    assert_eq!(status, 422, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("config.jsonnet:1"),
        "{r}"
    );

    let (status, text) = play.call("GET", "/api/examples", &[], b"");
    assert_eq!(status, 200);
    let examples: Value = serde_json::from_str(&text).unwrap();
    let on_disk = walk_examples(&workspace_root().join("examples"));
    let names: Vec<_> = examples
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, on_disk);
    let hello = examples
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "examples/hello/config.jsonnet")
        .unwrap();
    assert_eq!(hello["input"], r#"{"a":"b"}"#);
    let demo = examples
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "examples/demo/config.jsonnet")
        .unwrap();
    assert!(demo["input"].as_str().unwrap().contains("ConsoleLogin"));
}

/// The `.jsonnet` files under `dir`, as `examples/...` paths, sorted.
fn walk_examples(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonnet") {
                let rel = p.strip_prefix(workspace_root()).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn api_guards_and_limits() {
    let play = Play::start("127.0.0.1:0");
    let a = play.addr.as_str();
    let body = json!({ "config": "{ transforms: [] }" }).to_string();

    // Not JSON: a cross-origin form post cannot send application/json without a preflight.
    let (status, r) = play.call(
        "POST",
        "/api/run",
        &[("Content-Type", "text/plain")],
        body.as_bytes(),
    );
    assert_eq!(status, 415, "{r}");
    // Another page's origin.
    let (status, r) = play.call(
        "POST",
        "/api/run",
        &[
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
        ],
        body.as_bytes(),
    );
    assert_eq!(status, 403, "{r}");
    assert!(r.contains("evil.example"), "{r}");
    // A DNS-rebinding host name.
    let (status, r) = play.call(
        "GET",
        "/api/examples",
        &[("Host", "evil.example:8080")],
        b"",
    );
    assert_eq!(status, 403, "{r}");
    // The page's own origin is fine.
    let origin = format!("http://{a}");
    let (status, r) = play.call(
        "POST",
        "/api/run",
        &[("Content-Type", "application/json"), ("Origin", &origin)],
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{r}");

    let (status, r) = play.call("GET", "/nope", &[], b"");
    assert_eq!(status, 404, "{r}");
    let (status, r) = play.call("GET", "/api/run", &[], b"");
    assert_eq!(status, 405, "{r}");
    let (status, r) = play.post("/api/run", &json!({"input": "x"}));
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("config"), "{r}");

    // Too big.
    let big = json!({ "config": "{ transforms: [] }", "input": "x".repeat(2 << 20) });
    let (status, r) = play.post("/api/run", &big);
    assert_eq!(status, 413, "{r}");

    // Too slow: stopped at the time limit (10 s) with 408.
    let slow = "{ transforms: [{ type: 'utility_delay', settings: { duration: '60s' } }] }";
    let started = std::time::Instant::now();
    let (status, r) = play.post("/api/run", &json!({ "config": slow, "input": "x" }));
    assert_eq!(status, 408, "{r}");
    assert!(r["error"].as_str().unwrap().contains("time limit"), "{r}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn non_loopback_addresses_warn() {
    let play = Play::start("0.0.0.0:0");
    assert!(play.url.starts_with("http://0.0.0.0:"), "{}", play.url);
    let err = play.stop();
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("run configs"), "{err}");

    let play = Play::start("127.0.0.1:0");
    let err = play.stop();
    assert!(!err.contains("warning"), "{err}");
}

/// The browser and the driver, or why the test cannot run.
fn browser_tools() -> (PathBuf, PathBuf) {
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| {
            panic!(
                "chromium is not installed; the playground's browser test needs it: \
                 apt-get install -y --no-install-recommends chromium (scripts/test.sh does)"
            )
        });
    let driver = workspace_root().join(".emulators/playwright/node_modules/playwright-core");
    assert!(
        driver.join("package.json").exists(),
        "playwright-core is not installed in {}; run scripts/emulators.sh install",
        driver.display()
    );
    (chromium, driver)
}

#[test]
fn the_page_in_a_headless_browser() {
    let (chromium, driver) = browser_tools();
    let play = Play::start("127.0.0.1:0");
    let out = Command::new("node")
        .arg(workspace_root().join("tests/play/browser.mjs"))
        .env("SLUICE_PLAY_URL", &play.url)
        .env("PLAYWRIGHT_CORE", &driver)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("running node (apt-get install nodejs)");
    assert!(
        out.status.success(),
        "tests/play/browser.mjs failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seen: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the script's output is not JSON ({e}): {stdout}"));

    let run = &seen["run"];
    assert_eq!(run["error"], "", "{run}");
    let want =
        "{\"name\":\"ADA\",\"greeting\":\"hello\"}\n{\"name\":\"GRACE\",\"greeting\":\"hello\"}";
    assert_eq!(run["stdout"], format!("{want}\n"), "{run}");
    assert_eq!(run["output"], want, "{run}");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{run}");
    for (i, (ty, first)) in [
        ("object_insert", r#"{"name":"ada","greeting":"hello"}"#),
        ("string_to_upper", r#"{"name":"ADA","greeting":"hello"}"#),
        ("send_stdout", r#"{"name":"ADA","greeting":"hello"}"#),
    ]
    .iter()
    .enumerate()
    {
        let head = steps[i]["head"].as_str().unwrap();
        assert!(head.starts_with(&format!("transforms[{i}] {ty}")), "{head}");
        assert_eq!(steps[i]["messages"].as_array().unwrap().len(), 2, "{run}");
        assert_eq!(steps[i]["messages"][0], *first, "{run}");
    }

    // What each step changed, marked on its messages.
    let marks: Vec<&Value> = steps.iter().map(|s| &s["marks"]).collect();
    assert_eq!(*marks[0], json!([["+greeting"], ["+greeting"]]), "{run}");
    assert_eq!(*marks[1], json!([["~name"], ["~name"]]), "{run}");
    assert_eq!(*marks[2], json!([[], []]), "{run}");
    assert_eq!(steps[2]["note"], "no change", "{run}");
    assert_eq!(steps[0]["note"], "", "{run}");

    // A run that fails at run time keeps the steps before the failing transform and shows
    // the error there.
    let failing = &seen["failing"];
    let error = failing["error"].as_str().unwrap();
    assert!(
        error.contains("transforms[3] (object_insert): ") && error.contains("not JSON"),
        "{failing}"
    );
    let fsteps = failing["steps"].as_array().unwrap();
    assert_eq!(fsteps.len(), 4, "{failing}");
    for (i, s) in fsteps[..3].iter().enumerate() {
        assert_eq!(s["failed"], false, "{failing}");
        assert!(
            s["head"]
                .as_str()
                .unwrap()
                .starts_with(&format!("transforms[{i}] ")),
            "{failing}"
        );
    }
    assert_eq!(fsteps[2]["messages"], json!(["ADA", "GRACE"]), "{failing}");
    assert_eq!(
        fsteps[2]["marks"],
        json!([["~data (as text)"], ["~data (as text)"]]),
        "{failing}"
    );
    let last = &fsteps[3];
    assert_eq!(last["failed"], true, "{failing}");
    assert!(
        last["head"]
            .as_str()
            .unwrap()
            .starts_with("transforms[3] object_insert"),
        "{failing}"
    );
    let step_error = last["error"].as_str().unwrap();
    assert!(
        step_error.starts_with("failed: transforms[3] (object_insert): ")
            && step_error.contains("not JSON"),
        "{failing}"
    );
    assert_eq!(
        failing["output"], "(none: the run failed at transforms[3] (object_insert))",
        "{failing}"
    );

    // Keys added, changed and removed (nested), a filter's dropped message, an aggregate's
    // count.
    let changes = &seen["changes"];
    assert_eq!(changes["error"], "", "{changes}");
    let c = changes["steps"].as_array().unwrap();
    assert_eq!(c.len(), 5, "{changes}");
    assert_eq!(c[0]["marks"][0], json!(["+user.role"]), "{changes}");
    assert_eq!(c[1]["marks"][1], json!(["~name"]), "{changes}");
    assert_eq!(c[2]["marks"][2], json!(["−user.id"]), "{changes}");
    assert_eq!(
        c[3]["note"], "−1 message dropped (2 of 3 before)",
        "{changes}"
    );
    assert_eq!(c[3]["marks"], json!([[], []]), "{changes}");
    assert_eq!(c[4]["marks"], json!([[]]), "{changes}");
    assert_eq!(c[4]["note"], "2 messages in, 1 out (1 fewer)", "{changes}");

    // Line numbers: one per line of each editor, beside their lines after a scroll.
    let lines = &seen["lines"];
    assert_eq!(lines["count"], 82, "{lines}");
    assert_eq!(lines["inputCount"], 3, "{lines}");
    assert!(lines["scrollTop"].as_f64().unwrap() > 100.0, "{lines}");
    assert_eq!(lines["lineHeight"], lines["numberLineHeight"], "{lines}");
    for d in lines["drift"].as_array().unwrap() {
        assert!(
            d.as_f64().unwrap().abs() < 1.0,
            "a number is off its line: {lines}"
        );
    }
    assert_eq!(lines["seenAtTop"], lines["wantAtTop"], "{lines}");

    let test = &seen["test"];
    assert_eq!(test["error"], "", "{test}");
    let report = test["report"].as_str().unwrap();
    assert!(report.contains("--- PASS: greets (1 outputs)"), "{report}");
    assert!(report.trim_end().ends_with("PASS"), "{report}");

    assert_eq!(
        seen["format"]["config"], "{\n  transforms: [\n  ],\n  a: 1,\n}\n",
        "{seen}"
    );

    let example = &seen["example"];
    let options = example["options"].as_array().unwrap();
    assert!(options.iter().any(|o| o == "demo") && options.iter().any(|o| o == "meta/switch"));
    let hello =
        std::fs::read_to_string(workspace_root().join("examples/hello/config.jsonnet")).unwrap();
    assert_eq!(example["config"], hello.as_str());
    assert_eq!(example["input"], r#"{"a":"b"}"#);

    // The token URL leads to the page at `/`, with the security headers.
    let opened = &seen["opened"];
    assert!(
        !opened["url"].as_str().unwrap().contains("token"),
        "{opened}"
    );
    assert_eq!(opened["headers"]["x-frame-options"], "DENY", "{opened}");
    let csp = opened["headers"]["content-security-policy"]
        .as_str()
        .unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");

    let share = &seen["share"];
    assert!(share["url"].as_str().unwrap().contains("/#ey"), "{share}");
    assert!(!share["url"].as_str().unwrap().contains("token"), "{share}");
    // A shared config is shown, not run, until the user presses Run.
    assert_eq!(share["runsBeforeClick"], 0, "{share}");
    assert_eq!(share["stdoutBeforeClick"], "", "{share}");
    assert!(
        share["notice"].as_str().unwrap().contains("shared link"),
        "{share}"
    );
    assert_eq!(share["runsAfterClick"], 1, "{share}");

    // Framed by a page of another origin: the frame is empty and nothing runs.
    let framed = &seen["framed"];
    assert_eq!(framed["hasRunButton"], false, "{framed}");
    assert_eq!(framed["runs"], 0, "{framed}");
    assert!(
        framed["console"].to_string().contains("frame-ancestors"),
        "Chromium names the CSP that blocked the frame: {framed}"
    );
    assert_eq!(
        share["config"], "{ transforms: [] }  // shared ✓\n",
        "{share}"
    );
    assert_eq!(share["input"], "one\ntwo", "{share}");

    let errors = &seen["errors"];
    let jsonnet = errors["jsonnet"].as_str().unwrap();
    assert!(jsonnet.contains("config.jsonnet:3:3"), "{jsonnet}");
    assert!(jsonnet.contains("boom"), "{jsonnet}");
    // The line the Jsonnet error cites is marked, and its button selects it.
    let marked = &seen["marked"];
    assert_eq!(marked["gutter"], json!(["3"]), "{marked}");
    assert_eq!(marked["band"], true, "{marked}");
    assert_eq!(
        marked["button"], "Go to the error: config line 3, column 3",
        "{marked}"
    );
    assert_eq!(marked["selected"]["focused"], true, "{marked}");
    assert_eq!(marked["selected"]["text"], "error 'boom' ] }", "{marked}");
    assert_eq!(marked["afterEdit"], 0, "{marked}");
    assert_eq!(marked["buttonAfterEdit"], false, "{marked}");
    let build = errors["build"].as_str().unwrap();
    assert!(
        build.contains("transforms[0] (string_to_upper) settings.object.source_key"),
        "{build}"
    );
}
