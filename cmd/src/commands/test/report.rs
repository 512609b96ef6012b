//! What `sluice test` found, and the two forms it prints on standard output: the `go test`-like
//! text report and `go test -json`-like events (`--format json`).
//!
//! The run ([`super`]) records each config file as a [`FileReport`] of [`CaseReport`]s and
//! hands them to a [`Printer`] as they finish: each test when it has run (so a slow test's
//! result shows as soon as it is known), each file when all of its tests have. The JUnit
//! writer ([`super::junit`]) reads the same records at the end. One rule ties the forms
//! together: the `Output` of the JSON events is, line by line, what the text report prints
//! with `-v`.

use std::io::Write;
use std::time::{Duration, SystemTime};

use serde::Serialize;

/// How a test ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum CaseResult {
    /// Every output met the condition (and the `outputs` count, if any, matched).
    Pass { outputs: usize },
    /// An output did not meet the condition, or the count of outputs was wrong.
    Fail {
        /// One line saying what went wrong (JUnit's `message`).
        summary: String,
        /// The message that failed, or what came out.
        message: String,
        /// The condition, or the count wanted.
        condition: String,
    },
    /// Building or running the test's transforms or condition failed.
    Error(String),
}

/// One test of a config.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CaseReport {
    pub name: String,
    pub started: SystemTime,
    pub elapsed: Duration,
    pub result: CaseResult,
    /// What the pipeline's `send_stdout` wrote during the test.
    pub captured: Vec<u8>,
}

impl CaseReport {
    pub(super) fn passed(&self) -> bool {
        matches!(self.result, CaseResult::Pass { .. })
    }

    /// The lines under the test's header that say why it failed (not indented).
    pub(super) fn details(&self) -> Vec<String> {
        match &self.result {
            CaseResult::Pass { .. } => Vec::new(),
            CaseResult::Fail {
                message, condition, ..
            } => vec![
                format!("message:   {message}"),
                format!("condition: {condition}"),
            ],
            CaseResult::Error(e) => vec![format!("error: {e}")],
        }
    }

    /// The captured output, line by line (lossily decoded; a last line without a newline
    /// is a line too).
    pub(super) fn captured_lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.captured)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// What the text report prints for the test when it prints it: the header, then the
    /// details and the captured output, indented.
    pub(super) fn lines(&self) -> Vec<String> {
        let header = match &self.result {
            CaseResult::Pass { outputs } => format!("--- PASS: {} ({outputs} outputs)", self.name),
            _ => format!("--- FAIL: {}", self.name),
        };
        std::iter::once(header)
            .chain(
                self.details()
                    .into_iter()
                    .chain(self.captured_lines())
                    .map(|l| format!("    {l}")),
            )
            .collect()
    }
}

/// What became of a config file.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum FileOutcome {
    /// It has no `tests` (and was not built).
    NoTests,
    /// Not run: the config calls AWS and nothing says where AWS is.
    Skipped {
        reason: String,
        /// The names of the tests that did not run.
        tests: Vec<String>,
    },
    /// Its tests ran (see [`FileReport::cases`]).
    Ran,
    /// It did not compile or build; the error, with its causes.
    Error(String),
}

/// One config file.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FileReport {
    /// The path as the user gave it (or as found under a directory given).
    pub path: String,
    pub started: SystemTime,
    pub elapsed: Duration,
    pub cases: Vec<CaseReport>,
    pub outcome: FileOutcome,
}

impl FileReport {
    pub(super) fn failed_cases(&self) -> usize {
        self.cases.iter().filter(|c| !c.passed()).count()
    }

    /// Whether the file counts against the run: a failing test or an error.
    pub(super) fn failed(&self) -> bool {
        matches!(self.outcome, FileOutcome::Error(_)) || self.failed_cases() > 0
    }

    /// The file's line of the text report.
    pub(super) fn line(&self) -> String {
        let secs = self.elapsed.as_secs_f64();
        match &self.outcome {
            FileOutcome::NoTests => format!("?\t{}\t[no tests]", self.path),
            FileOutcome::Skipped { reason, .. } => format!("?\t{}\t[skipped: {reason}]", self.path),
            FileOutcome::Error(_) => format!("?\t{}\t[error]", self.path),
            FileOutcome::Ran if self.failed_cases() == 0 => {
                format!("ok\t{}\t{secs:.3}s", self.path)
            }
            FileOutcome::Ran => format!("FAIL\t{}\t{secs:.3}s", self.path),
        }
    }
}

/// The counts of the summary line.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Tally {
    pub passed: usize,
    /// Failed tests and files with errors.
    pub failed: usize,
    pub skipped_files: usize,
}

impl Tally {
    pub(super) fn add(&mut self, f: &FileReport) {
        self.passed += f.cases.len() - f.failed_cases();
        self.failed += f.failed_cases();
        match f.outcome {
            FileOutcome::Error(_) => self.failed += 1,
            FileOutcome::Skipped { .. } => self.skipped_files += 1,
            FileOutcome::NoTests | FileOutcome::Ran => {}
        }
    }

    /// `N passed, N failed[, N files skipped]`.
    pub(super) fn line(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped_files > 0 {
            line.push_str(&format!(", {} files skipped", self.skipped_files));
        }
        line
    }
}

/// The form of the report on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Format {
    /// `go test`-like lines.
    Text,
    /// One JSON object per line per event, as `go test -json` prints.
    Json,
}

/// Prints the report on a writer (standard output) as the run goes.
pub(super) struct Printer<W: Write> {
    out: W,
    format: Format,
    verbose: bool,
    /// Whether the current file's `start` event is out (JSON).
    started: bool,
}

impl<W: Write> Printer<W> {
    pub(super) fn new(out: W, format: Format, verbose: bool) -> Self {
        Printer {
            out,
            format,
            verbose,
            started: false,
        }
    }

    /// A test of `file` (whose `cases` do not hold it yet) has finished.
    pub(super) fn case(&mut self, file: &FileReport, case: &CaseReport) -> std::io::Result<()> {
        match self.format {
            Format::Text => {
                if self.verbose || !case.passed() {
                    for l in case.lines() {
                        writeln!(self.out, "{l}")?;
                    }
                }
            }
            Format::Json => {
                self.start(file)?;
                let end = case.started + case.elapsed;
                let test = Some(case.name.as_str());
                let ev = Event::new(case.started, "run", &file.path, test);
                self.event(&ev)?;
                for l in case.lines() {
                    self.event(&Event::new(end, "output", &file.path, test).output(l))?;
                }
                let action = if case.passed() { "pass" } else { "fail" };
                self.event(&Event::new(end, action, &file.path, test).elapsed(case.elapsed))?;
            }
        }
        Ok(())
    }

    /// `file` has finished (its error, if any, is on standard error already).
    pub(super) fn file(&mut self, file: &FileReport) -> std::io::Result<()> {
        match self.format {
            Format::Text => writeln!(self.out, "{}", file.line())?,
            Format::Json => {
                self.start(file)?;
                let end = file.started + file.elapsed;
                let mut lines = Vec::new();
                if let FileOutcome::Error(e) = &file.outcome {
                    lines.extend(e.lines().map(str::to_string));
                }
                lines.push(file.line());
                for l in lines {
                    self.event(&Event::new(end, "output", &file.path, None).output(l))?;
                }
                let action = match file.outcome {
                    FileOutcome::NoTests | FileOutcome::Skipped { .. } => "skip",
                    _ if file.failed() => "fail",
                    _ => "pass",
                };
                self.event(&Event::new(end, action, &file.path, None).elapsed(file.elapsed))?;
                self.started = false;
            }
        }
        self.out.flush()
    }

    /// The run has finished: the summary line (text only; `go test -json` has none).
    pub(super) fn summary(&mut self, tally: &Tally) -> std::io::Result<()> {
        if self.format == Format::Text {
            writeln!(self.out, "{}", tally.line())?;
        }
        self.out.flush()
    }

    fn start(&mut self, file: &FileReport) -> std::io::Result<()> {
        if !self.started {
            self.started = true;
            self.event(&Event::new(file.started, "start", &file.path, None))?;
        }
        Ok(())
    }

    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, ev)?;
        self.out.write_all(b"\n")
    }
}

/// One line of `--format json`, with `go test -json`'s field names and order.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct Event<'a> {
    /// RFC 3339, UTC, microseconds.
    time: String,
    /// `start`, `run`, `output`, `pass`, `fail` or `skip`.
    action: &'static str,
    /// The config file.
    package: &'a str,
    /// The test; absent on the file's own events.
    #[serde(skip_serializing_if = "Option::is_none")]
    test: Option<&'a str>,
    /// Seconds, on `pass`, `fail` and `skip`.
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed: Option<f64>,
    /// One line of the report, ending in a newline, on `output`.
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
}

impl<'a> Event<'a> {
    fn new(at: SystemTime, action: &'static str, package: &'a str, test: Option<&'a str>) -> Self {
        Event {
            time: rfc3339(at),
            action,
            package,
            test,
            elapsed: None,
            output: None,
        }
    }

    fn elapsed(mut self, d: Duration) -> Self {
        self.elapsed = Some(seconds(d));
        self
    }

    fn output(mut self, mut line: String) -> Self {
        line.push('\n');
        self.output = Some(line);
        self
    }
}

/// `at` in RFC 3339, UTC, to the microsecond.
pub(super) fn rfc3339(at: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// `d` in seconds, to the millisecond (as the text report shows it).
pub(super) fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// 2023-11-14T22:13:20Z plus `ms` milliseconds.
    pub(crate) fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_700_000_000_000 + ms)
    }

    pub(crate) fn case(name: &str, result: CaseResult, captured: &str) -> CaseReport {
        CaseReport {
            name: name.into(),
            started: at(1),
            elapsed: Duration::from_millis(2),
            result,
            captured: captured.as_bytes().to_vec(),
        }
    }

    pub(crate) fn file(path: &str, outcome: FileOutcome, cases: Vec<CaseReport>) -> FileReport {
        FileReport {
            path: path.into(),
            started: at(0),
            elapsed: Duration::from_millis(5),
            cases,
            outcome,
        }
    }

    pub(crate) fn failing() -> CaseResult {
        CaseResult::Fail {
            summary: "the condition did not hold".into(),
            message: r#"{"a":"B"}"#.into(),
            condition: "cnd".into(),
        }
    }

    /// Prints `files` as a whole run does and returns what was printed.
    fn print(format: Format, verbose: bool, files: &[FileReport]) -> String {
        let mut p = Printer::new(Vec::new(), format, verbose);
        let mut tally = Tally::default();
        for f in files {
            let mut so_far = FileReport {
                cases: Vec::new(),
                ..f.clone()
            };
            for c in &f.cases {
                p.case(&so_far, c).unwrap();
                so_far.cases.push(c.clone());
            }
            p.file(f).unwrap();
            tally.add(f);
        }
        p.summary(&tally).unwrap();
        String::from_utf8(p.out).unwrap()
    }

    fn run_of_three() -> Vec<FileReport> {
        vec![
            file(
                "a.jsonnet",
                FileOutcome::Ran,
                vec![
                    case("ok", CaseResult::Pass { outputs: 1 }, "out 1\n"),
                    case("bad", failing(), "out 2\nout 3\n"),
                ],
            ),
            file(
                "b.jsonnet",
                FileOutcome::Error("b.jsonnet:1:3 oops\n  trace".into()),
                vec![],
            ),
            file(
                "c.jsonnet",
                FileOutcome::Skipped {
                    reason: "calls AWS".into(),
                    tests: vec!["t".into()],
                },
                vec![],
            ),
        ]
    }

    #[test]
    fn text_shows_captured_output_under_failures_and_with_verbose() {
        assert_eq!(
            print(Format::Text, false, &run_of_three()),
            "--- FAIL: bad\n    message:   {\"a\":\"B\"}\n    condition: cnd\n    out 2\n    out 3\n\
             FAIL\ta.jsonnet\t0.005s\n?\tb.jsonnet\t[error]\n?\tc.jsonnet\t[skipped: calls AWS]\n\
             1 passed, 2 failed, 1 files skipped\n"
        );
        let verbose = print(Format::Text, true, &run_of_three());
        assert!(
            verbose.starts_with("--- PASS: ok (1 outputs)\n    out 1\n--- FAIL: bad\n"),
            "{verbose}"
        );
    }

    #[test]
    fn json_events_follow_go_test_json() {
        let got = print(Format::Json, false, &run_of_three());
        let t0 = "2023-11-14T22:13:20.000000Z";
        let t1 = "2023-11-14T22:13:20.001000Z";
        let t3 = "2023-11-14T22:13:20.003000Z";
        let t5 = "2023-11-14T22:13:20.005000Z";
        let a = r#""Package":"a.jsonnet""#;
        let want = [
            format!(r#"{{"Time":"{t0}","Action":"start",{a}}}"#),
            format!(r#"{{"Time":"{t1}","Action":"run",{a},"Test":"ok"}}"#),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"ok","Output":"--- PASS: ok (1 outputs)\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"ok","Output":"    out 1\n"}}"#
            ),
            format!(r#"{{"Time":"{t3}","Action":"pass",{a},"Test":"ok","Elapsed":0.002}}"#),
            format!(r#"{{"Time":"{t1}","Action":"run",{a},"Test":"bad"}}"#),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"bad","Output":"--- FAIL: bad\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"bad","Output":"    message:   {{\"a\":\"B\"}}\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"bad","Output":"    condition: cnd\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"bad","Output":"    out 2\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t3}","Action":"output",{a},"Test":"bad","Output":"    out 3\n"}}"#
            ),
            format!(r#"{{"Time":"{t3}","Action":"fail",{a},"Test":"bad","Elapsed":0.002}}"#),
            format!(
                r#"{{"Time":"{t5}","Action":"output",{a},"Output":"FAIL\ta.jsonnet\t0.005s\n"}}"#
            ),
            format!(r#"{{"Time":"{t5}","Action":"fail",{a},"Elapsed":0.005}}"#),
            format!(r#"{{"Time":"{t0}","Action":"start","Package":"b.jsonnet"}}"#),
            format!(
                r#"{{"Time":"{t5}","Action":"output","Package":"b.jsonnet","Output":"b.jsonnet:1:3 oops\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t5}","Action":"output","Package":"b.jsonnet","Output":"  trace\n"}}"#
            ),
            format!(
                r#"{{"Time":"{t5}","Action":"output","Package":"b.jsonnet","Output":"?\tb.jsonnet\t[error]\n"}}"#
            ),
            format!(r#"{{"Time":"{t5}","Action":"fail","Package":"b.jsonnet","Elapsed":0.005}}"#),
            format!(r#"{{"Time":"{t0}","Action":"start","Package":"c.jsonnet"}}"#),
            format!(
                r#"{{"Time":"{t5}","Action":"output","Package":"c.jsonnet","Output":"?\tc.jsonnet\t[skipped: calls AWS]\n"}}"#
            ),
            format!(r#"{{"Time":"{t5}","Action":"skip","Package":"c.jsonnet","Elapsed":0.005}}"#),
        ];
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got, want, "no summary line, one event per line");
    }

    #[test]
    fn the_tally_counts_tests_and_files() {
        let mut t = Tally::default();
        run_of_three().iter().for_each(|f| t.add(f));
        assert_eq!(
            t,
            Tally {
                passed: 1,
                failed: 2,
                skipped_files: 1
            }
        );
        assert_eq!(Tally::default().line(), "0 passed, 0 failed");
    }

    #[test]
    fn times_and_durations() {
        assert_eq!(rfc3339(at(123)), "2023-11-14T22:13:20.123000Z");
        assert_eq!(seconds(Duration::from_micros(1_234_567)), 1.235);
        let captured = case("c", CaseResult::Pass { outputs: 0 }, "no newline");
        assert_eq!(captured.captured_lines(), ["no newline"]);
    }
}
