//! `sluice vet` over a directory of Substation-style configs
//! (`tests/fixtures/substation_configs/`, see its README): every mistake is reported once,
//! with its place (file:line:column where Jsonnet gives one; the transform's index, type,
//! id and settings field otherwise), and the exit is non-zero.

use crate::common::{run_in, workspace_root};

/// Each problem vet must report, as a piece of text that appears once in its report.
const PROBLEMS: &[(&str, &[&str])] = &[
    (
        "bad duration",
        &[
            "./bad/bad_duration.jsonnet: transforms[0] (utility_delay, id 92650d5f-69832e81) settings.duration: invalid duration \"2d\"",
            "./bad/bad_duration.jsonnet: transforms[1].settings.cases[0].transforms[0] (meta_retry, id 89228624-caabf36a) settings.retry.delay: invalid duration \"one second\"",
        ],
    ),
    (
        "a test's condition",
        &[
            "./bad/bad_test.jsonnet: tests[0].condition (string_match) settings.pattern: invalid regular expression",
        ],
    ),
    (
        "missing required settings, two in one file",
        &[
            "./bad/missing_required.jsonnet: transforms[0] (string_capture, id e3bd5484-25a46c7c) settings.pattern: missing required option",
            "./bad/missing_required.jsonnet: transforms[1] (utility_metric_count, id 3db22e47-f77ae303) settings.metric.destination: missing required option",
        ],
    ),
    (
        "misspelled setting (a warning)",
        &[
            "warning: ./bad/misspelled_setting.jsonnet: transforms[0]: unknown setting \"locaton\" is ignored (did you mean \"location\"?)",
        ],
    ),
    (
        "bad Jsonnet",
        &[
            "./bad/syntax_error.jsonnet: syntax error: expected ']', got identifier \"sub\"",
            "bad/syntax_error.jsonnet:7:5\n",
        ],
    ),
    (
        "a library function that does not exist",
        &[
            "./bad/unknown_function.jsonnet: no such field: uper\nThere is a field with similar name present: upper",
            "./bad/unknown_function.jsonnet:7:18: field <uper> access",
        ],
    ),
    (
        "unknown type",
        &[
            "./bad/unknown_type.jsonnet: transforms[1] (string_to_uper, id upper-b): unknown transform type \"string_to_uper\"; did you mean \"string_to_upper\"",
        ],
    ),
    (
        "wrong value type",
        &[
            "./bad/wrong_value_type.jsonnet: transforms[0] (aggregate_to_array, id batch-events) settings.batch.count: invalid type: string \"ten\", expected usize",
        ],
    ),
];

#[test]
fn vet_reports_each_problem_once_with_its_place() {
    let dir = workspace_root().join("tests/fixtures/substation_configs");
    let out = run_in(&dir, &["vet", "."], Vec::new(), None);
    out.assert_code(1);
    assert_eq!(
        out.stdout_str(),
        "FAIL\t./bad/bad_duration.jsonnet\n\
         FAIL\t./bad/bad_test.jsonnet\n\
         FAIL\t./bad/missing_required.jsonnet\n\
         ok\t./bad/misspelled_setting.jsonnet\n\
         FAIL\t./bad/syntax_error.jsonnet\n\
         FAIL\t./bad/unknown_function.jsonnet\n\
         FAIL\t./bad/unknown_type.jsonnet\n\
         FAIL\t./bad/wrong_value_type.jsonnet\n\
         ok\t./good/cloudtrail_to_ecs.jsonnet\n\
         ok\t./good/metrics.jsonnet\n"
    );
    let err = &out.stderr;
    for (what, pieces) in PROBLEMS {
        for piece in *pieces {
            assert_eq!(
                err.matches(piece).count(),
                1,
                "{what}: {piece:?} should be reported once in:\n{err}"
            );
        }
    }
    // Nothing else: one report per problem (plus the lines of the Jsonnet traces).
    let reports = err
        .lines()
        .filter(|l| l.starts_with("./") || l.starts_with("warning: "))
        .count();
    assert_eq!(reports, 10, "{err}");
    assert!(err.ends_with("vet: 10 files, 7 with problems\n"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn the_good_configs_vet_clean_and_pass_their_tests() {
    let dir = workspace_root().join("tests/fixtures/substation_configs");
    let out = run_in(&dir, &["vet", "good"], Vec::new(), None);
    out.assert_code(0);
    assert_eq!(out.stderr, "vet: 2 files, 0 with problems\n");
    let out = run_in(&dir, &["test", "good"], Vec::new(), None);
    out.assert_code(0);
    assert!(
        out.stdout_str()
            .contains("ok\tgood/cloudtrail_to_ecs.jsonnet"),
        "{}\n{}",
        out.stdout_str(),
        out.stderr
    );
}
