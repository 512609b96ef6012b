//! `sluice test --junit FILE`: the run as JUnit XML, the report format CI systems (GitLab,
//! Jenkins, GitHub's test reporters) read.
//!
//! One `<testsuite>` per config file, named by its path, with one `<testcase>` per test
//! (`classname` is the file too). A test whose condition did not hold has a `<failure>`; a
//! test that errored has an `<error>`; what its `send_stdout` wrote is its `<system-out>`. A
//! file that did not compile or build has one test case, `[error]`, with the error; a
//! skipped file (it calls AWS, and AWS is not configured) lists its tests, each
//! `<skipped>` with the reason; a file without tests is an empty suite. The writer is a few
//! lines of string building and an escaper, not an XML library: the format is small and
//! fixed.

use std::fmt::Write as _;
use std::time::Duration;

use super::report::{CaseReport, CaseResult, FileOutcome, FileReport};

/// The JUnit document of a run's files.
pub(super) fn document(files: &[FileReport]) -> String {
    let mut total = Counts::default();
    let mut suites = String::new();
    for f in files {
        let counts = Counts::of(f);
        total.add(&counts);
        suite(&mut suites, f, &counts);
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites {}>", total.attributes());
    out.push_str(&suites);
    out.push_str("</testsuites>\n");
    out
}

/// The `tests`, `failures`, `errors`, `skipped` and `time` of a suite, or of all of them.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    time: Duration,
}

impl Counts {
    fn of(f: &FileReport) -> Counts {
        let mut c = Counts {
            time: f.elapsed,
            ..Counts::default()
        };
        match &f.outcome {
            FileOutcome::NoTests => {}
            FileOutcome::Error(_) => {
                c.tests = 1;
                c.errors = 1;
            }
            FileOutcome::Skipped { tests, .. } => {
                c.tests = tests.len();
                c.skipped = tests.len();
            }
            FileOutcome::Ran => {
                c.tests = f.cases.len();
                for case in &f.cases {
                    match case.result {
                        CaseResult::Pass { .. } => {}
                        CaseResult::Fail { .. } => c.failures += 1,
                        CaseResult::Error(_) => c.errors += 1,
                    }
                }
            }
        }
        c
    }

    fn add(&mut self, o: &Counts) {
        self.tests += o.tests;
        self.failures += o.failures;
        self.errors += o.errors;
        self.skipped += o.skipped;
        self.time += o.time;
    }

    fn attributes(&self) -> String {
        format!(
            "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\"",
            self.tests,
            self.failures,
            self.errors,
            self.skipped,
            secs(self.time)
        )
    }
}

fn suite(out: &mut String, f: &FileReport, counts: &Counts) {
    let name = escape(&f.path, true);
    let _ = write!(out, "  <testsuite name=\"{name}\" {}", counts.attributes());
    let open = |out: &mut String, test: &str, time: Duration| {
        let _ = write!(
            out,
            "    <testcase name=\"{}\" classname=\"{name}\" time=\"{}\"",
            escape(test, true),
            secs(time)
        );
    };
    match &f.outcome {
        FileOutcome::NoTests => {
            out.push_str("/>\n");
            return;
        }
        FileOutcome::Error(e) => {
            out.push_str(">\n");
            open(out, "[error]", f.elapsed);
            let message = e.lines().next().unwrap_or_default();
            let _ = writeln!(
                out,
                ">\n      <error message=\"{}\">{}</error>\n    </testcase>",
                escape(message, true),
                escape(e, false)
            );
        }
        FileOutcome::Skipped { reason, tests } => {
            out.push_str(">\n");
            for t in tests {
                open(out, t, Duration::ZERO);
                let _ = writeln!(
                    out,
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                    escape(reason, true)
                );
            }
        }
        FileOutcome::Ran => {
            out.push_str(">\n");
            for c in &f.cases {
                open(out, &c.name, c.elapsed);
                case_body(out, c);
            }
        }
    }
    out.push_str("  </testsuite>\n");
}

/// What follows a test case's attributes: `/>` for a quiet pass, else its children.
fn case_body(out: &mut String, c: &CaseReport) {
    let (tag, message) = match &c.result {
        CaseResult::Pass { .. } => ("", ""),
        CaseResult::Fail { summary, .. } => ("failure", summary.as_str()),
        CaseResult::Error(e) => ("error", e.as_str()),
    };
    if tag.is_empty() && c.captured.is_empty() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    if !tag.is_empty() {
        let _ = writeln!(
            out,
            "      <{tag} message=\"{}\">{}</{tag}>",
            escape(message, true),
            escape(&c.details().join("\n"), false)
        );
    }
    if !c.captured.is_empty() {
        let _ = writeln!(
            out,
            "      <system-out>{}</system-out>",
            escape(&String::from_utf8_lossy(&c.captured), false)
        );
    }
    out.push_str("    </testcase>\n");
}

/// Seconds to the millisecond, as JUnit's `time` attributes have them.
fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// `s` as XML character data (`attribute`: inside a double-quoted attribute value).
///
/// `&`, `<` and `>` always become references; in attributes `"` and `'` too, and tab, line
/// feed and carriage return (which attribute-value normalisation would turn into spaces)
/// become character references. Characters XML 1.0 does not allow at all (other control
/// characters, unpaired surrogates cannot occur in a `str`) become U+FFFD, since not even a
/// character reference may name them.
pub(super) fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' | '\n' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::{case, failing, file};
    use super::*;

    #[test]
    fn escaping() {
        let s = "a<b>&\"c\" 'd'\te\nf\r\u{1b}g";
        assert_eq!(
            escape(s, false),
            "a&lt;b&gt;&amp;\"c\" 'd'\te\nf&#13;\u{FFFD}g"
        );
        assert_eq!(
            escape(s, true),
            "a&lt;b&gt;&amp;&quot;c&quot; &apos;d&apos;&#9;e&#10;f&#13;\u{FFFD}g"
        );
        assert_eq!(escape("plain ünïcode ✓", true), "plain ünïcode ✓");
    }

    #[test]
    fn a_document_of_every_kind_of_file() {
        let files = [
            file(
                "a&b.jsonnet",
                FileOutcome::Ran,
                vec![
                    case("quiet", CaseResult::Pass { outputs: 1 }, ""),
                    case("<loud>", CaseResult::Pass { outputs: 1 }, "x<y\n"),
                    case("bad", failing(), ""),
                    case("boom", CaseResult::Error("no \"user\"".into()), ""),
                ],
            ),
            file(
                "e.jsonnet",
                FileOutcome::Error("e.jsonnet:1:3 oops\n  trace <here>".into()),
                vec![],
            ),
            file(
                "s.jsonnet",
                FileOutcome::Skipped {
                    reason: "calls AWS (send_aws_sqs)".into(),
                    tests: vec!["t1".into(), "t2".into()],
                },
                vec![],
            ),
            file("n.jsonnet", FileOutcome::NoTests, vec![]),
        ];
        let want = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="7" failures="1" errors="2" skipped="2" time="0.020">
  <testsuite name="a&amp;b.jsonnet" tests="4" failures="1" errors="1" skipped="0" time="0.005">
    <testcase name="quiet" classname="a&amp;b.jsonnet" time="0.002"/>
    <testcase name="&lt;loud&gt;" classname="a&amp;b.jsonnet" time="0.002">
      <system-out>x&lt;y
</system-out>
    </testcase>
    <testcase name="bad" classname="a&amp;b.jsonnet" time="0.002">
      <failure message="the condition did not hold">message:   {"a":"B"}
condition: cnd</failure>
    </testcase>
    <testcase name="boom" classname="a&amp;b.jsonnet" time="0.002">
      <error message="no &quot;user&quot;">error: no "user"</error>
    </testcase>
  </testsuite>
  <testsuite name="e.jsonnet" tests="1" failures="0" errors="1" skipped="0" time="0.005">
    <testcase name="[error]" classname="e.jsonnet" time="0.005">
      <error message="e.jsonnet:1:3 oops">e.jsonnet:1:3 oops
  trace &lt;here&gt;</error>
    </testcase>
  </testsuite>
  <testsuite name="s.jsonnet" tests="2" failures="0" errors="0" skipped="2" time="0.005">
    <testcase name="t1" classname="s.jsonnet" time="0.000">
      <skipped message="calls AWS (send_aws_sqs)"/>
    </testcase>
    <testcase name="t2" classname="s.jsonnet" time="0.000">
      <skipped message="calls AWS (send_aws_sqs)"/>
    </testcase>
  </testsuite>
  <testsuite name="n.jsonnet" tests="0" failures="0" errors="0" skipped="0" time="0.005"/>
</testsuites>
"#;
        assert_eq!(document(&files), want);
    }
}
