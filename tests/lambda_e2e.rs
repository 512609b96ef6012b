//! The `sluice-lambda` bootstrap end to end through the Lambda runtime API, as cargo-lambda
//! emulates it (`cargo lambda watch --only-lambda-apis`, installed into .emulators/venv by
//! scripts/emulators.sh; it starts offline): the binary is started with
//! `AWS_LAMBDA_RUNTIME_API` pointing at it and invoked with `cargo lambda invoke
//! --data-file`. The pipeline locks each record in DynamoDB (dynoxide) and sends it to a
//! Kinesis stream (moto). The same batch invoked twice (a redelivery) leaves each record
//! in the stream once. A bad config fails the init with a log line naming it.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Dir, dynamodb, moto, workspace_root};

pub(crate) fn cargo_lambda() -> PathBuf {
    let p = workspace_root().join(".emulators/venv/bin/cargo-lambda");
    assert!(
        p.exists(),
        "{} is missing: run scripts/emulators.sh install",
        p.display()
    );
    p
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// cargo-lambda's runtime API on a free port; returns it and its port once it listens.
pub(crate) fn runtime_api() -> (Proc, u16) {
    let port = free_port();
    let child = Command::new(cargo_lambda())
        .args([
            "lambda",
            "watch",
            "--only-lambda-apis",
            "-A",
            "127.0.0.1",
            "-P",
        ])
        .arg(port.to_string())
        .current_dir(workspace_root())
        .env("PATH", path_with_venv())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cargo lambda watch");
    let p = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "cargo lambda watch did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (p, port)
}

fn path_with_venv() -> String {
    format!(
        "{}:{}",
        workspace_root().join(".emulators/venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The bootstrap's command for `handler` against the runtime API on `port`, with `env` and
/// no config (a handler that needs none, or a test that sets its own).
pub(crate) fn bootstrap_command(port: u16, handler: &str, env: &[(String, String)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice-lambda"));
    c.env_remove("SLUICE_CONFIG")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env(
            "AWS_LAMBDA_RUNTIME_API",
            format!("http://127.0.0.1:{port}/.rt"),
        )
        .env("AWS_LAMBDA_FUNCTION_NAME", "_")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("SLUICE_LAMBDA_HANDLER", handler)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Starts the bootstrap with `config` against the runtime API on `port`.
pub(crate) fn bootstrap(
    port: u16,
    config: &Path,
    handler: &str,
    env: &[(String, String)],
) -> Child {
    bootstrap_command(port, handler, env)
        .env("SLUICE_CONFIG", config)
        .env("SLUICE_REPORT_BATCH_ITEM_FAILURES", "true")
        .spawn()
        .expect("sluice-lambda")
}

/// Invokes the function through the runtime API with the event in `event`; fails the test
/// (with the function's stderr) if the function exits meanwhile, no answer comes in 60 s or
/// the function answers with an error.
pub(crate) fn invoke(port: u16, event: &Path, function: &mut Proc) -> Value {
    try_invoke(port, event, function).unwrap_or_else(|e| panic!("invoke failed: {e}"))
}

/// [`invoke`], answering a function error (what `cargo lambda invoke` printed) as `Err`.
pub(crate) fn try_invoke(port: u16, event: &Path, function: &mut Proc) -> Result<Value, String> {
    let mut child = Command::new(cargo_lambda())
        .args(["lambda", "invoke", "_", "-A", "127.0.0.1", "-P"])
        .arg(port.to_string())
        .arg("--data-file")
        .arg(event)
        .args(["-o", "json"])
        .current_dir(workspace_root())
        .env("PATH", path_with_venv())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cargo lambda invoke");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child
        .try_wait()
        .expect("waiting for cargo lambda invoke")
        .is_none()
    {
        let exited = function.0.try_wait().expect("checking sluice-lambda");
        if exited.is_some() || Instant::now() > deadline {
            let _ = child.kill();
            let _ = function.0.kill();
            let _ = function.0.wait();
            let mut stderr = String::new();
            if let Some(mut e) = function.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
            }
            match exited {
                Some(status) => {
                    panic!("sluice-lambda exited ({status}) during an invocation: {stderr}")
                }
                None => panic!("no answer from the function in 60 s: {stderr}"),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("cargo lambda invoke");
    if !out.status.success() {
        return Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout))))
}

/// What `cargo lambda invoke` printed for a function error (what [`try_invoke`] answers),
/// as `(errorType, errorMessage)`. It prints `Error: <errorType>`, a blank line, then the
/// message after `×`, wrapped to its width with `│` continuation lines, then a blank line.
/// The message is unwrapped by joining the lines with a space (it wraps at spaces).
pub(crate) fn function_error(printed: &str) -> (String, String) {
    let mut lines = printed.lines();
    let error_type = lines
        .find_map(|l| l.strip_prefix("Error: "))
        .unwrap_or_else(|| panic!("no `Error: <errorType>` line: {printed}"))
        .trim()
        .to_string();
    let mut message = Vec::new();
    for l in lines.skip_while(|l| !l.trim_start().starts_with('×')) {
        let l = l.trim();
        if l.is_empty() {
            break;
        }
        message.push(l.trim_start_matches(['×', '│']).trim());
    }
    (error_type, message.join(" "))
}

/// POSTs `body` to the emulator's Invoke endpoint (`/2015-03-31/functions/_/invocations`)
/// on `port`, as `cargo lambda invoke` does, and answers the HTTP status and the body as
/// the runtime API got it from the function: for a function error, the emulator answers
/// 500 with the function's `{"errorType", "errorMessage"}` exactly.
pub(crate) fn invoke_raw(port: u16, body: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the runtime API");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "POST /2015-03-31/functions/_/invocations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp)
        .expect("an answer from the runtime API within 60 s");
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP response: {resp:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head}"));
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "a chunked answer is not read here: {head}"
    );
    (status, body.to_string())
}

/// A Kinesis event of one record per id (data `{"id": id, "n": i}`, sequence number
/// `1000 + i`).
pub(crate) fn kinesis_event(ids: &[&str]) -> Value {
    use base64::Engine;
    let records: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let data = json!({"id": id, "n": i}).to_string();
            json!({
                "kinesis": {
                    "partitionKey": id,
                    "sequenceNumber": format!("{}", 1000 + i),
                    "data": base64::engine::general_purpose::STANDARD.encode(data),
                    "approximateArrivalTimestamp": 1700000000.0,
                    "kinesisSchemaVersion": "1.0",
                },
                "eventSource": "aws:kinesis",
                "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/in",
            })
        })
        .collect();
    json!({ "Records": records })
}

#[test]
fn a_redelivered_kinesis_batch_reaches_the_sink_once() {
    let ddb = dynamodb::endpoint();
    let mt = moto::endpoint();
    let table = dynamodb::unique_table("sluice-lambda-locks");
    let stream = dynamodb::unique_table("sluice-lambda-out");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
    rt.block_on(moto::create_stream(&mt, &stream, 2));

    let d = Dir::new();
    let cfg = d.write(
        "config.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  concurrency: 2,
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.aws.dynamodb({{ aws: {{ arn: 'arn:aws:dynamodb:us-east-1:000000000000:table/{table}' }}, attributes: {{ partition_key: 'PK', ttl: 'ttl' }} }}),
      prefix: 'lambda',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      duplicates: 'drop',
      transforms: [
        sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: '{arn}' }} }}),
      ],
    }}),
  ],
}}
"#,
            arn = moto::stream_arn(&stream)
        ),
    );
    let ids: Vec<String> = (0..25).map(|i| format!("rec-{i}")).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let event = d.write("kinesis.json", kinesis_event(&id_refs).to_string());

    let mut env = moto::process_env(&mt);
    env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), ddb.clone()));
    env.push(("SLUICE_METRICS".into(), "off".into()));
    let (_api, port) = runtime_api();
    let mut f = Proc(bootstrap(port, &cfg, "AWS_KINESIS_DATA_STREAM", &env));

    for round in 0..2 {
        let resp = invoke(port, &event, &mut f);
        assert_eq!(resp, json!({"batchItemFailures": []}), "round {round}");
    }
    let _ = f.0.kill();
    let _ = f.0.wait();
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut f.0.stdout.take().unwrap(), &mut logs).unwrap();
    assert!(
        logs.lines()
            .any(|l| l.contains("\"request_id\"") && l.contains("invocation done")),
        "JSON logs with the request id: {logs}"
    );

    let mut got: Vec<String> = rt
        .block_on(moto::read_stream(&mt, &stream))
        .into_iter()
        .flat_map(|(_, records)| records)
        .map(|(_, data)| {
            let v: Value = serde_json::from_slice(&data).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    got.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(got, want, "each record once");
    let locks = rt.block_on(dynamodb::scan(&ddb, &table));
    assert_eq!(locks.len(), ids.len());
}

#[test]
fn a_bad_config_fails_the_init_with_a_log_line() {
    let d = Dir::new();
    let cfg = d.write(
        "config.jsonnet",
        "{ transforms: [ { type: 'object_copyy', settings: {} } ] }",
    );
    let port = free_port();
    let mut child = bootstrap(port, &cfg, "AWS_SQS", &[]);
    let status = child.wait().unwrap();
    assert!(!status.success());
    let mut lines = Vec::new();
    for l in BufReader::new(child.stdout.take().unwrap()).lines() {
        lines.push(l.unwrap());
    }
    let line = lines
        .iter()
        .find(|l| l.contains("init failed"))
        .unwrap_or_else(|| panic!("no init failure line: {lines:?}"));
    let v: Value = serde_json::from_str(line).expect("a JSON log line");
    let err = v["fields"]["error"].as_str().unwrap();
    assert!(err.contains("config.jsonnet"), "{err}");
    assert!(
        err.contains("did you mean"),
        "the nearest valid types: {err}"
    );

    let mut child = bootstrap(port, &cfg, "AWS_NOPE", &[]);
    assert!(!child.wait().unwrap().success());
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(
        out.contains("SLUICE_LAMBDA_HANDLER: unknown handler"),
        "{out}"
    );

    let good = d.write("good.jsonnet", "{ transforms: [] }");
    for bad in ["0", "1MiB", "-5"] {
        let env = [("SLUICE_BATCH_BYTES".to_string(), bad.to_string())];
        let mut child = bootstrap(port, &good, "AWS_SQS", &env);
        assert!(!child.wait().unwrap().success(), "SLUICE_BATCH_BYTES={bad}");
        let errors: Vec<String> = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .filter_map(|v| v["fields"]["error"].as_str().map(str::to_string))
            .collect();
        assert_eq!(
            errors,
            [format!(
                "SLUICE_BATCH_BYTES: expected a number of bytes above 0, got \"{bad}\""
            )]
        );
    }
}

#[test]
fn at_shutdown_sigterm_settles_what_is_owed_and_the_function_exits_cleanly() {
    let (_api, port) = runtime_api();
    let d = Dir::new();
    let cfg = d.write(
        "config.jsonnet",
        "local sub = std.extVar('sub'); { transforms: [sub.tf.send.stdout()] }",
    );
    let mut function = Proc(bootstrap(port, &cfg, "AWS_LAMBDA", &[]));
    let mut out = BufReader::new(function.0.stdout.take().expect("stdout")).lines();
    // "init done" comes once the shutdown extension is registered and SIGTERM is caught.
    let mut lines = Vec::new();
    for line in out.by_ref() {
        let line = line.expect("a log line");
        let done = line.contains("init done");
        lines.push(line);
        if done {
            break;
        }
    }
    assert!(
        !lines.iter().any(|l| l.contains("shutdown extension")),
        "registered: {lines:?}"
    );
    let event = d.write("event.json", r#"{"a":1}"#);
    invoke(port, &event, &mut function);
    // What Lambda does when it shuts the environment down.
    // SAFETY: kill(2) with our child's pid and a valid signal number.
    unsafe { libc::kill(function.0.id() as i32, libc::SIGTERM) };
    let status = function.0.wait().expect("the function exits");
    assert_eq!(status.code(), Some(0), "{lines:?}");
    let rest: Vec<String> = out.map_while(Result::ok).collect();
    assert!(
        rest.iter()
            .any(|l| l.contains("shutdown: nothing left to settle")),
        "{rest:?}"
    );
}
