//! Loading configs from files: Jsonnet and JSON, imports, ext strings, errors.

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use common::Dir;
use serde_json::json;
use sluice_config::{ConfigLoadError, LoadedConfig, compile_to_string, library, load};

fn ext(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn loads_jsonnet_with_the_library_as_ext_var() {
    let dir = Dir::new();
    let path = dir.write(
        "config.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } })] }\n",
    );
    let cfg = load(&path, &[]).unwrap();
    assert_eq!(cfg.path, path);
    assert_eq!(cfg.transforms()[0]["type"], "object_copy");
    assert_eq!(
        cfg.transforms()[0]["settings"]["object"],
        json!({"source_key": "a", "target_key": "b"})
    );
    assert_eq!(cfg.tests().unwrap(), vec![]);
    assert_eq!(cfg.concurrency().unwrap(), None);
}

#[test]
fn library_is_importable_by_both_names_from_any_file() {
    let dir = Dir::new();
    dir.write(
        "parts/inner.libsonnet",
        "local sub = import 'substation.libsonnet';\n{ t: sub.tf.send.stdout() }\n",
    );
    let path = dir.write(
        "config.jsonnet",
        "local a = import 'sluice.libsonnet';\n\
         local b = import 'substation.libsonnet';\n\
         local c = std.extVar('sub');\n\
         local inner = import 'parts/inner.libsonnet';\n\
         { transforms: [a.tf.util.drop(), b.tf.util.drop(), c.tf.util.drop(), inner.t] }\n",
    );
    assert!(!dir.path().join("sluice.libsonnet").exists());
    let cfg = load(&path, &[]).unwrap();
    let t = cfg.transforms().as_array().unwrap();
    assert_eq!(t[0], t[1]);
    assert_eq!(t[1], t[2]);
    assert_eq!(t[0]["type"], "utility_drop");
    assert_eq!(t[3]["type"], "send_stdout");
}

#[test]
fn a_bare_library_name_is_the_embedded_library_even_when_a_file_has_that_name() {
    let dir = Dir::new();
    // A vendored copy of Substation's library next to the config.
    dir.write("substation.libsonnet", "{ vendored: true }");
    dir.write("vendor/substation.libsonnet", "{ vendored: true }");
    let path = dir.write(
        "config.jsonnet",
        "local sub = import 'substation.libsonnet';\n\
         local vendored = import 'vendor/substation.libsonnet';\n\
         local fallback = import 'missing/sluice.libsonnet';\n\
         { transforms: [sub.tf.util.drop(), fallback.tf.util.drop()], vendored: vendored }\n",
    );
    let cfg = load(&path, &[]).unwrap();
    assert_eq!(cfg.transforms()[0]["type"], "utility_drop");
    assert_eq!(cfg.transforms()[1]["type"], "utility_drop");
    assert_eq!(cfg.json["vendored"], json!({"vendored": true}));
}

#[test]
fn imports_are_relative_to_the_importing_file() {
    let dir = Dir::new();
    dir.write("lib/common.libsonnet", "{ name: 'common' }");
    dir.write(
        "lib/parts.libsonnet",
        "local common = import 'common.libsonnet';\n{ name: common.name + '+parts', data: importstr 'data.txt' }",
    );
    dir.write("lib/data.txt", "text");
    let path = dir.write(
        "configs/prod/config.jsonnet",
        "local parts = import '../../lib/parts.libsonnet';\n{ transforms: [], parts: parts }",
    );
    // The working directory plays no part.
    let cfg = load(&path, &[]).unwrap();
    assert_eq!(
        cfg.json["parts"],
        json!({"name": "common+parts", "data": "text"})
    );
}

#[test]
fn ext_strs_are_ext_vars() {
    let dir = Dir::new();
    let path = dir.write(
        "config.jsonnet",
        "{ transforms: [], env: std.extVar('env'), region: std.extVar('region') }",
    );
    let cfg = load(&path, &ext(&[("env", "prod"), ("region", "us-east-1")])).unwrap();
    assert_eq!(cfg.json["env"], "prod");
    assert_eq!(cfg.json["region"], "us-east-1");

    let e = load(&path, &ext(&[("env", "prod")])).unwrap_err();
    assert!(matches!(e, ConfigLoadError::Jsonnet { .. }), "{e:?}");
    assert!(e.to_string().contains("region"), "{e}");

    let e = load(&path, &ext(&[("sub", "x")])).unwrap_err();
    assert!(matches!(e, ConfigLoadError::ReservedExtVar { .. }), "{e:?}");
}

#[test]
fn json_configs_are_read_as_they_are() {
    let dir = Dir::new();
    let path = dir.write(
        "config.json",
        r#"{"transforms":[{"type":"utility_drop","settings":{"id":"d"}}],"concurrency":3}"#,
    );
    let cfg = load(&path, &[]).unwrap();
    assert_eq!(cfg.transforms()[0]["settings"]["id"], "d");
    assert_eq!(cfg.concurrency().unwrap(), Some(3));

    let bad = dir.write("bad.json", "{\n  \"transforms\": [,]\n}");
    let e = load(&bad, &[]).unwrap_err();
    match &e {
        ConfigLoadError::Json { line, column, .. } => {
            assert_eq!((*line, *column), (2, 18));
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("bad.json:2:18: invalid JSON"), "{e}");
}

#[test]
fn syntax_errors_report_file_line_and_column() {
    let dir = Dir::new();
    let path = dir.write(
        "bad.jsonnet",
        "{\n  transforms: [\n    { type: 'x' \n  ],\n}\n",
    );
    let e = load(&path, &[]).unwrap_err();
    assert!(matches!(e, ConfigLoadError::Jsonnet { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("syntax error"), "{text}");
    assert!(text.contains("bad.jsonnet:4:"), "{text}");
}

#[test]
fn syntax_errors_in_imported_files_name_that_file() {
    let dir = Dir::new();
    dir.write("lib/broken.libsonnet", "{ a: }");
    let path = dir.write(
        "config.jsonnet",
        "local b = import 'lib/broken.libsonnet';\n{ transforms: [b] }",
    );
    let text = load(&path, &[]).unwrap_err().to_string();
    assert!(text.contains("broken.libsonnet:1:"), "{text}");
}

#[test]
fn runtime_errors_report_the_message_and_where() {
    let dir = Dir::new();
    let path = dir.write(
        "rt.jsonnet",
        "local sub = std.extVar('sub');\n{\n  transforms: [\n    sub.tf.util.drop(),\n    error 'boom',\n  ],\n}\n",
    );
    let e = load(&path, &[]).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("boom"), "{text}");
    assert!(text.contains("rt.jsonnet:5:"), "{text}");
}

#[test]
fn library_errors_point_at_the_callers_line() {
    let dir = Dir::new();
    let path = dir.write(
        "conflict.jsonnet",
        "local sub = std.extVar('sub');\n{\n  transforms: [\n    sub.tf.obj.cp({ obj: { src: 'a', source_key: 'b' } }),\n  ],\n}\n",
    );
    let text = load(&path, &[]).unwrap_err().to_string();
    assert!(text.contains("both `src` and `source_key`"), "{text}");
    assert!(text.contains("conflict.jsonnet:4:"), "{text}");
}

#[test]
fn failed_imports_are_reported() {
    let dir = Dir::new();
    let path = dir.write(
        "config.jsonnet",
        "{ transforms: [import 'nope.libsonnet'] }",
    );
    let text = load(&path, &[]).unwrap_err().to_string();
    assert!(text.contains("nope.libsonnet"), "{text}");
    assert!(text.contains("config.jsonnet"), "{text}");
}

#[test]
fn missing_files_are_reported() {
    let dir = Dir::new();
    let path = dir.path().join("absent.jsonnet");
    let e = load(&path, &[]).unwrap_err();
    assert!(matches!(e, ConfigLoadError::NotFound { .. }), "{e:?}");
    assert!(
        e.to_string().ends_with("absent.jsonnet: no such file"),
        "{e}"
    );
    let e = load(&dir.path().join("absent.json"), &[]).unwrap_err();
    assert!(matches!(e, ConfigLoadError::NotFound { .. }), "{e:?}");
    assert_eq!(e.path(), Some(dir.path().join("absent.json").as_path()));
}

#[test]
fn unsupported_extensions_and_directories_are_reported() {
    let dir = Dir::new();
    let path = dir.write("config.yaml", "transforms: []");
    let e = load(&path, &[]).unwrap_err();
    assert!(
        matches!(e, ConfigLoadError::UnsupportedExtension { .. }),
        "{e:?}"
    );
    std::fs::create_dir(dir.path().join("d.jsonnet")).unwrap();
    let e = load(&dir.path().join("d.jsonnet"), &[]).unwrap_err();
    assert!(e.to_string().contains("is a directory"), "{e}");
}

#[test]
fn the_top_level_must_be_an_object_with_transforms() {
    let dir = Dir::new();
    let cases = [
        (
            "array.jsonnet",
            "[]",
            "the config is an array, but it must be an object",
        ),
        (
            "string.json",
            "\"x\"",
            "the config is a string, but it must be an object",
        ),
        ("none.jsonnet", "{ tests: [] }", "`transforms` is missing"),
        (
            "obj.jsonnet",
            "{ transforms: {} }",
            "`transforms`: must be an array of transforms, not an object",
        ),
        (
            "null.jsonnet",
            "{ transforms: null }",
            "`transforms`: must be an array of transforms, not null",
        ),
    ];
    for (name, code, want) in cases {
        let path = dir.write(name, code);
        let text = load(&path, &[]).unwrap_err().to_string();
        assert!(text.contains(want), "{name}: {text}");
        assert!(text.contains(name), "{name}: {text}");
    }
    // An empty list is fine.
    let path = dir.write("empty.jsonnet", "{ transforms: [] }");
    assert_eq!(load(&path, &[]).unwrap().transforms(), &json!([]));
}

#[test]
fn tests_are_read() {
    let dir = Dir::new();
    let path = dir.write(
        "config.jsonnet",
        "local sub = std.extVar('sub');\n{\n\
           transforms: [sub.tf.send.stdout()],\n\
           tests: [\n\
             { name: 'first', transforms: [sub.tf.test.message({ value: { a: 1 } })], condition: sub.cnd.num.len.gt({ value: 0 }) },\n\
             { name: 'no setup', condition: sub.cnd.fmt.json() },\n\
           ],\n\
         }\n",
    );
    let tests = load(&path, &[]).unwrap().tests().unwrap();
    assert_eq!(tests.len(), 2);
    assert_eq!(tests[0].name, "first");
    assert_eq!(tests[0].index, 0);
    assert_eq!(tests[0].transforms[0]["type"], "test_message");
    assert_eq!(tests[0].transforms[0]["settings"]["value"], json!({"a": 1}));
    assert_eq!(tests[0].condition["type"], "number_length_greater_than");
    assert_eq!(tests[0].transforms_location(), "tests[0].transforms");
    assert_eq!(tests[1].condition_location(), "tests[1].condition");
    assert_eq!(tests[1].transforms, json!([]));
}

#[test]
fn config_from_value_checks_tests_and_concurrency() {
    let path = std::path::Path::new("c.json");
    let cfg = |v: serde_json::Value| LoadedConfig::new(v, path).unwrap();

    let bad_tests = [
        (
            json!({"transforms": [], "tests": {}}),
            "`tests`: must be an array",
        ),
        (
            json!({"transforms": [], "tests": [1]}),
            "`tests[0]`: must be an object",
        ),
        (
            json!({"transforms": [], "tests": [{"condition": {"type": "format_json"}}]}),
            "`tests[0].name`: is missing",
        ),
        (
            json!({"transforms": [], "tests": [{"name": 1, "condition": {}}]}),
            "`tests[0].name`: must be a string, not a number",
        ),
        (
            json!({"transforms": [], "tests": [{"name": "t"}]}),
            "`tests[0].condition`: test \"t\": is missing",
        ),
        (
            json!({"transforms": [], "tests": [{"name": "t", "condition": []}]}),
            "`tests[0].condition`: test \"t\": must be a condition",
        ),
        (
            json!({"transforms": [], "tests": [
                {"name": "ok", "condition": {"type": "format_json"}},
                {"name": "t", "transforms": {}, "condition": {"type": "format_json"}}
            ]}),
            "`tests[1].transforms`: test \"t\": must be an array",
        ),
    ];
    for (v, want) in bad_tests {
        let text = cfg(v.clone()).tests().unwrap_err().to_string();
        assert!(text.contains(want), "{v}: {text}");
        assert!(text.starts_with("c.json: "), "{text}");
    }
    assert_eq!(
        cfg(json!({"transforms": [], "tests": null}))
            .tests()
            .unwrap(),
        vec![]
    );

    let concurrency =
        |v: serde_json::Value| cfg(json!({"transforms": [], "concurrency": v})).concurrency();
    assert_eq!(concurrency(json!(1)).unwrap(), Some(1));
    assert_eq!(concurrency(json!(64)).unwrap(), Some(64));
    assert_eq!(concurrency(json!(null)).unwrap(), None);
    for bad in [
        json!(0),
        json!(-1),
        json!(1.5),
        json!("2"),
        json!(true),
        json!([2]),
    ] {
        let e = concurrency(bad.clone()).unwrap_err().to_string();
        assert!(
            e.contains("`concurrency`: must be a positive integer"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn compile_to_string_for_build() {
    let dir = Dir::new();
    let path = dir.write(
        "config.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.util.drop({ id: 'd' })], big: 9007199254740992, half: 0.5 }",
    );
    assert_eq!(
        compile_to_string(&path, &[], false).unwrap(),
        r#"{"big":9007199254740992,"half":0.5,"transforms":[{"settings":{"id":"d"},"type":"utility_drop"}]}"#
    );
    let pretty = compile_to_string(&path, &[], true).unwrap();
    assert!(
        pretty.starts_with("{\n  \"big\": 9007199254740992,\n"),
        "{pretty}"
    );
    // `build` does not check the schema; `load` does.
    let lib = dir.write("lib.jsonnet", "{ a: 1 }");
    assert_eq!(compile_to_string(&lib, &[], false).unwrap(), r#"{"a":1}"#);
    assert!(load(&lib, &[]).is_err());
    // Errors are the same as load's.
    let bad = dir.write("bad.jsonnet", "{ a: error 'boom' }");
    let text = compile_to_string(&bad, &[], true).unwrap_err().to_string();
    assert!(
        text.contains("boom") && text.contains("bad.jsonnet:1:"),
        "{text}"
    );
}

#[test]
fn loading_is_independent_per_call_and_results_are_send() {
    fn assert_send<T: Send + Sync>() {}
    assert_send::<LoadedConfig>();
    assert_send::<ConfigLoadError>();

    let dir = Dir::new();
    let path = dir.write(
        "config.jsonnet",
        "{ transforms: [], env: std.extVar('env') }",
    );
    // Loading on other threads works, and one load's ext strings do not leak into another.
    let handles: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|env| {
            let path = path.clone();
            std::thread::spawn(move || {
                load(&path, &ext(&[("env", env)])).map(|c| c.json["env"].clone())
            })
        })
        .collect();
    let got: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    assert_eq!(got, vec![json!("a"), json!("b"), json!("c")]);
    // And twice on the same thread.
    assert_eq!(load(&path, &ext(&[("env", "x")])).unwrap().json["env"], "x");
    assert_eq!(load(&path, &ext(&[("env", "y")])).unwrap().json["env"], "y");
}

#[test]
fn library_source_is_exposed() {
    let lib = library();
    assert!(lib.contains("Where this library differs from Substation"));
    assert!(lib.contains("enrich_dns_text_lookup"));
}
