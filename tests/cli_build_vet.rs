//! `sluice build` and `sluice vet` as real processes.

use crate::common::{Dir, workspace_root};

const CFG: &str = r#"local sub = std.extVar('sub');
{
  concurrency: 2,
  transforms: [
    sub.tf.obj.copy({ id: 'copy', obj: { src: 'a', trg: 'b' } }),
    sub.tf.obj.insert({ id: 'env', obj: { trg: 'env' }, value: std.extVar('env') }),
  ],
}
"#;

const OTHER: &str =
    "local sub = std.extVar('sub');\n{ transforms: [sub.tf.send.stdout({ id: 'out' })] }\n";

fn parse(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn build_writes_sibling_json_equal_to_stdout() {
    let d = Dir::new();
    d.write("cfgs/a.jsonnet", CFG);
    d.write("cfgs/sub/b.jsonnet", OTHER);
    d.write("cfgs/already.json", "{\"transforms\": []}");

    let out = d.sluice(&["build", "--ext-str", "env=prod", "cfgs"], "");
    out.assert_clean_success();
    // `.json` files are inputs of nothing: only Jsonnet files are built.
    assert_eq!(out.stdout_str(), "cfgs/a.json\ncfgs/sub/b.json\n");
    assert_eq!(d.read("cfgs/already.json"), "{\"transforms\": []}");

    let a = d.read("cfgs/a.json");
    let json = parse(&a);
    assert_eq!(json["concurrency"], 2);
    let types: Vec<&str> = json["transforms"]
        .as_array()
        .expect("a transforms array")
        .iter()
        .map(|t| t["type"].as_str().expect("a type"))
        .collect();
    assert_eq!(types, ["object_copy", "object_insert"]);
    assert_eq!(
        json["transforms"][0]["settings"]["object"],
        serde_json::json!({"source_key": "a", "target_key": "b"})
    );
    assert_eq!(json["transforms"][1]["settings"]["value"], "prod");
    assert_eq!(json["transforms"][1]["settings"]["id"], "env");
    assert!(a.ends_with("}\n"), "one final newline");

    // `--stdout` prints exactly what the file holds.
    for (src, built) in [
        ("cfgs/a.jsonnet", "cfgs/a.json"),
        ("cfgs/sub/b.jsonnet", "cfgs/sub/b.json"),
    ] {
        let out = d.sluice(&["build", "--ext-str", "env=prod", "--stdout", src], "");
        out.assert_clean_success();
        assert_eq!(out.stdout_str(), d.read(built), "{src}");
    }

    // The built JSON runs the same as its source.
    let from_jsonnet = d.sluice(
        &[
            "run",
            "--ext-str",
            "env=prod",
            "--config",
            "cfgs/sub/b.jsonnet",
        ],
        "{\"x\":1}\n",
    );
    let from_json = d.sluice(&["run", "--config", "cfgs/sub/b.json"], "{\"x\":1}\n");
    from_jsonnet.assert_clean_success();
    from_json.assert_stdout("{\"x\":1}\n");
    assert_eq!(from_jsonnet.stdout, from_json.stdout);
}

#[test]
fn build_shallow_skips_subdirectories() {
    let d = Dir::new();
    d.write("cfgs/a.jsonnet", OTHER);
    d.write("cfgs/sub/b.jsonnet", OTHER);
    let out = d.sluice(&["build", "--shallow", "cfgs"], "");
    out.assert_stdout("cfgs/a.json\n");
    assert!(!d.path().join("cfgs/sub/b.json").exists());
}

#[test]
fn build_reports_a_jsonnet_error_with_its_place_and_writes_nothing_for_it() {
    let d = Dir::new();
    d.write("good.jsonnet", OTHER);
    d.write("syn.jsonnet", "{ transforms: [ }\n");
    let out = d.sluice(&["build", "good.jsonnet", "syn.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(out.stdout_str(), "good.json\n");
    assert_eq!(
        out.stderr.lines().next(),
        Some("syn.jsonnet: syntax error: unexpected '}'")
    );
    assert!(out.stderr.contains("syn.jsonnet:1:17"), "{}", out.stderr);
    assert!(d.path().join("good.json").exists());
    assert!(!d.path().join("syn.json").exists());
}

#[test]
fn vet_accepts_good_configs() {
    let d = Dir::new();
    d.write("cfgs/a.jsonnet", CFG);
    d.write(
        "cfgs/b.json",
        "{\"transforms\": [{\"type\": \"send_stdout\"}]}",
    );
    d.write("cfgs/lib.jsonnet", "{ helper: 1 }\n");
    let out = d.sluice(&["vet", "--ext-str", "env=x", "cfgs"], "");
    out.assert_code(0);
    assert_eq!(
        out.stdout_str(),
        "ok\tcfgs/a.jsonnet\nok\tcfgs/b.json\n-\tcfgs/lib.jsonnet\t[no transforms]\n"
    );
    assert_eq!(out.stderr, "vet: 3 files, 0 with problems\n");
}

#[test]
fn vet_passes_the_examples() {
    let out = crate::common::run_in(&workspace_root(), &["vet", "examples"], Vec::new(), None);
    out.assert_code(0);
    // Every config is `ok`; the only other lines are data files next to the configs (a
    // json_file kv store's JSON), which vet reports as having no transforms.
    assert!(
        out.stdout_str().lines().all(|l| l.starts_with("ok\t")
            || (l.starts_with("-\t") && l.ends_with(".json\t[no transforms]"))),
        "{}",
        out.stdout_str()
    );
    assert!(
        out.stderr.ends_with(" with problems\n") && out.stderr.contains(", 0 with problems"),
        "{}",
        out.stderr
    );
}

#[test]
fn vet_warns_about_a_lock_whose_duplicates_continue_into_a_send_after_it() {
    let d = Dir::new();
    let config = |duplicates: &str| {
        format!(
            r#"local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.memory(),
      object: {{ source_key: 'id' }},
      {duplicates}
      transforms: [sub.tf.obj.insert({{ obj: {{ trg: 'seen' }}, value: true }})],
    }}),
    sub.tf.send.stdout(),
  ],
}}
"#
        )
    };
    d.write("a_continue.jsonnet", config(""));
    d.write("b_drop.jsonnet", config("duplicates: 'drop',"));
    let out = d.sluice(&["vet", "."], "");
    out.assert_code(0);
    assert_eq!(
        out.stdout_str(),
        "ok\t./a_continue.jsonnet\nok\t./b_drop.jsonnet\n"
    );
    assert_eq!(
        out.stderr,
        "warning: ./a_continue.jsonnet: transforms[0]: meta_kv_store_lock lets duplicates continue (duplicates: 'continue', the default) and transforms[1] (send_stdout) after it sends them: a message whose key was processed already is sent there again (in Lambda, every delivered record after the lowest failure of a retried batch; in a rerun, every line). If that send must happen once per key, set duplicates: 'drop' or move the send inside the lock\n\
         vet: 2 files, 0 with problems\n"
    );
}

#[test]
fn vet_names_the_place_of_each_problem() {
    let d = Dir::new();
    d.write("a_ok.jsonnet", OTHER);
    d.write(
        "b_bad.json",
        r#"{"transforms": [{"type": "send_stdout"}, {"type": "string_replace", "settings": {"id": "r1", "pattern": 5, "replacement": "x"}}]}"#,
    );
    d.write(
        "c_badtest.jsonnet",
        r#"local sub = std.extVar('sub');
{
  tests: [{
    name: 'x',
    transforms: [sub.tf.test.message({ value: { a: 'b' } })],
    condition: { type: 'string_eq', settings: {} },
  }],
  transforms: [sub.tf.send.stdout()],
}
"#,
    );
    d.write("d_syntax.jsonnet", "{ transforms: [ }\n");
    d.write(
        "e_warn.json",
        r#"{"transforms": [{"type": "object_copy", "settings": {"objcet": 1}}]}"#,
    );
    let out = d.sluice(&["vet", "."], "");
    out.assert_code(1);
    assert_eq!(
        out.stdout_str(),
        "ok\t./a_ok.jsonnet\nFAIL\t./b_bad.json\nFAIL\t./c_badtest.jsonnet\nFAIL\t./d_syntax.jsonnet\nok\t./e_warn.json\n"
    );
    let err = &out.stderr;
    assert!(
        err.contains("./b_bad.json: transforms[1] (string_replace, id r1) settings.pattern: invalid type: integer `5`, expected a string\n"),
        "{err}"
    );
    assert!(
        err.contains("./c_badtest.jsonnet: tests[0].condition (string_eq): unknown condition type \"string_eq\"; did you mean \"string_equal_to\""),
        "{err}"
    );
    assert!(
        err.contains("./d_syntax.jsonnet: syntax error: unexpected '}'\n"),
        "{err}"
    );
    assert!(err.contains("d_syntax.jsonnet:1:17"), "{err}");
    assert!(
        err.contains("warning: ./e_warn.json: transforms[0]: unknown setting \"objcet\""),
        "{err}"
    );
    assert!(err.ends_with("vet: 5 files, 3 with problems\n"), "{err}");
}

/// `sluice build --stdout ... | head` and `sluice vet ... | head` must not panic when the
/// reader goes away (the quality bar: a clear error or a quiet exit, never a panic).
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let d = Dir::new();
    d.write("a.jsonnet", OTHER);
    for args in [
        &["build", "--stdout", "a.jsonnet"][..],
        &["build", "a.jsonnet"][..],
        &["vet", "a.jsonnet"][..],
    ] {
        let out = crate::common::run_with_closed_stdout(d.path(), args, b"");
        assert!(
            !out.stderr.contains("panicked"),
            "sluice {args:?} panicked on a closed stdout: {}",
            out.stderr
        );
        assert_ne!(out.code, Some(101), "{args:?}: {}", out.stderr);
    }
}
