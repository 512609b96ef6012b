//! Configs given as text under a name (a URL), as `sluice` loads `s3://` and `https://`
//! configs: error positions show the name, relative imports resolve against it as a URL.

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;
use sluice_config::{ConfigLoadError, Fetch, compile_text, compile_text_to_string, load_text};

const URL: &str = "s3://configs/team/config.jsonnet";

/// A fetcher over `files` (URL → text) that records what it was asked for.
fn fetcher(files: &[(&str, &str)]) -> (Fetch, Arc<Mutex<Vec<String>>>) {
    let files: HashMap<String, String> = files
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let fetch: Fetch = Box::new(move |url: &str| {
        log.lock().unwrap().push(url.to_string());
        files
            .get(url)
            .map(|t| t.as_bytes().to_vec())
            .ok_or_else(|| "NoSuchKey (The specified key does not exist.)".to_string())
    });
    (fetch, asked)
}

#[test]
fn jsonnet_text_compiles_with_the_library() {
    let text = "local sub = std.extVar('sub');\n\
                local lib = import 'sluice.libsonnet';\n\
                { transforms: [sub.tf.util.drop({ id: 'd' }), lib.tf.send.stdout({ id: 's' })] }";
    let cfg = load_text(URL, text, &[], None).unwrap();
    assert_eq!(cfg.path.to_str(), Some(URL));
    assert_eq!(cfg.transforms()[0]["type"], "utility_drop");
    assert_eq!(cfg.transforms()[1]["type"], "send_stdout");
}

#[test]
fn ext_strs_and_json_by_extension() {
    let v = compile_text(
        URL,
        "{ transforms: [], env: std.extVar('env') }",
        &[("env".into(), "prod".into())],
        None,
    )
    .unwrap();
    assert_eq!(v, json!({"transforms": [], "env": "prod"}));
    // `.json` is parsed as JSON: Jsonnet syntax is an error with JSON's position.
    let e = compile_text("https://h/c.json?v=2", "{transforms: []}", &[], None).unwrap_err();
    assert!(matches!(e, ConfigLoadError::Json { line: 1, .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("https://h/c.json?v=2:1:2: invalid JSON"),
        "{e}"
    );
    // No extension: evaluated as Jsonnet, which reads JSON too.
    let v = compile_text(
        "http://127.0.0.1:2772/applications/a/configurations/p",
        r#"{"transforms": []}"#,
        &[],
        None,
    )
    .unwrap();
    assert_eq!(v, json!({"transforms": []}));
    let pretty = compile_text_to_string(URL, "{transforms: []}", &[], None, true).unwrap();
    assert_eq!(pretty, "{\n  \"transforms\": []\n}");
}

#[test]
fn errors_name_the_url_and_the_position() {
    let e = load_text(
        URL,
        "{\n  transforms: [\n    { type: 'x' \n  ],\n}\n",
        &[],
        None,
    )
    .unwrap_err();
    assert!(matches!(e, ConfigLoadError::Jsonnet { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("syntax error"), "{text}");
    assert!(
        text.contains("s3://configs/team/config.jsonnet:4:"),
        "{text}"
    );

    let e = load_text(URL, "{\n  transforms: [error 'boom'],\n}", &[], None).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("boom"), "{text}");
    assert!(
        text.contains("s3://configs/team/config.jsonnet:2:"),
        "{text}"
    );

    let e = load_text(URL, "{ tests: [] }", &[], None).unwrap_err();
    assert!(
        matches!(e, ConfigLoadError::MissingTransforms { .. }),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("s3://configs/team/config.jsonnet: `transforms` is missing"),
        "{e}"
    );
}

#[test]
fn relative_imports_resolve_against_the_url() {
    let (fetch, asked) = fetcher(&[
        (
            "s3://configs/team/lib/steps.libsonnet",
            "{ steps: [import '../shared.json'] }",
        ),
        (
            "s3://configs/team/shared.json",
            r#"{"type": "utility_drop", "settings": {}}"#,
        ),
    ]);
    let text = "local s = import 'lib/steps.libsonnet';\n\
                local sub = import '../../substation.libsonnet';\n\
                { transforms: s.steps + [sub.tf.send.stdout()] }";
    let cfg = load_text(URL, text, &[], Some(fetch)).unwrap();
    assert_eq!(cfg.transforms()[0]["type"], "utility_drop");
    assert_eq!(cfg.transforms()[1]["type"], "send_stdout");
    assert_eq!(
        *asked.lock().unwrap(),
        vec![
            "s3://configs/team/lib/steps.libsonnet",
            "s3://configs/team/shared.json"
        ],
        "each import once; the library is never fetched"
    );
}

#[test]
fn failed_imports_name_the_url_and_the_cause() {
    let (fetch, _) = fetcher(&[]);
    let e = load_text(
        URL,
        "local x = import 'missing.libsonnet';\n{ transforms: [x] }",
        &[],
        Some(fetch),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("s3://configs/team/config.jsonnet: "),
        "{text}"
    );
    assert!(
        text.contains(
            "s3://configs/team/missing.libsonnet: NoSuchKey (The specified key does not exist.)"
        ),
        "{text}"
    );
    assert!(text.contains("config.jsonnet:1:"), "{text}");

    // Without a fetcher only the library can be imported.
    let e = load_text(
        URL,
        "local x = import 'lib.libsonnet';\n{ transforms: [x] }",
        &[],
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cannot import \"lib.libsonnet\" from s3://configs/team/config.jsonnet: it can import only the library"),
        "{e}"
    );
}
