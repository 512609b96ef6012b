//! Config problems through `sluice run`: each is a clear error with its place and a
//! non-zero exit, never a panic; an unknown settings key is only a warning.

use crate::common::Dir;

/// The first line of standard error.
fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[test]
fn a_jsonnet_syntax_error_names_file_line_and_column() {
    let d = Dir::new();
    d.write(
        "syn.jsonnet",
        "local sub = std.extVar('sub');\n{\n  transforms: [\n    sub.tf.send.stdout(),\n    sub.tf.obj.copy({ obj: { src: 'a', trg: 'b' } ]\n}\n",
    );
    let out = d.sluice(&["run", "--config", "syn.jsonnet"], "{}\n");
    out.assert_code(1);
    assert_eq!(
        first_line(&out.stderr),
        "error: syn.jsonnet: syntax error: expected '}', got ']'"
    );
    // The `]` is on line 5, column 51.
    assert!(out.stderr.contains("syn.jsonnet:5:51"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert_eq!(out.stdout, b"");
}

#[test]
fn a_jsonnet_runtime_error_names_its_place() {
    let d = Dir::new();
    d.write(
        "rt.jsonnet",
        "local sub = std.extVar('sub');\n{\n  transforms: [\n    sub.tf.send.stdout(),\n    error 'no such route',\n  ],\n}\n",
    );
    let out = d.sluice(&["run", "--config", "rt.jsonnet"], "{}\n");
    out.assert_code(1);
    assert_eq!(
        first_line(&out.stderr),
        "error: rt.jsonnet: runtime error: no such route"
    );
    assert!(out.stderr.contains("rt.jsonnet:5:5"), "{}", out.stderr);
}

#[test]
fn a_jsonnet_static_analysis_error_names_its_place() {
    let d = Dir::new();
    d.write(
        "config.jsonnet",
        "local sub = std.extVar('sub');\n\n{\n  transforms: [\n    sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } }),\n    undefined_thing,\n  ],\n}\n",
    );
    let out = d.sluice(&["run", "--config", "config.jsonnet"], "{}\n");
    out.assert_code(1);
    assert_eq!(
        first_line(&out.stderr),
        "error: config.jsonnet: static analysis error: undefined local: undefined_thing"
    );
    // `undefined_thing` starts line 6, column 5.
    assert!(
        out.stderr
            .contains("\n    config.jsonnet:6:5-19: undefined local: undefined_thing\n"),
        "{}",
        out.stderr
    );
    // No Rust Debug output (a struct, `Some(..)`, a quoted path) and no panic.
    for debug in [
        "Diagnostic",
        "Span(",
        "Some(",
        "{ ",
        "\"config.jsonnet\"",
        "panicked",
    ] {
        assert!(!out.stderr.contains(debug), "{debug}: {}", out.stderr);
    }
    assert_eq!(out.stdout, b"");
}

#[test]
fn an_unknown_transform_type_names_the_nearest_valid_ones() {
    let d = Dir::new();
    d.write(
        "unk.json",
        r#"{"transforms": [
  {"type": "send_stdout"},
  {"type": "object_cpy", "settings": {"object": {"source_key": "a", "target_key": "b"}}}
]}"#,
    );
    let out = d.sluice(&["run", "--config", "unk.json"], "{}\n");
    out.assert_failure("error: unk.json: transforms[1] (object_cpy): unknown transform type \"object_cpy\"; did you mean \"object_copy\", \"object_jq\", \"object_delete\"?\n");
}

#[test]
fn an_unknown_condition_type_deep_in_a_config_names_its_place() {
    let d = Dir::new();
    d.write(
        "cnd.jsonnet",
        r#"local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.send.stdout(),
    sub.tf.meta.switch({ cases: [{
      condition: { type: 'string_equal', settings: {} },
      transforms: [sub.tf.util.drop()],
    }] }),
  ],
}
"#,
    );
    let out = d.sluice(&["run", "--config", "cnd.jsonnet"], "{}\n");
    out.assert_failure("error: cnd.jsonnet: transforms[1].settings.cases[0].condition (string_equal): unknown condition type \"string_equal\"; did you mean \"string_equal_to\", \"string_less_than\", \"string_match\"?\n");
}

#[test]
fn a_bad_setting_type_names_the_place_type_id_and_field() {
    let d = Dir::new();
    d.write(
        "bad.json",
        r#"{"transforms": [{"type": "send_stdout"}, {"type": "string_replace", "settings": {"id": "r1", "pattern": 5, "replacement": "x"}}]}"#,
    );
    let out = d.sluice(&["run", "--config", "bad.json"], "{}\n");
    out.assert_failure("error: bad.json: transforms[1] (string_replace, id r1) settings.pattern: invalid type: integer `5`, expected a string\n");

    // The same through the Jsonnet library.
    d.write(
        "bad.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.str.replace({ id: 'r', obj: { src: 'a', trg: 'a' }, pattern: ['x'], replacement: 'x' })] }\n",
    );
    let out = d.sluice(&["run", "--config", "bad.jsonnet"], "{}\n");
    out.assert_failure("error: bad.jsonnet: transforms[0] (string_replace, id r) settings.pattern: invalid type: sequence, expected a string\n");
}

#[test]
fn a_missing_required_setting_names_the_field() {
    let d = Dir::new();
    d.write(
        "missing.json",
        r#"{"transforms": [{"type": "string_replace", "settings": {"replacement": "x"}}]}"#,
    );
    let out = d.sluice(&["run", "--config", "missing.json"], "{}\n");
    out.assert_code(1);
    assert!(
        out.stderr.starts_with(
            "error: missing.json: transforms[0] (string_replace) settings.pattern: missing"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);

    // Through the library, the automatic id is named too.
    d.write(
        "missing.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.str.replace({ obj: { src: 'a', trg: 'a' }, replacement: 'x' })] }\n",
    );
    let out = d.sluice(&["run", "--config", "missing.jsonnet"], "{}\n");
    out.assert_code(1);
    let line = first_line(&out.stderr);
    assert!(
        line.starts_with("error: missing.jsonnet: transforms[0] (string_replace, id ")
            && line.contains(") settings.pattern: missing"),
        "{}",
        out.stderr
    );
}

#[test]
fn half_of_a_source_target_pair_names_the_missing_half() {
    let d = Dir::new();
    d.write(
        "one.json",
        r#"{"transforms": [{"type": "string_replace", "settings": {"id": "r", "object": {"source_key": "a"}, "pattern": "x", "replacement": "y"}}]}"#,
    );
    let out = d.sluice(&["run", "--config", "one.json"], "{}\n");
    out.assert_code(1);
    assert!(
        out.stderr.starts_with(
            "error: one.json: transforms[0] (string_replace, id r) settings.object.target_key: "
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unknown_settings_key_is_a_warning_and_the_run_succeeds() {
    let d = Dir::new();
    d.write(
        "typo.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.send.stdout(), sub.tf.obj.copy({ obj: { src: 'a', trg: 'b' }, objcet: 1 }), sub.tf.send.stdout()] }\n",
    );
    let out = d.sluice(&["run", "--config", "typo.jsonnet"], "{\"a\":1}\n");
    out.assert_code(0);
    assert_eq!(
        out.stderr,
        "warning: typo.jsonnet: transforms[1]: unknown setting \"objcet\" is ignored (did you mean \"object\"?)\n"
    );
    assert_eq!(out.stdout_str(), "{\"a\":1}\n{\"a\":1,\"b\":1}\n");
}

#[test]
fn a_json_config_is_read_as_is() {
    let d = Dir::new();
    d.write(
        "cfg.json",
        r#"{"transforms": [
  {"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}},
  {"type": "send_stdout"}
]}"#,
    );
    let out = d.sluice(&["run", "--config", "cfg.json"], "{\"a\":1}\n");
    out.assert_stdout("{\"a\":1,\"b\":1}\n");

    // Not evaluated as Jsonnet: a comment is invalid JSON, reported with its place.
    d.write("comment.json", "{\"transforms\": [\n  // a comment\n]}\n");
    let out = d.sluice(&["run", "--config", "comment.json"], "{}\n");
    out.assert_failure(
        "error: comment.json:2:3: invalid JSON: expected value at line 2 column 3\n",
    );
}

#[test]
fn jsonnet_imports_resolve_the_library_and_relative_files() {
    let d = Dir::new();
    d.write("lib/helpers.libsonnet", "{ v: 'from-lib' }\n");
    d.write(
        "cfg/imp.jsonnet",
        "local sub = import 'substation.libsonnet';\nlocal h = import '../lib/helpers.libsonnet';\n{ transforms: [sub.tf.obj.insert({ obj: { trg: 'k' }, value: h.v }), sub.tf.send.stdout()] }\n",
    );
    d.write(
        "cfg/lib.libsonnet",
        "local sub = import 'sluice.libsonnet';\n{ transforms: [sub.tf.send.stdout()] }\n",
    );
    let out = d.sluice(&["run", "--config", "cfg/imp.jsonnet"], "{}\n");
    out.assert_stdout("{\"k\":\"from-lib\"}\n");
    let out = d.sluice(&["run", "--config", "cfg/lib.libsonnet"], "{}\n");
    out.assert_stdout("{}\n");
}

#[test]
fn a_missing_or_unusable_config_file_is_an_error() {
    let d = Dir::new();
    let out = d.sluice(&["run", "--config", "nope.jsonnet"], "{}\n");
    out.assert_failure("error: nope.jsonnet: no such file\n");

    d.write("cfg.yaml", "transforms: []\n");
    let out = d.sluice(&["run", "--config", "cfg.yaml"], "{}\n");
    out.assert_failure("error: cfg.yaml: unsupported file type; a config is a .jsonnet, .libsonnet or .json file\n");
}

#[test]
fn a_config_of_the_wrong_shape_is_an_error() {
    let d = Dir::new();
    let cases: &[(&str, &str, &str)] = &[
        (
            "arr.json",
            "[1]",
            "error: arr.json: the config is an array, but it must be an object with a `transforms` array\n",
        ),
        (
            "none.json",
            "{}",
            "error: none.json: `transforms` is missing; a config is {\"transforms\": [...]} (it may be empty)\n",
        ),
        (
            "conc.json",
            "{\"transforms\": [], \"concurrency\": \"x\"}",
            "error: conc.json: `concurrency`: must be a positive integer, not a string\n",
        ),
        (
            "notype.json",
            "{\"transforms\": [{\"settings\": {}}]}",
            "error: notype.json: transforms[0]: the transform has no \"type\"\n",
        ),
    ];
    for (name, text, want) in cases {
        d.write(name, text);
        let out = d.sluice(&["run", "--config", name], "{}\n");
        out.assert_code(1);
        assert_eq!(out.stderr, *want, "{name}");
    }
}

#[test]
fn an_empty_transforms_list_runs_and_outputs_nothing() {
    let d = Dir::new();
    d.write("empty.json", "{\"transforms\": []}");
    let out = d.sluice(&["run", "--config", "empty.json"], "{\"a\":1}\n");
    out.assert_clean_success();
    assert_eq!(out.stdout, b"");
}

/// Issue 51: a long chain without brackets (`1+1+…` with 20,000 terms, `&&`, unary
/// operators, `local`s, `if`s, calls, string concatenations) is an error naming the file,
/// the line and sluice's limit in every command that reads Jsonnet, never an abort
/// (exit 134: jrsonnet and the formatter recurse once per level on the stack).
#[test]
fn long_chains_are_errors_not_aborts() {
    let chains = [
        ("plus", format!("1{}", "+1".repeat(20_000))),
        ("and", format!("true{}", " && true".repeat(20_000))),
        ("minus", format!("{}1", "-".repeat(20_000))),
        ("not", format!("{}true", "!".repeat(20_000))),
        ("strings", format!("'a'{}", " + 'a'".repeat(20_000))),
        ("locals", format!("{}1", "local x = 1; ".repeat(10_000))),
        (
            "ifs",
            format!("{}1", "if false then 1 else ".repeat(10_000)),
        ),
        (
            "calls",
            format!("local f(x) = f; f{} != null", "(1)".repeat(10_000)),
        ),
        ("functions", format!("{}1", "function(x) ".repeat(10_000))),
        ("asserts", format!("{}1", "assert true; ".repeat(10_000))),
    ];
    let d = Dir::new();
    for (name, chain) in &chains {
        let file = format!("{name}.jsonnet");
        d.write(&file, format!("{{\n  transforms: [],\n  x: {chain},\n}}\n"));
        for args in [
            vec!["run", "--config"],
            vec!["vet"],
            vec!["fmt"],
            vec!["fmt", "--check"],
            vec!["test"],
            vec!["build"],
        ] {
            let mut all = args.clone();
            all.push(&file);
            let out = d.sluice(&all, "");
            let text = format!("{}{}", out.stderr, out.stdout_str());
            assert_eq!(out.code, Some(1), "sluice {all:?}: {text:.400}");
            assert!(
                text.contains(&format!("{name}.jsonnet:3:"))
                    && text.contains("expression nested more than 600 deep"),
                "sluice {all:?}: {text:.400}"
            );
            assert!(!text.contains("has overflowed its stack"), "{text:.400}");
        }
    }
}

/// The depth bound holds for each call: a recursive function whose body is as deep as
/// the bound allows is stopped by jrsonnet's call depth (an error), not by the stack.
#[test]
fn deep_bodies_in_deep_recursion_are_errors_not_aborts() {
    let d = Dir::new();
    // Each just under the bound (600; the `local f(n) = …` around it counts a dozen).
    let bodies = [
        format!("f(n - 1){}", " + 1".repeat(570)),
        format!("{}f(n - 1)", "local x = 1; ".repeat(190)),
        format!("{}f(n - 1)", "if n < 0 then 1 else ".repeat(110)),
        format!("{}f(n - 1)", "-".repeat(570)),
    ];
    for (i, body) in bodies.iter().enumerate() {
        let file = format!("r{i}.jsonnet");
        d.write(
            &file,
            format!(
                "local f(n) = if n == 0 then 0 else {body};\n{{ transforms: [], x: f(100000) }}\n"
            ),
        );
        let out = d.sluice(&["vet", &file], "");
        let text = format!("{}{}", out.stderr, out.stdout_str());
        assert_eq!(out.code, Some(1), "{file}: {text:.400}");
        assert!(
            text.contains("evaluation nested deeper than 200 calls"),
            "{file}: {text:.400}"
        );
    }
}

/// A config whose evaluation never ends is an error within `--eval-timeout` (default 60 s)
/// for every command that evaluates it, naming the config and the flag.
#[test]
fn a_config_that_never_finishes_evaluating_is_an_error_within_the_limit() {
    let d = Dir::new();
    d.write(
        "loop.jsonnet",
        // Nested folds over lazy ranges: no recursion, no memory, no end.
        "local r = std.range(1, 2000000000);\n\
         { transforms: [], x: std.foldl(function(a, b) std.foldl(function(c, d) c + d, r, a), r, 0) }\n",
    );
    for args in [
        vec!["run", "-c", "loop.jsonnet"],
        vec!["test", "loop.jsonnet"],
        vec!["vet", "loop.jsonnet"],
        vec!["build", "loop.jsonnet"],
    ] {
        let mut args = args.clone();
        args.extend(["--eval-timeout", "1s"]);
        let started = std::time::Instant::now();
        let out = d.sluice(&args, "");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{args:?} took {:?}",
            started.elapsed()
        );
        assert_ne!(out.code, Some(0), "{args:?}");
        assert!(
            out.stderr.contains("loop.jsonnet")
                && out.stderr.contains(
                    "its evaluation did not finish within 1s (--eval-timeout raises the limit)"
                ),
            "{args:?}: {}",
            out.stderr
        );
    }
}
