//! `--help` works for the binary and every subcommand, and mentions each option.

use crate::common::Dir;

#[test]
fn top_level_help_lists_every_subcommand() {
    let d = Dir::new();
    for args in [&["--help"][..], &["-h"][..], &["help"][..]] {
        let out = d.sluice(args, "");
        out.assert_clean_success();
        let text = out.stdout_str();
        assert!(text.contains("Usage: sluice <COMMAND>"), "{text}");
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
        out.stderr.contains("Usage: sluice <COMMAND>"),
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
