//! `sluice test`: run the `tests` a config carries, and report on them for people and CI.
//!
//! For each test, as Substation does: the test's own transforms get one ctrl message (so
//! `test_message` transforms emit their messages in order, then the ctrl); a fresh instance
//! of the config's pipeline gets all of that in one batch (so batches flush at the ctrl);
//! the condition must hold for every data message that comes out. Unlike Substation, a
//! failing or erroring test makes the exit status non-zero, so CI can rely on it; a test
//! may also say how many messages must come out (`outputs: N`, which Substation ignores),
//! and every test gets fresh kv stores in a temporary directory.
//!
//! A config that calls AWS is skipped, with the reason, when nothing tells the AWS SDK where
//! to go ([`aws`]).
//!
//! **The report owns standard output.** Each test's pipeline is built in an engine
//! [`Context`] whose output sink ([`Context::with_stdout`]) is a buffer of that test's, so
//! what the config's `send_stdout` writes is captured instead of landing between report
//! lines. The capture belongs to its test: the text report shows it indented under the test
//! when the test fails, and under every test with `-v` (as `go test` shows a test's log);
//! `--format json` carries it in the test's `output` events; `--junit` puts it in the test
//! case's `<system-out>`. Errors and config warnings stay on standard error. (Only
//! `send_stdout` goes through the sink; a config whose metrics go to standard output as
//! EMF lines still writes them there.)
//!
//! The run records a [`report::FileReport`] per config file and hands it to the
//! [`report::Printer`] of the chosen `--format` as tests and files finish; [`junit`] writes
//! the same records as XML at the end.

mod aws;
mod junit;
mod report;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use anyhow::Context as _;
use sluice_engine::driver::{self, SettleDeadline};
use sluice_engine::{Context, Message, Registry};

use crate::files::{config_files, parse_ext_str};
use report::{CaseReport, CaseResult, FileOutcome, FileReport, Format, Printer, Tally};

/// Arguments of `sluice test`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Only the files directly in the named directories, not their subdirectories.
    #[arg(long)]
    shallow: bool,
    /// Accepted for Substation compatibility; directories are walked recursively anyway.
    #[arg(short = 'R', long, hide = true)]
    recursive: bool,
    /// A Jsonnet external string, KEY=VALUE (repeatable).
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
    /// Let a config read from a URL import, and read kv store files, from anywhere sluice
    /// can read (another host, s3://, gs://, loopback, local files): by default it reads
    /// only from under its own directory.
    #[arg(long)]
    allow_remote_imports: bool,
    /// Print every test's name, result and captured output, not only failures'.
    #[arg(short, long)]
    verbose: bool,
    /// The report on standard output: `go test`-like lines, or one JSON event per line as
    /// `go test -json` prints.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Also write the results as JUnit XML to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Files, directories, or config URLs (s3://BUCKET/KEY, https://...).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

/// The report could not be written (standard output went away, as in `sluice test | head`).
#[derive(Debug, thiserror::Error)]
#[error("writing to stdout: {0}")]
struct StdoutError(std::io::Error);

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    sluice_config::remote::allow_imports(args.allow_remote_imports);
    let _ = args.recursive;
    let registry = sluice_transforms::registry();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let files = config_files(&args.paths, args.shallow)?;
    let env: HashMap<String, OsString> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .collect();
    let aws_ready = aws::aws_configured(&env);
    let mut printer = Printer::new(std::io::stdout(), args.format, args.verbose);
    let mut tally = Tally::default();
    let mut reports = Vec::new();
    for file in &files {
        let clock = Instant::now();
        let mut report = FileReport {
            path: file.display().to_string(),
            started: SystemTime::now(),
            elapsed: Default::default(),
            cases: Vec::new(),
            outcome: FileOutcome::Ran,
        };
        let outcome = test_file(
            &registry,
            &runtime,
            file,
            &args,
            aws_ready,
            &mut report,
            &mut printer,
        );
        report.elapsed = clock.elapsed();
        report.outcome = match outcome {
            Ok(None) => continue,
            Ok(Some(o)) => o,
            Err(e) if e.is::<StdoutError>() => return Err(e),
            Err(e) => {
                eprintln!("{e:#}");
                FileOutcome::Error(format!("{e:#}"))
            }
        };
        printer.file(&report).map_err(StdoutError)?;
        tally.add(&report);
        if args.junit.is_some() {
            reports.push(report);
        }
    }
    printer.summary(&tally).map_err(StdoutError)?;
    if let Some(path) = &args.junit {
        std::fs::write(path, junit::document(&reports))
            .with_context(|| format!("writing the JUnit report to {}", path.display()))?;
    }
    Ok(if tally.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs the tests of one file, recording each in `report` and printing it as it finishes.
/// `None`: the file is not a config (no `transforms`). A [`StdoutError`] ends the run; any
/// other error is the file's.
fn test_file(
    registry: &Registry,
    rt: &tokio::runtime::Runtime,
    file: &Path,
    args: &Args,
    aws_ready: bool,
    report: &mut FileReport,
    printer: &mut Printer<std::io::Stdout>,
) -> anyhow::Result<Option<FileOutcome>> {
    let Some(cfg) = super::load_optional(file, &args.ext_str)? else {
        return Ok(None);
    };
    let tests = cfg.tests()?;
    if tests.is_empty() {
        // As Substation's `test` does, a config without tests is not built: its sends may
        // need secrets or endpoints the test machine does not have (`sluice vet` checks
        // that a config builds).
        return Ok(Some(FileOutcome::NoTests));
    }
    if !aws_ready && let Some(services) = aws::aws_types(&cfg.json) {
        return Ok(Some(FileOutcome::Skipped {
            reason: format!(
                "calls AWS ({services}) and no AWS credentials, profile or endpoint is \
                 configured; set them (AWS_ENDPOINT_URL for local emulators: \
                 scripts/emulators.sh starts them)"
            ),
            tests: tests.iter().map(|t| t.name.clone()).collect(),
        }));
    }
    // A config that does not build is an error of the file, reported once (as Substation's
    // `[config error]`), not a failure of each test. Built with state of its own, like a test.
    let state = tempfile::tempdir().context("creating a state directory")?;
    super::build_pipeline_in(
        &Context::in_dir(state.path()),
        registry,
        file,
        cfg.transforms(),
    )?;
    for t in &tests {
        let started = SystemTime::now();
        let clock = Instant::now();
        let captured = Arc::new(Mutex::new(Vec::new()));
        let result = match run_case(registry, rt, file, cfg.transforms(), t, captured.clone()) {
            Ok(r) => r,
            Err(e) => CaseResult::Error(format!("{e:#}")),
        };
        let case = CaseReport {
            name: t.name.clone(),
            started,
            elapsed: clock.elapsed(),
            result,
            captured: std::mem::take(&mut *captured.lock().unwrap_or_else(|p| p.into_inner())),
        };
        printer.case(report, &case).map_err(StdoutError)?;
        report.cases.push(case);
    }
    Ok(Some(FileOutcome::Ran))
}

fn run_case(
    registry: &Registry,
    rt: &tokio::runtime::Runtime,
    file: &Path,
    transforms: &serde_json::Value,
    t: &sluice_config::TestCase,
    captured: Arc<Mutex<Vec<u8>>>,
) -> anyhow::Result<CaseResult> {
    // A fresh context per test, with its state files in a temporary directory: no kv
    // store (locks included) is shared between tests, or with real runs; the test's own
    // transforms and the config's share it, as they would share a store in one process.
    // What their `send_stdout`s write goes to the test's buffer, not to the report.
    let state = tempfile::tempdir().context("creating the test's state directory")?;
    let ctx = Arc::new(
        Context::default()
            .with_state_dir(state.path())
            .with_stdout(captured),
    );
    let judged = rt.block_on(judge(registry, &ctx, file, transforms, t, |w| {
        crate::output::warnings(file, w)
    }))?;
    let outputs = judged.outputs;
    Ok(match judged.failure {
        None => CaseResult::Pass { outputs },
        Some(Failure::Condition { message, condition }) => CaseResult::Fail {
            summary: "the condition did not hold".into(),
            message,
            condition,
        },
        Some(Failure::Count { want }) => CaseResult::Fail {
            summary: format!("{outputs} output message(s), not {want}"),
            message: format!("{outputs} output message(s)"),
            condition: format!("outputs: {want}"),
        },
    })
}

/// What one test came to, before a report words it.
pub(crate) struct Judged {
    /// The data messages that came out (up to the first that failed the condition).
    pub outputs: usize,
    /// Why the test failed; `None` when it passed.
    pub failure: Option<Failure>,
}

/// Why a test failed.
pub(crate) enum Failure {
    /// A message that came out did not meet the condition.
    Condition {
        /// The message's data.
        message: String,
        /// The condition, as JSON.
        condition: String,
    },
    /// The count of messages out was not the test's `outputs`.
    Count {
        /// The count wanted.
        want: usize,
    },
}

/// Judges test `t` of the config whose pipeline is `transforms`, as `sluice test` does
/// (and `sluice play`'s Test): the test's own transforms get one ctrl, the config's pipeline
/// gets what they emit in one batch, and the condition must hold for every data message
/// that comes out (and their count be `outputs`, when the test gives it). Everything is
/// built in `ctx`; `file` names the config in errors, and `warn` gets each build's
/// warnings.
pub(crate) async fn judge(
    registry: &Registry,
    ctx: &Arc<Context>,
    file: &Path,
    transforms: &serde_json::Value,
    t: &sluice_config::TestCase,
    warn: impl Fn(&[sluice_engine::ConfigWarning]),
) -> anyhow::Result<Judged> {
    let in_file = || format!("{}", file.display());
    let condition = registry
        .build_condition(&t.condition, &t.condition_location())
        .with_context(in_file)?;
    warn(&condition.warnings);
    let setup = registry
        .build_pipeline_in(ctx, &t.transforms, &t.transforms_location())
        .with_context(in_file)?;
    warn(&setup.warnings);
    let seeds = setup
        .value
        .apply(vec![Message::ctrl()])
        .await
        .context("running the test's transforms")?;
    let pipeline = registry
        .build_pipeline_in(ctx, transforms, "transforms")
        .with_context(in_file)?;
    warn(&pipeline.warnings);
    // The seeds as input, ctrls the test's transforms made among them included, and the
    // one ctrl that ends it, which the driver sends in place of the seeds' last (Substation's
    // test applies them all in one call: the outputs are the same). A lock settles what it
    // owes before the outputs are judged.
    let mut seeds = seeds;
    if seeds.last().is_some_and(Message::is_ctrl) {
        seeds.pop();
    }
    let mut out = Vec::new();
    let (ran, settled) = driver::drive_all_within(
        &pipeline.value,
        vec![seeds],
        &SettleDeadline::default(),
        |o| out.extend(o),
    )
    .await;
    ran.context("running the config's transforms")?;
    if let Some(first) = settled.unsettled.first() {
        anyhow::bail!("running the config's transforms: {first}");
    }
    let mut outputs = 0;
    for m in out.iter().filter(|m| !m.is_ctrl()) {
        outputs += 1;
        if !condition
            .value
            .test(m)
            .context("evaluating the condition")?
        {
            return Ok(Judged {
                outputs,
                failure: Some(Failure::Condition {
                    message: String::from_utf8_lossy(m.data()).into_owned(),
                    condition: serde_json::to_string(&t.condition).unwrap_or_default(),
                }),
            });
        }
    }
    let failure = t
        .outputs
        .filter(|&want| want != outputs)
        .map(|want| Failure::Count { want });
    Ok(Judged { outputs, failure })
}
