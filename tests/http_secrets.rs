//! `utility_secret` and the HTTP transforms through the real `sluice` binary: a secret from
//! an environment variable or from Secrets Manager (moto) fills `${SECRET:id}` in a header
//! sent to an HTTP server this test process runs on loopback; `send_http_post` posts every
//! line; a rejected request fails the run with an error that does not show the secret; and
//! the library's `sub.secrets.*` functions build through the registry.

use sluice_platform::http::test_server::{Reply, Server};

use crate::common::{Dir, Output, dynamodb::unique_table, moto};

/// Asserts the run failed (exit 1) with `text` in its standard error.
#[track_caller]
fn assert_fails_with(out: &Output, text: &str) {
    assert!(
        out.code.is_some_and(|c| c != 0),
        "expected a failure, got {:?}:\n{}",
        out.code,
        out.stderr
    );
    assert!(
        out.stderr.contains(text),
        "{text:?} not in:\n{}",
        out.stderr
    );
}

fn run(cfg: &str, stdin: &str, env: &[(String, String)]) -> Output {
    let d = Dir::new();
    d.write("cfg.jsonnet", cfg);
    d.sluice_env(&["run", "-c", "cfg.jsonnet"], stdin, env)
}

/// Answers with the Authorization header it got, or 401 echoing it.
fn auth_server(want: &'static str) -> Server {
    Server::start(move |req| match req.header("authorization") {
        Some(a) if a == want => Reply::ok(&format!(r#"{{"path":"{}"}}"#, req.path)),
        other => Reply::status(401, &format!("bad credentials: {}", other.unwrap_or(""))),
    })
}

#[test]
fn a_secret_from_the_environment_fills_a_header() {
    let server = auth_server("Bearer env-tok-5150");
    let cfg = format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.util.secret({{ secret: sub.secrets.environment_variable({{ id: 'tok', name: 'SLUICE_IT_TOKEN' }}) }}),
    sub.tf.enrich.http.get({{
      url: '{}/users/${{DATA}}',
      headers: {{ Authorization: 'Bearer ${{SECRET:tok}}' }},
      obj: {{ src: 'id', trg: 'user' }},
    }}),
    sub.tf.send.stdout(),
  ],
}}
"#,
        server.url()
    );
    let env = vec![("SLUICE_IT_TOKEN".to_string(), "env-tok-5150".to_string())];
    run(&cfg, "{\"id\":\"7\"}\n{\"id\":\"8\"}\n", &env)
        .assert_clean_success()
        .assert_stdout("{\"id\":\"7\",\"user\":{\"path\":\"/users/7\"}}\n{\"id\":\"8\",\"user\":{\"path\":\"/users/8\"}}\n");

    // The wrong token: the server rejects it and echoes it; the error names the URL as
    // configured and leaves out the body, which may echo the secret the request carried.
    let env = vec![("SLUICE_IT_TOKEN".to_string(), "env-tok-wrong".to_string())];
    let out = run(&cfg, "{\"id\":\"7\"}\n", &env);
    assert_fails_with(
        &out,
        "HTTP 401 (body omitted: the request carried a secret)",
    );
    assert!(!out.stderr.contains("env-tok-wrong"), "{}", out.stderr);

    // Unset: a config error naming the variable.
    assert_fails_with(
        &run(&cfg, "{}\n", &[]),
        "settings.secret.settings.name: environment variable \"SLUICE_IT_TOKEN\" is not set",
    );
}

#[test]
fn a_secret_from_secrets_manager_fills_a_header() {
    let endpoint = moto::endpoint();
    let name = unique_table("sluice-secret");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = crate::common::emulator_client!(aws_sdk_secretsmanager, &endpoint);
    let arn = rt
        .block_on(
            client
                .create_secret()
                .name(&name)
                .secret_string("sm-tok-8086")
                .send(),
        )
        .expect("CreateSecret")
        .arn
        .expect("an ARN");
    let server = auth_server("Bearer sm-tok-8086");
    let cfg = format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.util.secret({{ secret: sub.secrets.aws.secrets_manager({{ id: 'sm', aws: {{ arn: '{arn}' }} }}) }}),
    sub.tf.send.http.post({{ url: '{}/in', hdr: {{ Authorization: 'Bearer ${{SECRET:sm}}' }} }}),
    sub.tf.util.drop(),
  ],
}}
"#,
        server.url()
    );
    run(&cfg, "a\nb\nc\n", &moto::process_env(&endpoint)).assert_clean_success();
    let bodies: Vec<String> = server.requests().iter().map(|r| r.text()).collect();
    assert_eq!(bodies, ["a", "b", "c"]);

    // At trace level too (the AWS SDK's logs of the GetSecretValue call included), the
    // secret's value is nowhere in what sluice prints.
    let mut env = moto::process_env(&endpoint);
    env.push(("SLUICE_LOG".to_string(), "trace".to_string()));
    let out = run(&cfg, "a\n", &env);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("TRACE aws_smithy"),
        "the SDK's trace logs were written:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("sm-tok-8086"), "{}", out.stderr);

    // A secret that does not exist: an error naming it.
    let missing = cfg.replace(&arn, "no-such-secret");
    assert_fails_with(
        &run(&missing, "a\n", &moto::process_env(&endpoint)),
        "secret \"sm\": GetSecretValue of \"no-such-secret\" failed: ResourceNotFoundException",
    );
}

#[test]
fn send_http_post_failures_fail_the_run() {
    let server = Server::start(|req| {
        if req.text() == "bad" {
            Reply::status(422, "unprocessable")
        } else {
            Reply::ok("")
        }
    });
    let cfg = format!(
        r#"
local sub = std.extVar('sub');
{{ transforms: [sub.tf.send.http.post({{ url: '{}/in' }}), sub.tf.util.drop()] }}
"#,
        server.url()
    );
    assert_fails_with(&run(&cfg, "ok\nbad\n", &[]), "HTTP 422: unprocessable");
    let cfg = cfg.replace("/in' }", "/in', accept_client_errors: true }");
    run(&cfg, "ok\nbad\n", &[]).assert_clean_success();
}

#[test]
fn the_library_secrets_build_through_the_registry() {
    let cfg = r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.util.secret({ secret: sub.secrets.environment_variable({ id: 'a', name: 'PATH', ttl_offset: '1h' }) }),
    sub.tf.util.secret({ secret: sub.secrets.aws.secrets_manager({ id: 'b', aws: { arn: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:x-AbCdEf' } }) }),
    sub.tf.enrich.dns.txt_lookup({ resolver: '127.0.0.1:53' }),
    sub.tf.enrich.http.post({ url: 'https://h/x', body_key: 'b' }),
  ],
}
"#;
    let json = sluice_config::compile_text("cfg.jsonnet", cfg, &[], None).unwrap();
    sluice_transforms::registry()
        .build_pipeline(&json["transforms"].clone(), "transforms")
        .unwrap_or_else(|e| panic!("{e}"));
}

/// A secret never shows in what sluice prints, at any log level: the standard output and
/// error of `sluice run` and `sluice test` with `SLUICE_LOG=trace`, while requests that carry
/// it in a header and in the URL are retried, rejected with the secret echoed back, and the
/// run fails; and the report of a test that fails the same way.
#[test]
fn a_secret_never_shows_in_any_output_at_any_log_level() {
    const SECRET: &str = "s3cr3t-9c41-visible-nowhere";
    // 503 twice (retried, each retry logged), then 401 with the request echoed back.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let server = Server::start(move |req| {
        let echo = format!(
            "path {} authorization {}",
            req.path,
            req.header("authorization").unwrap_or("")
        );
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 3 < 2 {
            Reply::status(503, &echo)
        } else {
            Reply::status(401, &echo)
        }
    });
    let transforms = format!(
        r#"[
    sub.tf.util.secret({{ secret: sub.secrets.environment_variable({{ id: 'tok', name: 'SLUICE_IT_SECRET' }}) }}),
    sub.tf.enrich.http.get({{
      url: '{url}/q?key=${{SECRET:tok}}&id=${{DATA}}',
      headers: {{ Authorization: 'Bearer ${{SECRET:tok}}' }},
      obj: {{ src: 'id', trg: 'user' }},
      retry: {{ count: 2, delay: '10ms' }},
    }}),
    sub.tf.send.stdout(),
  ]"#,
        url = server.url()
    );
    let cfg = format!(
        "local sub = std.extVar('sub');\n{{\n  tests: [{{ name: 'leaks', transforms: [sub.tf.test.message({{ value: {{ id: '1' }} }})], condition: sub.cnd.str.eq({{ obj: {{ src: 'user' }}, value: 'x' }}) }}],\n  transforms: {transforms},\n}}\n"
    );
    let d = Dir::new();
    d.write("cfg.jsonnet", &cfg);
    let env = vec![
        ("SLUICE_IT_SECRET".to_string(), SECRET.to_string()),
        ("SLUICE_LOG".to_string(), "trace".to_string()),
    ];
    let run = d.sluice_env(&["run", "-c", "cfg.jsonnet"], "{\"id\":\"7\"}\n", &env);
    assert_fails_with(&run, "HTTP 401");
    let test = d.sluice_env(&["test", "cfg.jsonnet"], "", &env);
    assert!(test.code.is_some_and(|c| c != 0), "{}", test.stdout_str());
    assert!(
        calls.load(std::sync::atomic::Ordering::SeqCst) >= 6,
        "both made their requests"
    );
    for (what, text) in [
        ("run stdout", run.stdout_str()),
        ("run stderr", run.stderr.as_str()),
        ("test stdout", test.stdout_str()),
        ("test stderr", test.stderr.as_str()),
    ] {
        assert!(
            !text.contains(SECRET),
            "the secret is in the {what}:\n{text}"
        );
    }
    // The outputs are not empty: at trace level the retries were logged, and the error
    // and the report name the request, leaving out the body that echoed the secret.
    assert!(
        run.stderr
            .contains("HTTP 401 (body omitted: the request carried a secret)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(" TRACE "), "trace logs were written");
    assert!(
        test.stdout_str().contains("--- FAIL: leaks"),
        "{}",
        test.stdout_str()
    );
}

/// A secret loaded by `utility_secret` and echoed back by a server in another form than
/// its own (JSON-escaped, percent-encoded with `%20` or `+`, base64 standard or URL-safe) is
/// redacted from the error, and so is one that straddles the cut at 200 characters: the
/// error shows none of its characters. (The request itself carries no secret, so the body
/// is shown, redacted.)
#[test]
fn a_secret_echoed_in_any_encoding_or_cut_never_shows() {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    const SECRET: &str = "pa ss/\"w0rd+=é-42";
    let json = serde_json::to_string(SECRET).unwrap();
    let json = json[1..json.len() - 1].to_string();
    let percent: String = SECRET
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let plus = percent.replace("%20", "+");
    let forms = [
        ("json", json),
        ("percent", percent),
        ("plus", plus),
        ("base64", STANDARD.encode(SECRET)),
        ("base64url", URL_SAFE_NO_PAD.encode(SECRET)),
        // The secret straddles the 200th character.
        ("cut", format!("{}{SECRET}", "x".repeat(185))),
    ];
    for (name, echoed) in forms {
        let body = format!("rejected: {echoed} (end)");
        let server = Server::start(move |_| Reply::status(400, &body));
        let cfg = format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.util.secret({{ secret: sub.secrets.environment_variable({{ id: 'tok', name: 'SLUICE_IT_ECHO' }}) }}),
    sub.tf.enrich.http.get({{ url: '{}/q/${{DATA}}', obj: {{ src: 'id', trg: 'user' }} }}),
    sub.tf.send.stdout(),
  ],
}}
"#,
            server.url()
        );
        let env = vec![("SLUICE_IT_ECHO".to_string(), SECRET.to_string())];
        let out = run(&cfg, "{\"id\":\"7\"}\n", &env);
        assert_fails_with(&out, "HTTP 400: rejected: ");
        assert!(out.stderr.contains("<redacted>"), "{name}: {}", out.stderr);
        // No 6 characters of the secret in a row.
        for (i, _) in SECRET.char_indices() {
            let Some(piece) = SECRET.get(i..i + 6) else {
                continue;
            };
            assert!(
                !out.stderr.contains(piece),
                "{name}: {piece:?} in {}",
                out.stderr
            );
        }
    }
}
