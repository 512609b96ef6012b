//! What a person sees when an AWS call fails: one line naming the transform, the resource,
//! the operation and the cause in words (the endpoint cannot be reached, no credentials),
//! and nothing of the SDK's `Debug` forms or the credential chain's per-provider warnings.
//! Instance metadata is never reached: it is disabled, as in every test.

use std::net::TcpListener;

use crate::common::Dir;

const CONFIG: &str = r#"local sub = std.extVar('sub');
{ transforms: [
  sub.tf.send.aws.kinesis_data_stream({ aws: { arn: 'arn:aws:kinesis:us-east-1:123456789012:stream/x' } }),
] }
"#;

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    port
}

fn no_debug_dump(stderr: &str) {
    for dump in [
        "DispatchFailure",
        "ConnectorError",
        "ProviderError",
        "{ ",
        "WARN",
    ] {
        assert!(!stderr.contains(dump), "{dump:?} in {stderr}");
    }
    // The line that failed, named with the error, then the count.
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
}

#[test]
fn an_unreachable_endpoint_is_one_line_in_words() {
    let d = Dir::new();
    d.write("k.jsonnet", CONFIG);
    let env: Vec<(String, String)> = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .chain([(
        "AWS_ENDPOINT_URL".to_string(),
        format!("http://127.0.0.1:{}", closed_port()),
    )])
    .collect();
    let out = d.sluice_env(&["run", "-c", "k.jsonnet"], "{\"a\":1}\n", &env);
    out.assert_code(1);
    assert!(
        out.stderr.starts_with(
            "sluice: <stdin>:1: not delivered: transforms[0] (send_aws_kinesis_data_stream, id d3c4d388-5d93288f): kinesis stream x: \
             PutRecords failed: the endpoint cannot be reached: "
        ) && out
            .stderr
            .ends_with("error: 1 of 1 input lines were not delivered\n"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("Connection refused"), "{}", out.stderr);
    no_debug_dump(&out.stderr);
}

#[test]
fn missing_credentials_are_said_once_without_the_chains_warnings() {
    let d = Dir::new();
    d.write("k.jsonnet", CONFIG);
    let home = d.path().to_string_lossy().into_owned();
    let env: Vec<(String, String)> = [
        ("HOME", home.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
        // Set but empty: the environment provider finds nothing.
        ("AWS_ACCESS_KEY_ID", ""),
        ("AWS_SECRET_ACCESS_KEY", ""),
        ("AWS_PROFILE", ""),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let out = d.sluice_env(&["run", "-c", "k.jsonnet"], "{\"a\":1}\n", &env);
    out.assert_code(1);
    assert_eq!(
        out.stderr,
        "sluice: <stdin>:1: not delivered: transforms[0] (send_aws_kinesis_data_stream, id d3c4d388-5d93288f): kinesis stream x: \
         PutRecords failed: no AWS credentials found (none in the environment, the profile, \
         a web identity token, the container or instance metadata)\n\
         error: 1 of 1 input lines were not delivered\n"
    );
    no_debug_dump(&out.stderr);
}
