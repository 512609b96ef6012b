//! The commands the README and docs/guide.md show with their output (`$ ` lines in a code
//! block, each followed by what it prints) run as printed, on a machine set up as a new
//! user's is (no AWS configuration), and print what the docs say.
//!
//! Each block runs in a fresh directory holding `examples/` and `target/release/sluice`
//! (this build's binary, also on `PATH` as `sluice`), its commands in order, so that one
//! command can see what an earlier one left (the exactly-once example's locks). Matching:
//! runs of white space are one space; durations (`0.009s`) are any duration; `...` inside
//! a line is any text; a line that is only `...` is any number of lines.

use std::path::Path;
use std::process::Command;

use crate::common::{Dir, workspace_root};

/// One `$ command` and the lines the docs say it prints.
struct Shown {
    command: String,
    output: Vec<String>,
}

/// The `$` commands of each code block of `markdown`, with their line numbers.
fn blocks(markdown: &str) -> Vec<(usize, Vec<Shown>)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, Vec<Shown>)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            match current.take() {
                Some(block) => {
                    if !block.1.is_empty() {
                        out.push(block);
                    }
                }
                None => current = Some((n + 1, Vec::new())),
            }
            continue;
        }
        let Some((_, shown)) = current.as_mut() else {
            continue;
        };
        if let Some(cmd) = line.strip_prefix("$ ") {
            shown.push(Shown {
                command: cmd.to_string(),
                output: Vec::new(),
            });
        } else if let Some(last) = shown.last_mut() {
            last.output.push(line.to_string());
        }
    }
    out
}

/// A line as compared: white space runs as one space, durations as `TIME`.
fn normal(line: &str) -> String {
    let duration = |w: &str| {
        w.strip_suffix('s')
            .and_then(|n| n.split_once('.'))
            .is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.bytes().all(|c| c.is_ascii_digit())
                    && b.bytes().all(|c| c.is_ascii_digit())
            })
    };
    line.split_whitespace()
        .map(|w| if duration(w) { "TIME" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `line` matches `pattern`, where `...` is any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `lines` match `patterns`, where a `...` line is any number of lines.
fn lines_match(patterns: &[String], lines: &[String]) -> bool {
    match patterns.split_first() {
        None => lines.is_empty(),
        Some((p, rest)) if p == "..." => {
            (0..=lines.len()).any(|skip| lines_match(rest, &lines[skip..]))
        }
        Some((p, rest)) => match lines.split_first() {
            Some((l, more)) => line_matches(p, l) && lines_match(rest, more),
            None => false,
        },
    }
}

/// A directory laid out as the docs assume: `examples/`, `target/release/sluice`.
fn workspace_like(dir: &Dir) {
    let root = workspace_root();
    std::os::unix::fs::symlink(root.join("examples"), dir.path().join("examples")).unwrap();
    let bin = dir.path().join("target/release");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), bin.join("sluice")).unwrap();
}

fn run_docs(file: &str) -> usize {
    let path = workspace_root().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut ran = 0;
    for (line, shown) in blocks(&text) {
        let dir = Dir::new();
        workspace_like(&dir);
        for s in shown {
            let out = run(dir.path(), &s.command);
            let got: Vec<String> = out.lines().map(normal).collect();
            let want: Vec<String> = s
                .output
                .iter()
                .map(|l| normal(l))
                .filter(|l| !l.is_empty())
                .collect();
            let got_nonempty: Vec<String> = got.into_iter().filter(|l| !l.is_empty()).collect();
            assert!(
                lines_match(&want, &got_nonempty),
                "{file}:{line}: `{}` printed\n{}\nbut the docs show\n{}",
                s.command,
                got_nonempty.join("\n"),
                want.join("\n")
            );
            ran += 1;
        }
    }
    ran
}

/// Runs `command` with `sh` in `cwd`, as a new user would: no AWS configuration, and
/// `sluice` on the path. Standard output, and the exit status must be 0.
fn run(cwd: &Path, command: &str) -> String {
    let bin = cwd.join("target/release");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", cwd)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("running sh");
    assert!(
        out.status.success(),
        "`{command}` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn the_readmes_commands_print_what_it_shows() {
    assert!(run_docs("README.md") >= 4);
}

#[test]
fn the_guides_commands_print_what_it_shows() {
    assert!(run_docs("docs/guide.md") >= 1);
}

#[test]
fn the_matcher_is_strict_where_the_docs_are() {
    let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(
        &p(&["a", "...", "z"]),
        &p(&["a", "b", "c", "z"])
    ));
    assert!(lines_match(&p(&["a", "...", "z"]), &p(&["a", "z"])));
    assert!(!lines_match(&p(&["a", "...", "z"]), &p(&["a", "b"])));
    assert!(!lines_match(&p(&["a"]), &p(&["a", "b"])));
    assert!(line_matches("{\"a\":...,\"b\":2}", "{\"a\":[1],\"b\":2}"));
    assert!(!line_matches("{\"a\":...,\"b\":2}", "{\"a\":[1],\"b\":3}"));
    assert_eq!(normal("ok \texamples/x  0.009s"), "ok examples/x TIME");
}
