//! Configs read from URLs by the real `sluice` binary: `s3://` against moto's S3 (a config
//! and its imports uploaded, then run, tested, vetted and built), `gs://` against the Cloud
//! Storage emulator, and `http://` against a tiny HTTP server on loopback in this test
//! process.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::common::{Dir, dynamodb::unique_table, gcs, moto};

/// A config that imports a library file next to it, and carries a test.
const CONFIG: &str = r#"
local sub = std.extVar('sub');
local steps = import 'lib/steps.libsonnet';
{
  transforms: steps.upper + [sub.tf.send.stdout()],
  tests: [{
    name: 'upper',
    transforms: [sub.tf.test.message({ value: { a: 'b' } })],
    condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
  }],
}
"#;

/// The imported file, which imports the library by a Substation-style relative path.
const STEPS: &str = r#"
local sub = import '../../build/config/substation.libsonnet';
{ upper: [sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } })] }
"#;

#[test]
fn run_test_vet_and_build_a_config_in_s3() {
    let endpoint = moto::endpoint();
    let bucket = unique_table("sluice-config");
    moto::create_bucket(&endpoint, &bucket);
    moto::put_object(&endpoint, &bucket, "team/config.jsonnet", CONFIG.as_bytes());
    moto::put_object(
        &endpoint,
        &bucket,
        "team/lib/steps.libsonnet",
        STEPS.as_bytes(),
    );
    let env = moto::process_env(&endpoint);
    let url = format!("s3://{bucket}/team/config.jsonnet");
    let d = Dir::new();

    d.sluice_env(&["run", "-c", &url], "{\"a\":\"x\"}\n", &env)
        .assert_stdout("{\"a\":\"X\"}\n");

    let out = d.sluice_env(&["test", &url], "", &env);
    out.assert_code(0);
    // (send_stdout prints the test's output first.)
    assert!(
        out.stdout_str()
            .lines()
            .any(|l| l.starts_with(&format!("ok\t{url}\t"))),
        "{}",
        out.stdout_str()
    );
    assert!(out.stdout_str().ends_with("1 passed, 0 failed\n"));

    let out = d.sluice_env(&["vet", &url], "", &env);
    out.assert_code(0);
    assert_eq!(out.stdout_str(), format!("ok\t{url}\n"));

    // build prints the compiled JSON (there is nowhere next to a URL to write it).
    let out = d.sluice_env(&["build", &url], "", &env);
    out.assert_clean_success();
    let json: serde_json::Value = serde_json::from_str(out.stdout_str()).expect("JSON");
    assert_eq!(json["transforms"][0]["type"], "string_to_upper");
    assert_eq!(json["transforms"][1]["type"], "send_stdout");
    assert!(
        std::fs::read_dir(d.path()).unwrap().next().is_none(),
        "no file written"
    );
}

/// Substation reads `gs://` configs (`SUBSTATION_CONFIG`); so does sluice, imports included,
/// and a kv store's file at a `gs://` URL.
#[test]
fn a_config_and_a_kv_store_file_in_cloud_storage() {
    let endpoint = gcs::endpoint();
    let bucket = unique_table("sluice-config");
    gcs::create_bucket(&endpoint, &bucket);
    gcs::put_object(&endpoint, &bucket, "team/config.jsonnet", CONFIG.as_bytes());
    gcs::put_object(
        &endpoint,
        &bucket,
        "team/lib/steps.libsonnet",
        STEPS.as_bytes(),
    );
    gcs::put_object(&endpoint, &bucket, "kv/users.csv", b"id,name\nu1,ann\n");
    let env = [(
        "STORAGE_EMULATOR_HOST".to_string(),
        endpoint.trim_start_matches("http://").to_string(),
    )];
    let url = format!("gs://{bucket}/team/config.jsonnet");
    let d = Dir::new();
    d.sluice_env(&["run", "-c", &url], "{\"a\":\"x\"}\n", &env)
        .assert_stdout("{\"a\":\"X\"}\n");
    let out = d.sluice_env(&["test", &url], "", &env);
    out.assert_code(0);
    assert!(out.stdout_str().ends_with("1 passed, 0 failed\n"));

    d.write(
        "kv.jsonnet",
        format!(
            "local sub = std.extVar('sub');\n\
             {{ transforms: [sub.tf.enrich.kv_store.iget({{ obj: {{ src: 'id', trg: 'name' }},\n\
               kv_store: sub.kv_store.csv_file({{ file: 'gs://{bucket}/kv/users.csv', column: 'id' }}) }}), sub.tf.send.stdout()] }}\n"
        ),
    );
    d.sluice_env(&["run", "-c", "kv.jsonnet"], "{\"id\":\"u1\"}\n", &env)
        .assert_stdout("{\"id\":\"u1\",\"name\":{\"name\":\"ann\"}}\n");

    let missing = format!("gs://{bucket}/nope.jsonnet");
    let out = d.sluice_env(&["run", "-c", &missing], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr
            .starts_with(&format!("error: {missing}: download: HTTP 404")),
        "{}",
        out.stderr
    );
    let out = d.sluice_env(&["run", "-c", "gs://bucket-only"], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("names no object (expected gs://BUCKET/OBJECT)"),
        "{}",
        out.stderr
    );
}

#[test]
fn s3_errors_name_the_url_and_the_cause() {
    let endpoint = moto::endpoint();
    let bucket = unique_table("sluice-config");
    moto::create_bucket(&endpoint, &bucket);
    let env = moto::process_env(&endpoint);
    let d = Dir::new();

    let url = format!("s3://{bucket}/nope.jsonnet");
    let out = d.sluice_env(&["run", "-c", &url], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr
            .starts_with(&format!("error: {url}: GetObject failed: NoSuchKey")),
        "{}",
        out.stderr
    );

    // A failed import names the import's URL, its cause and the place in the config.
    moto::put_object(&endpoint, &bucket, "cfg.jsonnet", CONFIG.as_bytes());
    let url = format!("s3://{bucket}/cfg.jsonnet");
    let out = d.sluice_env(&["run", "-c", &url], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!(
            "s3://{bucket}/lib/steps.libsonnet: GetObject failed: NoSuchKey"
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&format!("{url}:3:")), "{}", out.stderr);

    // A Jsonnet error's position names the URL.
    moto::put_object(
        &endpoint,
        &bucket,
        "bad.jsonnet",
        b"{\n  transforms: [\n}\n",
    );
    let url = format!("s3://{bucket}/bad.jsonnet");
    let out = d.sluice_env(&["vet", &url], "", &env);
    out.assert_code(1);
    assert!(out.stderr.contains(&format!("{url}:3:")), "{}", out.stderr);

    let out = d.sluice_env(&["run", "-c", "s3://bucket-only"], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("names no object (expected s3://BUCKET/KEY)"),
        "{}",
        out.stderr
    );
}

/// A tiny HTTP/1.0 server on loopback: `GET path` answers `routes[path]` (status, extra
/// header, body) or 404, and records the paths asked for. Stopped when dropped.
struct Server {
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Routes = HashMap<String, (u16, String, Vec<u8>)>;

impl Server {
    fn start(routes: Routes) -> Server {
        Server::start_at(|_| routes)
    }

    /// A server whose routes may name its own port (`make` gets it).
    fn start_at(make: impl FnOnce(u16) -> Routes) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        let port = listener.local_addr().unwrap().port();
        let routes = make(port);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, done) = (asked.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                serve(stream, &routes, &log);
            }
        });
        Server {
            port,
            asked,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(stream: TcpStream, routes: &Routes, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("cloning the stream"));
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    // Skip the headers.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("").to_string();
    log.lock().unwrap().push(path.clone());
    let (status, header, body) =
        routes
            .get(&path)
            .cloned()
            .unwrap_or((404, String::new(), b"not found".to_vec()));
    let mut out = stream;
    let _ = write!(
        out,
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n{header}\r\n",
        body.len()
    );
    let _ = out.write_all(&body);
}

fn route(status: u16, header: &str, body: &str) -> (u16, String, Vec<u8>) {
    (status, header.to_string(), body.as_bytes().to_vec())
}

#[test]
fn run_a_config_over_http_on_loopback() {
    let server = Server::start(HashMap::from([
        ("/cfg/config.jsonnet".to_string(), route(200, "", CONFIG)),
        (
            "/cfg/lib/steps.libsonnet".to_string(),
            route(200, "", STEPS),
        ),
        (
            "/moved.jsonnet".to_string(),
            route(302, "Location: /cfg/config.jsonnet\r\n", ""),
        ),
        (
            "/plain.json".to_string(),
            route(
                200,
                "",
                r#"{"transforms":[{"type":"send_stdout","settings":{}}]}"#,
            ),
        ),
    ]));
    let d = Dir::new();
    d.sluice(
        &["run", "-c", &server.url("/cfg/config.jsonnet")],
        "{\"a\":\"q\"}\n",
    )
    .assert_stdout("{\"a\":\"Q\"}\n");
    assert_eq!(
        server.asked(),
        vec!["/cfg/config.jsonnet", "/cfg/lib/steps.libsonnet"],
        "the config, then its import; the library is never fetched"
    );
    // A redirect is followed; imports resolve against the URL it led to.
    d.sluice(
        &["run", "-c", &server.url("/moved.jsonnet")],
        "{\"a\":\"r\"}\n",
    )
    .assert_stdout("{\"a\":\"R\"}\n");
    d.sluice(&["run", "-c", &server.url("/plain.json")], "x\n")
        .assert_stdout("x\n");
    let out = d.sluice(&["test", &server.url("/cfg/config.jsonnet")], "");
    out.assert_code(0);
    assert!(
        out.stdout_str().ends_with("1 passed, 0 failed\n"),
        "{}",
        out.stdout_str()
    );
}

#[test]
fn http_errors_name_the_url_and_the_cause() {
    let server = Server::start(HashMap::new());
    let d = Dir::new();
    let url = server.url("/missing.jsonnet");
    d.sluice(&["run", "-c", &url], "")
        .assert_failure(&format!("error: {url}: HTTP 404\n"));

    // TLS to a plain-HTTP server fails the handshake.
    let url = format!("https://127.0.0.1:{}/c.jsonnet", server.port);
    let out = d.sluice(&["run", "-c", &url], "");
    out.assert_code(1);
    assert!(
        out.stderr
            .starts_with(&format!("error: {url}: request failed: ")),
        "{}",
        out.stderr
    );

    // Plain http goes only to loopback: refused before any connection is made.
    d.sluice(&["run", "-c", "http://config.example/c.jsonnet"], "")
        .assert_failure(
            "error: http://config.example/c.jsonnet: plain http is accepted only for loopback \
             hosts (localhost, 127.0.0.0/8, [::1]); use https\n",
        );
}

/// A config read from a URL imports only from under its own directory, at its own origin:
/// another directory, port or scheme, `s3://`, `file://` and the cloud metadata service's
/// link-local address are refused (never fetched), with an error naming the import and the
/// flag; `--allow-remote-imports` lifts the rule.
#[test]
fn remote_imports_stay_under_the_configs_own_directory() {
    const OUTSIDE: &str = r#"{ t: [std.extVar('sub').tf.send.stdout()] }"#;
    let other = Server::start(HashMap::new());
    let other_port = other.port;
    let imports = [
        "../outside.libsonnet".to_string(),
        format!("http://127.0.0.1:{other_port}/cfg/lib.libsonnet"),
        "s3://bucket/cfg/lib.libsonnet".to_string(),
        "file:///etc/passwd".to_string(),
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/".to_string(),
    ];
    let d = Dir::new();
    for (i, import) in imports.iter().enumerate() {
        let path = format!("/cfg/c{i}.jsonnet");
        let cfg = format!("local x = import '{import}';\n{{ transforms: x.t }}\n");
        let mut routes = HashMap::new();
        routes.insert(path.clone(), route(200, "", &cfg));
        routes.insert("/outside.libsonnet".to_string(), route(200, "", OUTSIDE));
        let s = Server::start(routes);
        let out = d.sluice(&["run", "-c", &s.url(&path)], "x\n");
        out.assert_code(1);
        assert!(
            out.stderr.contains("not imported"),
            "{import}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("--allow-remote-imports"),
            "{}",
            out.stderr
        );
        assert_eq!(
            s.asked(),
            vec![path.clone()],
            "{import}: only the config is fetched"
        );
        if i == 0 {
            assert!(
                out.stderr.contains(&s.url("/outside.libsonnet")),
                "names the import: {}",
                out.stderr
            );
            // Allowed by the flag: the import is fetched.
            d.sluice(
                &["run", "--allow-remote-imports", "-c", &s.url(&path)],
                "x\n",
            )
            .assert_stdout("x\n");
        }
    }
    assert!(other.asked().is_empty(), "the other origin is never asked");
}

/// Issue 51: the files a config read from a URL makes sluice read (a kv store's `file`)
/// follow the imports' rule: under the config's own directory, at its origin. Another
/// directory, another origin and a local path are refused before anything is read, by
/// `run`, `test` and `vet`, with an error naming the transform, the setting and the flag;
/// `--allow-remote-imports` (or `SLUICE_ALLOW_REMOTE_IMPORTS=1`) lets them through.
#[test]
fn kv_store_files_of_a_remote_config_stay_under_its_own_directory() {
    const CSV: &str = "id,name\nu1,ann\n";
    let d = Dir::new();
    let local = d.write("users.csv", CSV);
    let local = local.to_str().unwrap().to_string();
    let other = Server::start(HashMap::from([(
        "/cfg/users.csv".to_string(),
        route(200, "", CSV),
    )]));
    let config = |file: &str| {
        format!(
            "local sub = std.extVar('sub');\n\
             {{ transforms: [sub.tf.enrich.kv_store.iget({{ obj: {{ src: 'id', trg: 'name' }},\n\
               kv_store: sub.kv_store.csv_file({{ file: '{file}', column: 'id' }}) }}), sub.tf.send.stdout()] }}\n"
        )
    };
    let want = "{\"id\":\"u1\",\"name\":{\"name\":\"ann\"}}\n";
    // The file (`{port}` is the config's own server's), and whether it is refused without
    // the flag.
    let cases = [
        ("http://127.0.0.1:{port}/cfg/users.csv".to_string(), false),
        ("http://127.0.0.1:{port}/users.csv".to_string(), true),
        (other.url("/cfg/users.csv"), true),
        (local.clone(), true),
        ("users.csv".to_string(), true),
    ];
    for (file, refused) in cases {
        let mut named = String::new();
        let s = Server::start_at(|port| {
            named = file.replace("{port}", &port.to_string());
            HashMap::from([
                (
                    "/cfg/c.jsonnet".to_string(),
                    route(200, "", &config(&named)),
                ),
                ("/cfg/users.csv".to_string(), route(200, "", CSV)),
                ("/users.csv".to_string(), route(200, "", CSV)),
            ])
        });
        let file = named;
        let url = s.url("/cfg/c.jsonnet");
        if !refused {
            d.sluice(&["run", "-c", &url], "{\"id\":\"u1\"}\n")
                .assert_stdout(want);
            continue;
        }
        for args in [vec!["run", "-c"], vec!["test"], vec!["vet"]] {
            let mut all = args.clone();
            all.push(&url);
            let out = d.sluice(&all, "{\"id\":\"u1\"}\n");
            let text = format!("{}{}", out.stderr, out.stdout_str());
            assert_eq!(out.code, Some(1), "{file}: sluice {all:?}: {text}");
            for part in [
                "transforms[0] (enrich_kv_store_get)",
                "settings.kv_store.settings.file (csv_file)",
                &format!("{file:?} is not read"),
                "--allow-remote-imports",
                "SLUICE_ALLOW_REMOTE_IMPORTS=1",
            ] {
                assert!(
                    text.contains(part),
                    "{file}: sluice {all:?}: {part}: {text}"
                );
            }
        }
        assert_eq!(
            s.asked(),
            vec!["/cfg/c.jsonnet"; 3],
            "{file}: only the config is read"
        );
        // The flag, or the variable, lets it through.
        d.sluice(
            &["run", "--allow-remote-imports", "-c", &url],
            "{\"id\":\"u1\"}\n",
        )
        .assert_stdout(want);
        d.sluice_env(
            &["run", "-c", &url],
            "{\"id\":\"u1\"}\n",
            &[("SLUICE_ALLOW_REMOTE_IMPORTS".to_string(), "1".to_string())],
        )
        .assert_stdout(want);
    }
}

/// Inputs at URLs, as Substation's `read` takes them: objects in S3 (moto; one gzipped, as
/// logs are) and Cloud Storage (the emulator) and a page over HTTP on loopback, read in
/// order; a bad line is named by its URL and line; a missing object is an error naming its
/// URL.
#[test]
fn run_reads_inputs_from_s3_cloud_storage_and_http() {
    use flate2::{Compression, write::GzEncoder};
    let s3 = moto::endpoint();
    let bucket = unique_table("sluice-input");
    moto::create_bucket(&s3, &bucket);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(b"{\"n\":1}\n{\"n\":2}\n").unwrap();
    moto::put_object(&s3, &bucket, "logs/a.jsonl.gz", &gz.finish().unwrap());
    let gs = gcs::endpoint();
    gcs::create_bucket(&gs, &bucket);
    gcs::put_object(&gs, &bucket, "logs/b.jsonl", b"{\"n\":3}\nnot json\n");
    let server = Server::start(HashMap::from([(
        "/c.jsonl".to_string(),
        route(200, "", "{\"n\":5}\n"),
    )]));
    let mut env = moto::process_env(&s3);
    env.push((
        "STORAGE_EMULATOR_HOST".to_string(),
        gs.trim_start_matches("http://").to_string(),
    ));
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n\
         { transforms: [sub.tf.obj.insert({ obj: { trg: 'seen' }, value: true }), sub.tf.send.stdout()] }\n",
    );
    let (a, b, c) = (
        format!("s3://{bucket}/logs/a.jsonl.gz"),
        format!("gs://{bucket}/logs/b.jsonl"),
        server.url("/c.jsonl"),
    );
    let out = d.sluice_env(&["run", "-c", "cfg.jsonnet", &a, &b, &c], "", &env);
    out.assert_code(1);
    assert_eq!(
        out.stdout_str(),
        "{\"n\":1,\"seen\":true}\n{\"n\":2,\"seen\":true}\n{\"n\":3,\"seen\":true}\n{\"n\":5,\"seen\":true}\n"
    );
    assert!(
        out.stderr.contains(&format!(
            "{b}:2: not delivered: transforms[0] (object_insert, id "
        )) && out.stderr.contains("1 of 5 input lines were not delivered"),
        "{}",
        out.stderr
    );

    let missing = format!("s3://{bucket}/logs/none.jsonl");
    let out = d.sluice_env(&["run", &missing], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr
            .starts_with(&format!("error: {missing}: GetObject failed"))
            && out.stderr.contains("NoSuchKey"),
        "{}",
        out.stderr
    );
    let out = d.sluice_env(&["run", &server.url("/gone.jsonl")], "", &env);
    out.assert_code(1);
    assert!(
        out.stderr.contains("/gone.jsonl: HTTP 404"),
        "{}",
        out.stderr
    );
}
