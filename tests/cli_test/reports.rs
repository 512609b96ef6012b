//! `sluice test`'s reports as a CI system and a person see them: what a config's
//! `send_stdout` writes is kept with its test (never between report lines), `--format json`
//! prints `go test -json` events, and `--junit FILE` writes JUnit XML.

use super::{BROKEN, FAILING, PASSING, report};
use crate::common::Dir;

/// Two tests through a pipeline that ends in `send_stdout`: `shouts` passes, `whispers`
/// fails; each writes one line.
const SENDS: &str = r#"local sub = std.extVar('sub');
{
  tests: [
    {
      name: 'shouts',
      transforms: [sub.tf.test.message({ value: { a: 'b' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
    },
    {
      name: 'whispers',
      transforms: [sub.tf.test.message({ value: { a: 'c' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'c' }),
    },
  ],
  transforms: [sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } }), sub.tf.send.stdout()],
}
"#;

const WHISPERS_CONDITION: &str = "    condition: {\"settings\":{\"object\":{\"source_key\":\"a\"},\"value\":\"c\"},\"type\":\"string_equal_to\"}";

#[test]
fn send_stdout_output_stays_with_its_test() {
    let d = Dir::new();
    d.write("sends.jsonnet", SENDS);

    // Without -v only the failing test's output shows, indented under it.
    let out = d.sluice(&["test", "sends.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()),
        [
            "--- FAIL: whispers",
            "    message:   {\"a\":\"C\"}",
            WHISPERS_CONDITION,
            "    {\"a\":\"C\"}",
            "FAIL\tsends.jsonnet\tTIME",
            "1 passed, 1 failed",
        ]
    );

    // With -v every test's output shows under it.
    let out = d.sluice(&["test", "-v", "sends.jsonnet"], "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()),
        [
            "--- PASS: shouts (1 outputs)",
            "    {\"a\":\"B\"}",
            "--- FAIL: whispers",
            "    message:   {\"a\":\"C\"}",
            WHISPERS_CONDITION,
            "    {\"a\":\"C\"}",
            "FAIL\tsends.jsonnet\tTIME",
            "1 passed, 1 failed",
        ]
    );

    // A passing file prints nothing of its output without -v.
    d.write(
        "quiet.jsonnet",
        SENDS.replace("value: 'c' })", "value: 'C' })"),
    );
    let out = d.sluice(&["test", "quiet.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        ["ok\tquiet.jsonnet\tTIME", "2 passed, 0 failed"]
    );

    // In JSON the output is the test's `output` events.
    let out = d.sluice(&["test", "--format", "json", "sends.jsonnet"], "");
    let outputs: Vec<(String, String)> = parse_events(out.stdout_str())
        .iter()
        .filter(|e| e["Action"] == "output" && e.get("Test").is_some())
        .map(|e| {
            (
                e["Test"].as_str().unwrap().into(),
                e["Output"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        outputs.contains(&("shouts".into(), "    {\"a\":\"B\"}\n".into())),
        "{outputs:?}"
    );
    assert!(
        outputs.contains(&("whispers".into(), "    {\"a\":\"C\"}\n".into())),
        "{outputs:?}"
    );
}

/// Each line of `stdout` as a JSON event, checked against `go test -json`'s fields: `Time`
/// (RFC 3339), `Action`, `Package`, then `Test` (test events), `Elapsed` (pass, fail, skip)
/// and `Output` (a line ending in a newline), in that order and no others.
fn parse_events(stdout: &str) -> Vec<serde_json::Value> {
    const ORDER: [&str; 6] = ["Time", "Action", "Package", "Test", "Elapsed", "Output"];
    stdout
        .lines()
        .map(|l| {
            let e: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|err| panic!("{err}: {l}"));
            let keys: Vec<&str> = e
                .as_object()
                .expect("an object")
                .keys()
                .map(String::as_str)
                .collect();
            let mut want: Vec<&str> = ORDER.to_vec();
            want.retain(|k| keys.contains(k));
            assert_eq!(keys, want, "fields and their order: {l}");
            let time = e["Time"].as_str().expect("Time");
            assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{l}");
            assert!(e["Package"].is_string(), "{l}");
            let action = e["Action"].as_str().expect("Action");
            match action {
                "pass" | "fail" | "skip" => {
                    assert!(e["Elapsed"].as_f64().is_some_and(|s| s >= 0.0), "{l}")
                }
                _ => assert!(e.get("Elapsed").is_none(), "{l}"),
            }
            match action {
                "output" => assert!(e["Output"].as_str().expect("Output").ends_with('\n'), "{l}"),
                "start" | "run" | "pass" | "fail" | "skip" => {
                    assert!(e.get("Output").is_none(), "{l}")
                }
                other => panic!("unknown action {other}: {l}"),
            }
            match action {
                "run" => assert!(e["Test"].is_string(), "{l}"),
                "start" => assert!(e.get("Test").is_none(), "{l}"),
                _ => {}
            }
            e
        })
        .collect()
}

/// `ACTION PACKAGE[ TEST]` of each event, runs of file-level `output` events as one.
fn shape(events: &[serde_json::Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let mut s = format!(
            "{} {}",
            e["Action"].as_str().unwrap(),
            e["Package"].as_str().unwrap()
        );
        if let Some(t) = e.get("Test") {
            s = format!("{s} {}", t.as_str().unwrap());
        }
        if out.last() != Some(&s) || e.get("Test").is_some() {
            out.push(s);
        }
    }
    out
}

#[test]
fn format_json_prints_go_test_json_events() {
    let d = Dir::new();
    d.write("pass.jsonnet", PASSING);
    d.write("fail.jsonnet", FAILING);
    d.write("syntax.jsonnet", "{ transforms: [ }\n");
    let out = d.sluice(
        &[
            "test",
            "--format",
            "json",
            "pass.jsonnet",
            "fail.jsonnet",
            "syntax.jsonnet",
        ],
        "",
    );
    out.assert_code(1);
    let events = parse_events(out.stdout_str());
    assert_eq!(
        shape(&events),
        [
            "start pass.jsonnet",
            "run pass.jsonnet uppercases",
            "output pass.jsonnet uppercases",
            "pass pass.jsonnet uppercases",
            "output pass.jsonnet",
            "pass pass.jsonnet",
            "start fail.jsonnet",
            "run fail.jsonnet passes",
            "output fail.jsonnet passes",
            "pass fail.jsonnet passes",
            "run fail.jsonnet wrong-expectation",
            "output fail.jsonnet wrong-expectation",
            "output fail.jsonnet wrong-expectation",
            "output fail.jsonnet wrong-expectation",
            "fail fail.jsonnet wrong-expectation",
            "output fail.jsonnet",
            "fail fail.jsonnet",
            "start syntax.jsonnet",
            "output syntax.jsonnet",
            "fail syntax.jsonnet",
        ]
    );
    let output = |pkg: &str, test: Option<&str>| -> Vec<&str> {
        events
            .iter()
            .filter(|e| {
                e["Action"] == "output"
                    && e["Package"] == pkg
                    && e.get("Test").and_then(|t| t.as_str()) == test
            })
            .map(|e| e["Output"].as_str().unwrap())
            .collect()
    };
    assert_eq!(
        output("pass.jsonnet", Some("uppercases")),
        ["--- PASS: uppercases (1 outputs)\n"]
    );
    assert_eq!(
        output("fail.jsonnet", Some("wrong-expectation"))[..2],
        [
            "--- FAIL: wrong-expectation\n",
            "    message:   {\"a\":\"B\"}\n"
        ]
    );
    let file_line = output("pass.jsonnet", None);
    assert!(
        file_line[0].starts_with("ok\tpass.jsonnet\t0.") && file_line[0].ends_with("s\n"),
        "{file_line:?}"
    );
    let syntax = output("syntax.jsonnet", None);
    assert!(
        syntax[0].starts_with("syntax.jsonnet: syntax error"),
        "{syntax:?}"
    );
    assert!(
        syntax.iter().any(|l| l.contains("syntax.jsonnet:1:")),
        "{syntax:?}"
    );
    assert_eq!(syntax.last(), Some(&"?\tsyntax.jsonnet\t[error]\n"));
    assert!(
        out.stderr.contains("syntax.jsonnet:1:"),
        "errors still go to stderr: {}",
        out.stderr
    );

    // A file without tests is skipped; a passing run exits 0.
    d.write("notests.jsonnet", super::NO_TESTS);
    let out = d.sluice(
        &[
            "test",
            "--format",
            "json",
            "notests.jsonnet",
            "pass.jsonnet",
        ],
        "",
    );
    out.assert_clean_success();
    let events = parse_events(out.stdout_str());
    assert_eq!(
        shape(&events)[..3],
        [
            "start notests.jsonnet",
            "output notests.jsonnet",
            "skip notests.jsonnet"
        ]
    );
    assert_eq!(events[1]["Output"], "?\tnotests.jsonnet\t[no tests]\n");
}

/// The `time` attributes replaced by `T` (after checking that each is seconds).
fn untimed(xml: &str) -> String {
    let mut out = String::new();
    let mut rest = xml;
    while let Some(i) = rest.find(" time=\"") {
        out.push_str(&rest[..i]);
        out.push_str(" time=\"T\"");
        let after = &rest[i + " time=\"".len()..];
        let end = after.find('"').expect("a closed attribute");
        let secs = &after[..end];
        assert!(
            secs.parse::<f64>().is_ok() && secs.contains('.'),
            "not seconds: {secs}"
        );
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A passing test, and a failing one whose name and failing message hold XML's special
/// characters; both write to stdout.
const SPECIAL: &str = r#"local sub = std.extVar('sub');
{
  tests: [
    {
      name: 'plain',
      transforms: [sub.tf.test.message({ value: { a: 'ok' } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'ok' }),
    },
    {
      name: 'a<b> & "c"',
      transforms: [sub.tf.test.message({ value: { a: "x<y&z'" } })],
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'ok' }),
    },
  ],
  transforms: [sub.tf.send.stdout()],
}
"#;

#[test]
fn junit_reports_suites_cases_failures_errors_and_output() {
    let d = Dir::new();
    d.write("special.jsonnet", SPECIAL);
    d.write("broken.jsonnet", BROKEN);
    d.write("notests.jsonnet", super::NO_TESTS);
    let args = [
        "test",
        "--junit",
        "report.xml",
        "special.jsonnet",
        "broken.jsonnet",
        "notests.jsonnet",
    ];
    let out = d.sluice(&args, "");
    out.assert_code(1);
    assert_eq!(
        report(out.stdout_str()).last().map(String::as_str),
        Some("1 passed, 2 failed"),
        "the text report is unchanged by --junit"
    );
    let want = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" errors="1" skipped="0" time="T">
  <testsuite name="special.jsonnet" tests="2" failures="1" errors="0" skipped="0" time="T">
    <testcase name="plain" classname="special.jsonnet" time="T">
      <system-out>{"a":"ok"}
</system-out>
    </testcase>
    <testcase name="a&lt;b&gt; &amp; &quot;c&quot;" classname="special.jsonnet" time="T">
      <failure message="the condition did not hold">message:   {"a":"x&lt;y&amp;z'"}
condition: {"settings":{"object":{"source_key":"a"},"value":"ok"},"type":"string_equal_to"}</failure>
      <system-out>{"a":"x&lt;y&amp;z'"}
</system-out>
    </testcase>
  </testsuite>
  <testsuite name="broken.jsonnet" tests="1" failures="0" errors="1" skipped="0" time="T">
    <testcase name="[error]" classname="broken.jsonnet" time="T">
      <error message="broken.jsonnet: transforms[0] (nope): unknown transform type &quot;nope&quot;">broken.jsonnet: transforms[0] (nope): unknown transform type "nope"</error>
    </testcase>
  </testsuite>
  <testsuite name="notests.jsonnet" tests="0" failures="0" errors="0" skipped="0" time="T"/>
</testsuites>
"#;
    assert_eq!(untimed(&d.read("report.xml")), want);

    // With --format json: the same XML, and stdout is JSON events only.
    std::fs::remove_file(d.path().join("report.xml")).unwrap();
    let mut json_args = args.to_vec();
    json_args.insert(1, "--format=json");
    let out = d.sluice(&json_args, "");
    out.assert_code(1);
    let events = parse_events(out.stdout_str());
    assert!(
        events
            .iter()
            .any(|e| e["Action"] == "fail" && e["Test"] == "a<b> & \"c\""),
        "{}",
        out.stdout_str()
    );
    assert_eq!(untimed(&d.read("report.xml")), want);

    // A report that cannot be written is an error that says where.
    let out = d.sluice(
        &["test", "--junit", "missing/report.xml", "notests.jsonnet"],
        "",
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("writing the JUnit report to missing/report.xml"),
        "{}",
        out.stderr
    );
}

#[test]
fn metric_lines_stay_with_their_test_too() {
    let d = Dir::new();
    d.write(
        "metrics.jsonnet",
        r#"local sub = std.extVar('sub');
local emf = { type: 'aws_cloudwatch_embedded_metrics' };
{
  tests: [{
    name: 'counts',
    transforms: [sub.tf.test.message({ value: { a: 1 } })],
    condition: sub.cnd.num.eq({ obj: { src: 'a' }, value: 1 }),
  }],
  transforms: [
    sub.tf.util.metric.count({ metric: { name: 'MessagesIn', attributes: { Pipeline: 't' }, destination: emf } }),
  ],
}
"#,
    );
    let out = d.sluice(&["test", "metrics.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(
        report(out.stdout_str()),
        ["ok\tmetrics.jsonnet\tTIME", "1 passed, 0 failed"]
    );
    // With -v the EMF line shows under its test.
    let out = d.sluice(&["test", "-v", "metrics.jsonnet"], "");
    out.assert_clean_success();
    let lines = report(out.stdout_str());
    assert_eq!(lines[0], "--- PASS: counts (1 outputs)", "{lines:?}");
    assert!(
        lines[1].starts_with("    {\"_aws\":") && lines[1].contains("\"MessagesIn\":1"),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 4, "{lines:?}");
}
