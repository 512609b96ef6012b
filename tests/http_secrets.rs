//! `utility_secret` and the HTTP transforms through the real `sluice` binary: a secret from
//! an environment variable or from Secrets Manager (moto) fills `${SECRET:id}` in a header
//! sent to an HTTP server this test process runs on loopback; `send_http_post` posts every
//! line; a rejected request fails the run with an error that does not show the secret; and
//! the library's `sub.secrets.*` functions build through the registry.

use sluice_transforms::http::test_server::{Reply, Server};

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
    // configured and hides the secret.
    let env = vec![("SLUICE_IT_TOKEN".to_string(), "env-tok-wrong".to_string())];
    let out = run(&cfg, "{\"id\":\"7\"}\n", &env);
    assert_fails_with(&out, "HTTP 401: bad credentials: Bearer <redacted>");
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
