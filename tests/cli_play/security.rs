//! `sluice play`'s defences (issue 51; docs/security.md lists each with its test), run
//! against the real process with the helpers of the parent module.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Play, request, request_with_head};

/// Issue 51, finding 2: without the token (another local user, another page) nothing is
/// served; with it, the page gets it as an HttpOnly, SameSite=Strict cookie. Every reply,
/// refusals too, carries the anti-framing and other security headers.
#[test]
fn the_token_is_required() {
    let play = Play::start("127.0.0.1:0");
    let a = play.addr.as_str();
    let json = ("Content-Type", "application/json");
    let body = json!({ "config": "{ transforms: [] }" }).to_string();
    let security = |head: &str| {
        let head = head.to_ascii_lowercase();
        for h in [
            "x-frame-options: deny",
            "frame-ancestors 'none'",
            "default-src 'self'",
            "x-content-type-options: nosniff",
            "referrer-policy: no-referrer",
        ] {
            assert!(head.contains(h), "{h} missing:\n{head}");
        }
        assert!(!head.contains("'unsafe-inline'"), "{head}");
    };

    // No token at all: the page and every API route are refused, with what to do.
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/api/examples"),
        ("POST", "/api/run"),
        ("POST", "/api/test"),
        ("POST", "/api/fmt"),
    ] {
        let (status, head, r) = request_with_head(a, method, path, &[json], body.as_bytes());
        assert_eq!(status, 401, "{method} {path}: {r}");
        assert!(r.contains("needs its token"), "{r}");
        security(&head);
    }
    // A wrong token, in the URL, the cookie or the header.
    let (status, r) = request(a, "GET", "/?token=0123", &[], b"");
    assert_eq!(status, 403, "{r}");
    let wrong_cookie = format!("{}0", play.cookie());
    let wrong = play.token.replace(|c: char| c != '0', "0");
    for h in [
        ("Cookie", wrong_cookie.as_str()),
        ("X-Sluice-Token", wrong.as_str()),
    ] {
        let (status, r) = request(a, "POST", "/api/run", &[json, h], body.as_bytes());
        assert_eq!(status, 401, "{h:?}: {r}");
    }

    // The printed URL: a redirect to / that sets the cookie.
    let path = play.url.split_once(a).unwrap().1;
    let (status, head, _) = request_with_head(a, "GET", path, &[], b"");
    assert_eq!(status, 303, "{head}");
    let head_lc = head.to_ascii_lowercase();
    assert!(head_lc.contains("location: /\r\n"), "{head}");
    assert!(
        head.contains(&format!(
            "{}; Path=/; HttpOnly; SameSite=Strict",
            play.cookie()
        )),
        "{head}"
    );
    security(&head);
    // With the cookie (or the header) it works, and the page and its files say so.
    let (status, head, page) = request_with_head(a, "GET", "/", &[("Cookie", &play.cookie())], b"");
    assert_eq!(status, 200);
    security(&head);
    assert!(
        page.contains("<script src=\"/play.js\"></script>"),
        "{page}"
    );
    assert!(!page.contains("<script>"), "no inline script: {page}");
    for file in ["/play.js", "/play.css"] {
        let (status, head, _) = request_with_head(a, "GET", file, &[], b"");
        assert_eq!(status, 200, "{file}");
        security(&head);
    }
    let (status, r) = request(
        a,
        "POST",
        "/api/run",
        &[json, ("X-Sluice-Token", &play.token)],
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(play.token.len(), 64, "{}", play.token);

    // Another server's token is not this one's.
    let other = Play::start("127.0.0.1:0");
    assert_ne!(other.token, play.token);
}

/// Issue 51, finding 7: with an address that is not loopback, a DNS-rebinding Host or
/// Origin is still refused; the Origin is compared with the server's own addresses, not
/// with the Host the request brings.
#[test]
fn rebinding_is_refused_on_any_address() {
    let play = Play::start("0.0.0.0:0");
    let port = play.addr.rsplit_once(':').unwrap().1.to_string();
    let local = format!("127.0.0.1:{port}");
    let evil = format!("rebind.evil.example:{port}");
    let evil_origin = format!("http://{evil}");
    let cookie = play.cookie();
    let ok = json!({ "config": "{ transforms: [] }" }).to_string();
    let json = ("Content-Type", "application/json");
    for (headers, want) in [
        (vec![("Host", evil.as_str())], 403),
        (
            vec![("Host", evil.as_str()), ("Origin", evil_origin.as_str())],
            403,
        ),
        (
            vec![("Host", local.as_str()), ("Origin", evil_origin.as_str())],
            403,
        ),
        (vec![("Host", local.as_str())], 200),
    ] {
        let mut all = vec![json, ("Cookie", cookie.as_str())];
        all.extend(headers.iter().copied());
        let (status, r) = request(&local, "POST", "/api/run", &all, ok.as_bytes());
        assert_eq!(status, want, "{headers:?}: {r}");
    }
}

/// Issue 51, finding 3: configs nested 1,000 deep (run) and 5,000 deep (fmt) are errors
/// that name the limit, in play (which keeps serving) and in the CLI (never exit 134).
#[test]
fn deep_nesting_is_an_error_not_an_abort() {
    let play = Play::start("127.0.0.1:0");
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    for (route, n) in [("/api/run", 1000), ("/api/test", 1000), ("/api/fmt", 5000)] {
        let (status, r) = play.post(route, &json!({ "config": deep(n), "input": "x" }));
        assert_eq!(status, 422, "{route}: {r}");
        let e = r["error"].as_str().unwrap();
        assert!(
            e.contains("brackets nested more than 500 deep"),
            "{route}: {e}"
        );
    }
    // A chain without brackets (20,000 terms) is bounded too.
    let chain = format!("{{ transforms: [], x: 1{} }}", "+1".repeat(20_000));
    for route in ["/api/run", "/api/test", "/api/fmt"] {
        let (status, r) = play.post(route, &json!({ "config": chain, "input": "x" }));
        assert_eq!(status, 422, "{route}: {r}");
        let e = r["error"].as_str().unwrap();
        assert!(
            e.contains("config.jsonnet:1:") && e.contains("expression nested more than 600 deep"),
            "{route}: {e}"
        );
    }
    let (status, _) = play.call("GET", "/api/examples", &[], b"");
    assert_eq!(status, 200, "the server still serves");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.jsonnet");
    std::fs::write(&file, format!("{{ transforms: [], x: {} }}", deep(5000))).unwrap();
    for args in [
        vec!["run", "--config"],
        vec!["fmt"],
        vec!["fmt", "--check"],
        vec!["vet"],
        vec!["test"],
        vec!["build"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(&args)
            .arg(&file)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "sluice {args:?}: {:?}\n{err}",
            out.status
        );
        assert!(
            err.contains("brackets nested more than 500 deep"),
            "sluice {args:?}: {err}"
        );
        assert!(!err.contains("--max-stack"), "{err}");
    }
}

/// The pids of the processes whose parent is `pid` (play's workers).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so split after its `)`.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(e.file_name().to_string_lossy().parse().unwrap());
        }
    }
    out
}

/// CPU time (user + system, in clock ticks) the process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Issue 51, finding 4: an evaluation that spins forever is stopped at the time limit, two
/// at a time at most, and one whose request goes away is stopped at once; afterwards
/// nothing of them uses the CPU.
#[test]
fn spinning_evaluations_stop() {
    let play = Play::start("127.0.0.1:0");
    let pid = play.child.id();
    // Ten billion iterations that keep nothing: CPU, no memory.
    let spin = json!({
        "config": "local r = std.range(1, 100000); { transforms: [], n: std.length([1 for i in r for j in r if false]) }",
        "input": "",
    })
    .to_string();
    let send = |keep: bool| {
        let (addr, cookie, body) = (play.addr.clone(), play.cookie(), spin.clone());
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(&addr).unwrap();
            let head = format!(
                "POST /api/run HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(body.as_bytes()).unwrap();
            if !keep {
                std::thread::sleep(Duration::from_secs(2));
                // The client goes away: its work must stop.
                let _ = s.shutdown(std::net::Shutdown::Both);
                return String::new();
            }
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut reply = String::new();
            let _ = s.read_to_string(&mut reply);
            reply
        })
    };
    let wait_for = |what: &str, cond: &dyn Fn(usize) -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let n = children(pid).len();
            if cond(n) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{what}: {n} workers");
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // One that goes away after 2 s: its worker is killed then, not at the time limit.
    let started = std::time::Instant::now();
    let gone = send(false);
    wait_for("the first worker starts", &|n| n == 1);
    gone.join().unwrap();
    wait_for("the abandoned worker is killed", &|n| n == 0);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    // Two that stay, then three that go away while they wait for a turn.
    let kept: Vec<_> = (0..2).map(|_| send(true)).collect();
    wait_for("two workers", &|n| n == 2);
    let waiting: Vec<_> = (0..3).map(|_| send(false)).collect();
    let mut most = 0;
    while kept.iter().any(|k| !k.is_finished()) {
        most = most.max(children(pid).len());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(most <= 2, "{most} workers at once");
    for k in kept {
        let reply = k.join().unwrap();
        assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
        assert!(reply.contains("time limit"), "{reply}");
    }
    for w in waiting {
        w.join().unwrap();
    }
    wait_for("no workers left", &|n| n == 0);
    // And the CPU is quiet: the server itself idles.
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(pid) - before;
    assert!(
        used < 20,
        "the server used {used} ticks in a second while idle"
    );
}

/// Issue 51, finding 7: a request whose headers never finish is closed after the header
/// timeout (10 s), and at most 64 connections are served at once (more get 503).
#[test]
fn half_sent_requests_are_closed_and_connections_capped() {
    let play = Play::start("127.0.0.1:0");
    let a = play.addr.as_str();
    let mut half: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(format!("GET / HTTP/1.1\r\nHost: {a}\r\n").as_bytes())
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (status, r) = request(a, "GET", "/play.js", &[], b"");
    assert_eq!(status, 503, "{r}");
    assert!(r.contains("as many connections"), "{r}");

    let started = std::time::Instant::now();
    for s in &mut half {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        // Closed by the server (EOF, with or without a reply), not by our timeout.
        let got = s.read_to_end(&mut rest);
        assert!(got.is_ok(), "{got:?}");
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "closed after {took:?}");
    std::thread::sleep(Duration::from_millis(200));
    let (status, _) = request(a, "GET", "/play.js", &[], b"");
    assert_eq!(status, 200, "served again once they are closed");
}

/// Issue 51, finding 7: `/api/examples` does not follow a symbolic link out of the
/// examples directory.
#[test]
fn examples_do_not_follow_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.jsonnet");
    std::fs::write(&secret, "{ transforms: [], password: 'hunter2' }").unwrap();
    let ex = dir.path().join("examples");
    std::fs::create_dir_all(ex.join("mine")).unwrap();
    std::fs::write(ex.join("mine/config.jsonnet"), "{ transforms: [] }").unwrap();
    std::os::unix::fs::symlink(&secret, ex.join("mine/link.jsonnet")).unwrap();
    std::os::unix::fs::symlink(dir.path(), ex.join("up")).unwrap();
    let play = Play::start_in(dir.path(), "127.0.0.1:0", &[]);
    let (status, text) = play.call("GET", "/api/examples", &[], b"");
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let list: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert_eq!(names, [json!("examples/mine/config.jsonnet")]);
}

/// Issue 51, finding 3 (play's part): environment secrets, file-backed kv stores and
/// network transforms need a flag, which the page shows; without it the error names the
/// transform and the flag.
#[test]
fn files_env_and_network_need_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    std::fs::write(&csv, "k,v\na,secret-row\n").unwrap();
    let csv_config = format!(
        "{{ transforms: [{{ type: 'enrich_kv_store_item_get', settings: {{ kv_store: {{ type: \
         'csv_file', settings: {{ file: '{}', column: 'k' }} }}, object: {{ source_key: 'k', \
         target_key: 'row' }} }} }}] }}",
        csv.display()
    );
    let env_config = "{ transforms: [{ type: 'utility_secret', settings: { secret: { type: \
                      'environment_variable', settings: { id: 's', name: 'HOME' } } } }] }";
    let net_config =
        "{ transforms: [{ type: 'send_http_post', settings: { url: 'http://127.0.0.1:9/' } }] }";
    let jq_env =
        "{ transforms: [{ type: 'object_jq', settings: { filter: 'env | has(\"HOME\")' } }] }";

    let play = Play::start_in(dir.path(), "127.0.0.1:0", &[]);
    for (config, flag, place) in [
        (
            csv_config.as_str(),
            "--allow-files",
            "transforms[0] (enrich_kv_store_item_get)",
        ),
        (env_config, "--allow-env", "transforms[0] (utility_secret)"),
        (
            net_config,
            "--allow-network",
            "the send_http_post transform",
        ),
    ] {
        let (status, r) = play.post(
            "/api/run",
            &json!({ "config": config, "input": "{\"k\":\"a\"}" }),
        );
        assert_eq!(status, 422, "{r}");
        let e = r["error"].as_str().unwrap();
        assert!(e.contains(flag) && e.contains(place), "{e}");
        let (status, r) = play.post("/api/test", &json!({ "config": config }));
        assert_eq!(status, 422, "{r}");
    }
    // jq's `env` sees an empty environment.
    let (status, r) = play.post("/api/run", &json!({ "config": jq_env, "input": "{}" }));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["output"][0]["data"], "false", "{r}");
    let (_, page) = play.call("GET", "/", &[], b"");
    assert!(!page.contains("id=\"trust\""), "no banner without flags");
    drop(play);

    let play = Play::start_in(dir.path(), "127.0.0.1:0", &["--allow-files", "--allow-env"]);
    let (status, r) = play.post(
        "/api/run",
        &json!({ "config": csv_config, "input": "{\"k\":\"a\"}" }),
    );
    assert_eq!(status, 200, "{r}");
    assert!(
        r["output"][0]["data"]
            .as_str()
            .unwrap()
            .contains("secret-row"),
        "{r}"
    );
    let (status, r) = play.post("/api/run", &json!({ "config": jq_env, "input": "{}" }));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["output"][0]["data"], "true", "{r}");
    let (status, r) = play.post("/api/run", &json!({ "config": net_config, "input": "{}" }));
    assert_eq!(status, 422, "{r}");
    let (_, page) = play.call("GET", "/", &[], b"");
    assert!(
        page.contains("<code>--allow-env</code>, <code>--allow-files</code>"),
        "the banner: {page}"
    );
}
