//! `sluice test` as a real process: the report format, exit codes, and which files it takes.

use crate::common::{Dir, workspace_root};

const PASSING: &str = r#"local sub = std.extVar('sub');
{
  tests: [
    {
      name: 'uppercases',
      transforms: [sub.tf.test.message({ value: { a: 'b' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
    },
  ],
  transforms: [sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } })],
}
"#;

const FAILING: &str = r#"local sub = std.extVar('sub');
{
  tests: [
    {
      name: 'passes',
      transforms: [sub.tf.test.message({ value: { a: 'b' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
    },
    {
      name: 'wrong-expectation',
      transforms: [sub.tf.test.message({ value: { a: 'b' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'z' }),
    },
  ],
  transforms: [sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } })],
}
"#;

const NO_TESTS: &str = "local sub = std.extVar('sub');\n{ transforms: [sub.tf.obj.copy({ obj: { src: 'a', trg: 'b' } })] }\n";

/// A config with a test whose pipeline does not build (a config without tests is not built).
const BROKEN: &str = "{ tests: [{ name: 't', transforms: [], condition: { type: 'format_json' } }], transforms: [{ type: 'nope' }] }\n";

/// Lines of stdout, with the timing of `ok`/`FAIL` lines (`\t0.003s`) replaced by `\tTIME`.
fn report(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| {
            if (l.starts_with("ok\t") || l.starts_with("FAIL\t")) && l.ends_with('s') {
                let (head, time) = l.rsplit_once('\t').expect("a timed line");
                let secs = time.trim_end_matches('s');
                assert!(
                    secs.parse::<f64>().is_ok() && secs.contains('.'),
                    "not a time: {l:?}"
                );
                format!("{head}\tTIME")
            } else {
                l.to_string()
            }
        })
        .collect()
}

#[test]
fn the_examples_pass() {
    let root = workspace_root();
    // The AWS examples run against this binary's emulators: DynamoDB in fresh tables (those
    // of tests/fixtures/dynamodb_tables.json, which scripts/test.sh loads for `sluice test`),
    // and moto with the streams, delivery streams and buckets of
    // tests/fixtures/moto_resources.json (which `scripts/emulators.sh start moto` creates).
    let endpoint = crate::common::dynamodb::endpoint();
    let moto = crate::common::moto::endpoint();
    let resources: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/fixtures/moto_resources.json"))
            .expect("reading tests/fixtures/moto_resources.json"),
    )
    .expect("tests/fixtures/moto_resources.json is JSON");
    let names = |list: &str, field: &str| -> Vec<(String, serde_json::Value)> {
        resources[list]
            .as_array()
            .unwrap_or_else(|| panic!("moto_resources.json: {list} is a list"))
            .iter()
            .map(|r| match r {
                serde_json::Value::String(s) => (s.clone(), serde_json::Value::Null),
                r => (
                    r["name"].as_str().expect("a name").to_string(),
                    r[field].clone(),
                ),
            })
            .collect()
    };
    for (bucket, _) in names("s3_buckets", "") {
        crate::common::moto::create_bucket(&moto, &bucket);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            use crate::common::dynamodb::create_lock_table;
            create_lock_table(&endpoint, "sluice-locks", "PK", None, "ttl").await;
            create_lock_table(&endpoint, "sluice-example-events", "event_id", None, "ttl").await;
            for (stream, shards) in names("kinesis_streams", "shards") {
                let shards = shards.as_i64().expect("shards") as i32;
                crate::common::moto::create_stream(&moto, &stream, shards).await;
            }
            for (stream, bucket) in names("firehose_delivery_streams", "bucket") {
                let bucket = bucket.as_str().expect("a bucket");
                crate::common::moto::create_delivery_stream(&moto, &stream, bucket).await;
            }
        });
    let mut env = crate::common::moto::process_env(&moto);
    env.push(("AWS_ENDPOINT_URL_DYNAMODB".to_string(), endpoint.clone()));
    let out = crate::common::run_in_env(&root, &["test", "examples"], Vec::new(), None, &env);
    out.assert_code(0);
    let stdout = out.stdout_str();
    let last = stdout.lines().last().expect("a summary line");
    let (passed, rest) = last.split_once(" passed, ").expect("`N passed, M failed`");
    assert_eq!(rest, "0 failed", "{stdout}");
    let passed: usize = passed.parse().expect("a count");

    // Every example config is reported `ok`: none is skipped, none fails.
    let mut configs = Vec::new();
    let mut stack = vec![root.join("examples")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("reading examples") {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonnet") {
                configs.push(p);
            }
        }
    }
    let ok_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ok\t")).collect();
    assert_eq!(ok_lines.len(), configs.len(), "{stdout}");
    assert!(passed >= configs.len(), "at least one test per example");
    for bad in ["FAIL", "?\t", "--- FAIL"] {
        assert!(
            !stdout.lines().any(|l| l.starts_with(bad)),
            "{bad}: {stdout}"
        );
    }
}

#[test]
fn a_passing_config_is_ok() {
    let d = Dir::new();
    d.write("pass.jsonnet", PASSING);
    let out = d.sluice(&["test", "pass.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        ["ok\tpass.jsonnet\tTIME", "1 passed, 0 failed"]
    );

    let out = d.sluice(&["test", "--verbose", "pass.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        [
            "--- PASS: uppercases (1 outputs)",
            "ok\tpass.jsonnet\tTIME",
            "1 passed, 0 failed"
        ]
    );
}

#[test]
fn a_failing_test_is_reported_and_exits_non_zero() {
    let d = Dir::new();
    d.write("fail.jsonnet", FAILING);
    let out = d.sluice(&["test", "fail.jsonnet"], "");
    out.assert_failure("");
    assert_eq!(
        report(out.stdout_str()),
        [
            "--- FAIL: wrong-expectation",
            "    message:   {\"a\":\"B\"}",
            "    condition: {\"settings\":{\"object\":{\"source_key\":\"a\"},\"value\":\"z\"},\"type\":\"string_equal_to\"}",
            "FAIL\tfail.jsonnet\tTIME",
            "1 passed, 1 failed",
        ]
    );
}

#[test]
fn a_test_whose_pipeline_errors_fails_with_the_error() {
    let d = Dir::new();
    d.write(
        "rterr.jsonnet",
        r#"local sub = std.extVar('sub');
{
  tests: [{
    name: 'rejects',
    transforms: [sub.tf.test.message({ value: { a: 'b' } })],
    condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'b' }),
  }],
  transforms: [sub.tf.util.err({ id: 'reject', message: 'no user' })],
}
"#,
    );
    let out = d.sluice(&["test", "rterr.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()),
        [
            "--- FAIL: rejects",
            "    error: running the config's transforms: transforms[0] (utility_err, id reject): no user",
            "FAIL\trterr.jsonnet\tTIME",
            "0 passed, 1 failed",
        ]
    );
}

/// The ctrls a test's own transforms make reach the config as Substation passes them: a
/// `utility_control` in the test cuts the aggregate's batches.
#[test]
fn ctrls_made_by_a_tests_transforms_reach_the_config() {
    let d = Dir::new();
    d.write(
        "cut.jsonnet",
        r#"local sub = std.extVar('sub');
{
  tests: [{
    name: 'the test cuts batches of two',
    transforms: [
      sub.tf.test.message({ value: { n: 1 } }),
      sub.tf.test.message({ value: { n: 2 } }),
      sub.tf.test.message({ value: { n: 3 } }),
      sub.tf.util.control({ batch: { count: 2 } }),
    ],
    outputs: 2,
    condition: sub.cnd.num.len.lt({ value: 3, obj: { src: '@this' } }),
  }],
  transforms: [sub.tf.agg.to.array()],
}
"#,
    );
    let out = d.sluice(&["test", "cut.jsonnet"], "");
    out.assert_code(0);
    assert!(
        out.stdout_str().contains("1 passed, 0 failed"),
        "{}",
        out.stdout_str()
    );
}

#[test]
fn a_config_without_tests_is_marked_no_tests() {
    let d = Dir::new();
    d.write("notests.jsonnet", NO_TESTS);
    let out = d.sluice(&["test", "notests.jsonnet"], "");
    out.assert_stdout("?\tnotests.jsonnet\t[no tests]\n0 passed, 0 failed\n");
}

/// As in Substation, a config without tests is not built: one whose send needs a secret the
/// machine lacks is still `[no tests]`, not an error.
#[test]
fn a_config_without_tests_is_not_built() {
    let d = Dir::new();
    d.write(
        "needs_secret.jsonnet",
        r#"{ transforms: [
  { type: 'utility_secret', settings: { secret: { type: 'environment_variable', settings: { id: 'k', name: 'SLUICE_TEST_UNSET_VARIABLE' } } } },
  { type: 'send_stdout' },
] }"#,
    );
    let out = d.sluice(&["test", "needs_secret.jsonnet"], "");
    out.assert_stdout("?\tneeds_secret.jsonnet\t[no tests]\n0 passed, 0 failed\n");
}

#[test]
fn a_file_with_an_error_is_marked_error_and_exits_non_zero() {
    let d = Dir::new();
    d.write("broken.jsonnet", BROKEN);
    let out = d.sluice(&["test", "broken.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(
        out.stdout_str(),
        "?\tbroken.jsonnet\t[error]\n0 passed, 1 failed\n"
    );
    assert!(
        out.stderr
            .contains("transforms[0] (nope): unknown transform type \"nope\""),
        "{}",
        out.stderr
    );

    // A Jsonnet syntax error is an [error] too, with its place.
    d.write("syntax.jsonnet", "{ transforms: [ }\n");
    let out = d.sluice(&["test", "syntax.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(
        out.stdout_str(),
        "?\tsyntax.jsonnet\t[error]\n0 passed, 1 failed\n"
    );
    assert!(out.stderr.contains("syntax.jsonnet:1:"), "{}", out.stderr);
}

/// The error line names the file once: `broken.jsonnet: transforms[0] ...`, not
/// `broken.jsonnet: broken.jsonnet: transforms[0] ...`.
#[test]
fn a_file_error_names_the_file_once() {
    let d = Dir::new();
    d.write("broken.jsonnet", BROKEN);
    let out = d.sluice(&["test", "broken.jsonnet"], "");
    out.assert_failure("broken.jsonnet: transforms[0] (nope): unknown transform type \"nope\"\n");
}

#[test]
fn a_jsonnet_file_without_transforms_is_skipped() {
    let d = Dir::new();
    d.write("lib.jsonnet", "{ helper: 1 }\n");
    let out = d.sluice(&["test", "lib.jsonnet"], "");
    out.assert_stdout("0 passed, 0 failed\n");
}

#[test]
fn directories_are_walked_in_order_and_any_failure_fails_the_run() {
    let d = Dir::new();
    d.write("cfgs/b_fail.jsonnet", FAILING);
    d.write("cfgs/a_pass.jsonnet", PASSING);
    d.write("cfgs/c.json", "{\"transforms\": []}");
    d.write("cfgs/lib.jsonnet", "{ helper: 1 }\n");
    // Libraries, hidden directories, `target` and other extensions are not configs.
    d.write("cfgs/helpers.libsonnet", BROKEN);
    d.write("cfgs/.hidden/x.jsonnet", BROKEN);
    d.write("cfgs/target/x.jsonnet", BROKEN);
    d.write("cfgs/notes.txt", "not a config");
    d.write("cfgs/sub/pass.jsonnet", PASSING);

    let out = d.sluice(&["test", "cfgs"], "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()),
        [
            "ok\tcfgs/a_pass.jsonnet\tTIME",
            "--- FAIL: wrong-expectation",
            "    message:   {\"a\":\"B\"}",
            "    condition: {\"settings\":{\"object\":{\"source_key\":\"a\"},\"value\":\"z\"},\"type\":\"string_equal_to\"}",
            "FAIL\tcfgs/b_fail.jsonnet\tTIME",
            "?\tcfgs/c.json\t[no tests]",
            "ok\tcfgs/sub/pass.jsonnet\tTIME",
            "3 passed, 1 failed",
        ]
    );

    let out = d.sluice(&["test", "--shallow", "cfgs"], "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()).last().map(String::as_str),
        Some("2 passed, 1 failed")
    );
    assert!(!out.stdout_str().contains("sub/pass"));

    // Only the passing files: exit 0.
    let out = d.sluice(&["test", "cfgs/a_pass.jsonnet", "cfgs/sub"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        [
            "ok\tcfgs/a_pass.jsonnet\tTIME",
            "ok\tcfgs/sub/pass.jsonnet\tTIME",
            "2 passed, 0 failed",
        ]
    );
}

#[test]
fn tests_get_a_fresh_pipeline_and_batches_flush_at_the_end() {
    let d = Dir::new();
    // Each test sees only its own messages: aggregate state is not shared between tests.
    d.write(
        "agg.jsonnet",
        r#"local sub = std.extVar('sub');
{
  tests: [
    {
      name: 'first',
      transforms: [sub.tf.test.message({ value: { n: 1 } }), sub.tf.test.message({ value: { n: 2 } })],
      condition: sub.cnd.num.len.eq({ obj: { src: '@this' }, value: 2 }),
    },
    {
      name: 'second',
      transforms: [sub.tf.test.message({ value: { n: 3 } })],
      condition: sub.cnd.num.len.eq({ obj: { src: '@this' }, value: 1 }),
    },
  ],
  transforms: [sub.tf.agg.to.array({ batch: { count: 1000 } })],
}
"#,
    );
    let out = d.sluice(&["test", "-v", "agg.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        [
            "--- PASS: first (1 outputs)",
            "--- PASS: second (1 outputs)",
            "ok\tagg.jsonnet\tTIME",
            "2 passed, 0 failed",
        ]
    );
}

#[test]
fn ext_str_reaches_tested_configs() {
    let d = Dir::new();
    d.write(
        "ext.jsonnet",
        r#"local sub = std.extVar('sub');
{
  tests: [{
    name: 'env',
    transforms: [sub.tf.test.message({ value: { a: 1 } })],
    condition: sub.cnd.str.eq({ obj: { src: 'env' }, value: 'prod' }),
  }],
  transforms: [sub.tf.obj.insert({ obj: { trg: 'env' }, value: std.extVar('env') })],
}
"#,
    );
    let out = d.sluice(&["test", "--ext-str", "env=prod", "ext.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        ["ok\text.jsonnet\tTIME", "1 passed, 0 failed"]
    );
    let out = d.sluice(&["test", "--ext-str", "env=dev", "ext.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()).last().map(String::as_str),
        Some("0 passed, 1 failed")
    );
}

#[test]
fn a_path_that_does_not_exist_or_holds_no_configs_is_an_error() {
    let d = Dir::new();
    let out = d.sluice(&["test", "absent"], "");
    out.assert_failure("error: absent: No such file or directory (os error 2)\n");

    d.write("empty/readme.txt", "nothing here");
    let out = d.sluice(&["test", "empty"], "");
    out.assert_failure("error: no config files (.jsonnet, .json) found in empty\n");
}

/// `sluice test ... | head` must not panic when the reader goes away.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let d = Dir::new();
    d.write("pass.jsonnet", PASSING);
    let out = crate::common::run_with_closed_stdout(d.path(), &["test", "pass.jsonnet"], b"");
    assert!(
        !out.stderr.contains("panicked"),
        "sluice test panicked on a closed stdout: {}",
        out.stderr
    );
    assert_ne!(out.code, Some(101), "{}", out.stderr);
}

/// A config that calls AWS is skipped, with the reason, where nothing says where AWS is (a
/// fresh machine running the README's `sluice test examples/`), instead of failing after
/// the SDK waited for instance metadata; with an endpoint configured it runs.
#[test]
fn a_config_that_calls_aws_is_skipped_when_aws_is_not_configured() {
    let d = Dir::new();
    d.write(
        "aws.jsonnet",
        r#"local sub = std.extVar('sub');
{
  tests: [{ name: 'sends', transforms: [sub.tf.test.message({ value: 'x' })], condition: sub.cnd.str.eq({ value: 'x' }) }],
  transforms: [sub.tf.send.aws.sqs({ aws: { arn: 'arn:aws:sqs:us-east-1:123456789012:q' } })],
}
"#,
    );
    let run = |env: &[(&str, &str)]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.args(["test", "."]).current_dir(d.path()).env_clear();
        c.env("HOME", d.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for (k, v) in env {
            c.env(k, v);
        }
        let started = std::time::Instant::now();
        let out = c.output().expect("running sluice");
        (out, started.elapsed())
    };
    let (out, took) = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("?\t./aws.jsonnet\t[skipped: calls AWS (send_aws_sqs) and no AWS credentials, profile or endpoint is configured;"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("0 passed, 0 failed, 1 files skipped\n"),
        "{stdout}"
    );
    assert!(
        took < std::time::Duration::from_secs(10),
        "no wait for instance metadata: {took:?}"
    );
    // With an endpoint (here one that refuses connections) the test runs, and fails.
    let (out, _) = run(&[
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("--- FAIL: sends"), "{stdout}");
}

/// The report forms (`--format json`, `--junit`) and the capture of `send_stdout`.
mod reports;
