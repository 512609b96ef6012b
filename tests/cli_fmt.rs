//! `sluice fmt` as a process, with the reference formatter as the oracle: Debian's
//! `jsonnetfmt` (package `jsonnet`, installed by scripts/test.sh) must print exactly what
//! `sluice fmt` writes, for every config in examples/ and the Jsonnet library, as they are
//! and reindented; `--check` lists what is not formatted; a file that is not Jsonnet is
//! named with its place and the others are still formatted.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{Dir, workspace_root};

/// What `jsonnetfmt FILE` prints, or `None` when it refuses the file.
fn jsonnetfmt(file: &Path) -> Option<String> {
    let out = Command::new("jsonnetfmt")
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "jsonnetfmt is needed as the oracle ({e}): apt-get install jsonnet \
                 (scripts/test.sh installs it)"
            )
        });
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).expect("UTF-8"))
}

/// Every .jsonnet and .libsonnet file under `dir`.
fn jsonnet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            jsonnet_files(&p, out);
        } else if matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("jsonnet" | "libsonnet")
        ) {
            out.push(p);
        }
    }
}

/// The text with every line's indentation doubled (and tabs for every other level), which
/// the formatter must undo exactly as jsonnetfmt does. Text blocks (`|||`) keep theirs.
fn reindent(text: &str) -> String {
    let mut out = String::new();
    let mut in_block = false;
    for line in text.split_inclusive('\n') {
        let toggles = line.matches("|||").count() % 2 == 1;
        if in_block {
            out.push_str(line);
            in_block = !toggles;
            continue;
        }
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        for level in 0..indent {
            out.push_str(if level % 4 == 0 { "\t" } else { "  " });
        }
        out.push_str(body);
        in_block = toggles;
    }
    out
}

/// Jsonnet that exercises what the examples do not.
const SNIPPETS: &[&str] = &[
    "{}  // c\n",
    "{}\n// end\n\n\n",
    "{} # x",
    "{}\n/* a\n b */\n\n",
    "// only\n{}",
    "local b = import 'b.libsonnet';\nlocal a = import 'a.libsonnet';\n{a: a, b: b}\n",
    "{\n  t: |||\n    two\n      lines\n  |||,\n  s: \"d\\\"q\",\n  v: @'v''s',\n}\n",
    "{\n\n\n\n\n  a: 1,\n\n\n\n  b: [1,\n2],\n}",
    "local f(x, y=2) = x + y;\n{ [\"k\" + 1]: f(1), 'q-r': 2, c:: 3, d+: {} }",
    "[x for x in [1, 2] if x > 1] + std.map(function(v) v * 2, [3])",
];

#[test]
fn fmt_prints_what_jsonnetfmt_prints_for_every_example_and_the_library() {
    let root = workspace_root();
    let mut files = Vec::new();
    jsonnet_files(&root.join("examples"), &mut files);
    files.push(root.join("config/src/sluice.libsonnet"));
    assert!(files.len() > 40, "{files:?}");

    let dir = Dir::new();
    let mut cases = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read_to_string(f).unwrap();
        let ext = f.extension().unwrap().to_str().unwrap();
        for (variant, body) in [("as-is", text.clone()), ("reindented", reindent(&text))] {
            let name = format!("{i:02}-{variant}.{ext}");
            let path = dir.write(&name, &body);
            let want = jsonnetfmt(&path);
            cases.push((f.clone(), variant, path, want));
        }
    }
    // Snippets the examples lack: trailing comments, hash comments, blank lines, imports,
    // text blocks, strings of every kind.
    for (i, snippet) in SNIPPETS.iter().enumerate() {
        let path = dir.write(&format!("snippet-{i:02}.jsonnet"), snippet);
        let want = jsonnetfmt(&path);
        cases.push((PathBuf::from(format!("SNIPPETS[{i}]")), "as-is", path, want));
    }
    // One run over the directory formats every file in place.
    let out = dir.sluice(&["fmt", "-w", "."], "");
    let refused = cases.iter().filter(|c| c.3.is_none()).count();
    assert_eq!(
        out.code,
        Some(if refused > 0 { 1 } else { 0 }),
        "{}",
        out.stderr
    );
    let mut compared = 0;
    for (source, variant, path, want) in &cases {
        let got = std::fs::read_to_string(path).unwrap();
        match want {
            Some(want) => {
                assert_eq!(
                    &got,
                    want,
                    "{} ({variant}): sluice fmt and jsonnetfmt differ",
                    source.display()
                );
                compared += 1;
            }
            None => assert!(
                out.stderr
                    .contains(&*path.file_name().unwrap().to_string_lossy()),
                "jsonnetfmt refused {} ({variant}) but sluice fmt did not say so: {}",
                source.display(),
                out.stderr
            ),
        }
    }
    // The reindenting keeps every file Jsonnet: all were compared.
    assert_eq!(compared, cases.len(), "{}", out.stderr);

    // Formatting is idempotent: a second run changes nothing.
    let again = dir.sluice(&["fmt", "--check", "."], "");
    again.assert_clean_success();
    assert_eq!(again.stdout_str(), "");
}

#[test]
fn fmt_check_lists_what_is_not_formatted_and_changes_nothing() {
    let dir = Dir::new();
    dir.write("good.jsonnet", "{ a: 1 }\n");
    let messy = "// keep me\n{a:1,   b: [1,2],}  # and me\n";
    dir.write("sub/messy.libsonnet", messy);
    dir.write("notes.txt", "{a:1}");

    let out = dir.sluice(&["fmt", "--check", "."], "");
    out.assert_code(1);
    assert_eq!(out.stdout_str(), "./sub/messy.libsonnet\n");
    assert!(
        out.stderr
            .contains("1 of 2 files are not formatted (run sluice fmt -w to format them)"),
        "{}",
        out.stderr
    );
    assert_eq!(dir.read("sub/messy.libsonnet"), messy);

    // Without -w (as Substation): the formatted text on standard output, nothing changed.
    let out = dir.sluice(&["fmt", "sub/messy.libsonnet", "good.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        out.stdout_str(),
        "// keep me\n{ a: 1, b: [1, 2] }  // and me\n{ a: 1 }\n"
    );
    assert_eq!(dir.read("sub/messy.libsonnet"), messy);

    let out = dir.sluice(
        &["fmt", "-w", "-R", "sub/messy.libsonnet", "good.jsonnet"],
        "",
    );
    out.assert_clean_success();
    assert_eq!(out.stdout_str(), "sub/messy.libsonnet\n");
    assert_eq!(
        dir.read("sub/messy.libsonnet"),
        "// keep me\n{ a: 1, b: [1, 2] }  // and me\n"
    );
    assert_eq!(dir.read("notes.txt"), "{a:1}");
    dir.sluice(&["fmt", "--check"], "").assert_clean_success();
}

#[test]
fn fmt_names_a_file_that_is_not_jsonnet_and_formats_the_others() {
    let dir = Dir::new();
    dir.write("a.jsonnet", "{a:1}");
    dir.write("b.jsonnet", "{\n  a: ,\n}\n");
    dir.write("c.jsonnet", "[1,2]");
    let out = dir.sluice(
        &["fmt", "--write", "a.jsonnet", "b.jsonnet", "c.jsonnet"],
        "",
    );
    out.assert_code(1);
    assert_eq!(out.stdout_str(), "a.jsonnet\nc.jsonnet\n");
    assert_eq!(
        out.stderr,
        "error: b.jsonnet:2:6: unexpected: \",\" while parsing terminal\n\
         error: 1 of 3 files could not be formatted (not Jsonnet)\n"
    );
    assert_eq!(dir.read("a.jsonnet"), "{ a: 1 }\n");
    assert_eq!(dir.read("b.jsonnet"), "{\n  a: ,\n}\n");
    assert_eq!(dir.read("c.jsonnet"), "[1, 2]\n");
}
