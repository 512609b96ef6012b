//! `--help` works for the binary and every subcommand, and mentions each option.

use crate::common::Dir;

#[test]
fn top_level_help_lists_every_subcommand() {
    let d = Dir::new();
    for args in [&["--help"][..], &["-h"][..], &["help"][..]] {
        let out = d.sluice(args, "");
        out.assert_clean_success();
        let text = out.stdout_str();
        assert!(text.contains("Usage: sluice [OPTIONS] <COMMAND>"), "{text}");
        for cmd in ["run", "test", "build", "vet"] {
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
                "{cmd} missing from {args:?}:\n{text}"
            );
        }
    }
}

#[test]
fn every_subcommand_has_help_naming_its_options() {
    let d = Dir::new();
    let cases: &[(&str, &[&str])] = &[
        (
            "run",
            &[
                "--config",
                "--ext-str",
                "--workers",
                "--batch-messages",
                "--max-line-bytes",
                "--allow-remote-imports",
                "[FILES]",
            ],
        ),
        (
            "test",
            &[
                "--shallow",
                "--ext-str",
                "--verbose",
                "--allow-remote-imports",
                "[PATHS]",
            ],
        ),
        (
            "build",
            &[
                "--shallow",
                "--ext-str",
                "--stdout",
                "--allow-remote-imports",
                "[PATHS]",
            ],
        ),
        (
            "vet",
            &[
                "--shallow",
                "--ext-str",
                "--allow-remote-imports",
                "[PATHS]",
            ],
        ),
    ];
    for (cmd, options) in cases {
        for args in [vec![*cmd, "--help"], vec!["help", *cmd]] {
            let out = d.sluice(&args, "");
            out.assert_clean_success();
            let text = out.stdout_str();
            assert!(
                text.contains(&format!("Usage: sluice {cmd} [OPTIONS]")),
                "{args:?}:\n{text}"
            );
            for opt in *options {
                assert!(
                    text.contains(opt),
                    "{args:?} does not mention {opt}:\n{text}"
                );
            }
        }
    }
}

#[test]
fn version_and_usage_errors() {
    let d = Dir::new();
    let out = d.sluice(&["--version"], "");
    out.assert_clean_success();
    assert_eq!(
        out.stdout_str(),
        format!("sluice {}\n", env!("CARGO_PKG_VERSION"))
    );

    // No subcommand, an unknown one, or a bad option value: usage error, exit 2.
    let out = d.sluice(&[], "");
    out.assert_code(2);
    assert!(
        out.stderr.contains("Usage: sluice [OPTIONS] <COMMAND>"),
        "{}",
        out.stderr
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["frobnicate"],
            "error: unrecognized subcommand 'frobnicate'",
        ),
        (
            &["run", "--workers", "many"],
            "error: invalid value 'many' for '--workers <WORKERS>': invalid digit found in string",
        ),
        (
            &["run", "--batch-messages", "0"],
            "error: invalid value '0' for '--batch-messages <BATCH_MESSAGES>': 0 is not in 1..=4294967295",
        ),
        (
            &["test", "--no-such-flag"],
            "error: unexpected argument '--no-such-flag' found",
        ),
    ];
    for (args, first) in cases {
        let out = d.sluice(args, "");
        out.assert_code(2);
        assert_eq!(out.stderr.lines().next(), Some(*first), "{args:?}");
        assert_eq!(out.stdout, b"", "{args:?}");
    }
}

/// `sluice completions SHELL` prints a script the shell itself accepts: bash loads it and
/// completes the subcommands and `run`'s options; zsh and fish get their own formats.
#[test]
fn completions_load_in_bash_and_complete_subcommands_and_options() {
    let d = Dir::new();
    let out = d.sluice(&["completions", "bash"], "");
    out.assert_clean_success();
    d.write("sluice.bash", out.stdout_str());
    // Load it in a real bash and ask it for completions, as a terminal would.
    let complete = |words: &str| -> String {
        let script = format!(
            "source ./sluice.bash; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _sluice sluice \"${{COMP_WORDS[-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(d.path())
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let subcommands = complete("sluice ''");
    for cmd in [
        "run",
        "test",
        "build",
        "vet",
        "fmt",
        "tap",
        "play",
        "demo",
        "completions",
    ] {
        assert!(
            subcommands.lines().any(|l| l == cmd),
            "{cmd}: {subcommands}"
        );
    }
    let options = complete("sluice run --fa");
    assert_eq!(options.trim(), "--fail-fast", "{options}");

    let zsh = d.sluice(&["completions", "zsh"], "");
    zsh.assert_clean_success();
    assert!(
        zsh.stdout_str().starts_with("#compdef sluice"),
        "{}",
        zsh.stdout_str()
    );
    let fish = d.sluice(&["completions", "fish"], "");
    fish.assert_clean_success();
    assert!(
        fish.stdout_str().contains("complete -c sluice"),
        "{}",
        fish.stdout_str()
    );

    let bad = d.sluice(&["completions", "tcsh"], "");
    assert_ne!(bad.code, Some(0));
    assert!(
        bad.stderr.contains("possible values: bash"),
        "{}",
        bad.stderr
    );
}
