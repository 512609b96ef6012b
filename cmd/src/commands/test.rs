//! `sluice test`: run the `tests` a config carries.
//!
//! For each test, as Substation does: the test's own transforms get one ctrl message (so
//! `test_message` transforms emit their messages in order, then the ctrl); a fresh instance
//! of the config's pipeline gets all of that in one batch (so batches flush at the ctrl);
//! the condition must hold for every data message that comes out. Unlike Substation, a
//! failing or erroring test makes the exit status non-zero, so CI can rely on it; a test
//! may also say how many messages must come out (`outputs: N`, which Substation ignores),
//! and every test gets fresh kv stores in a temporary directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use sluice_engine::{Context, Message, Registry};

use crate::files::{config_files, parse_ext_str};

/// Arguments of `sluice test`.
#[derive(clap::Args)]
pub struct Args {
    /// Only the files directly in the named directories, not their subdirectories.
    #[arg(long)]
    shallow: bool,
    /// Accepted for Substation compatibility; directories are walked recursively anyway.
    #[arg(short = 'R', long, hide = true)]
    recursive: bool,
    /// A Jsonnet external string, KEY=VALUE (repeatable).
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
    /// Print every test's name and result, not only failures.
    #[arg(short, long)]
    verbose: bool,
    /// Files, directories, or config URLs (s3://BUCKET/KEY, https://...).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    errored_files: usize,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = args.recursive;
    let registry = sluice_transforms::registry();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let files = config_files(&args.paths, args.shallow)?;
    let mut tally = Tally::default();
    for file in &files {
        let start = Instant::now();
        match test_file(&registry, &runtime, file, &args, &mut tally) {
            Ok(FileResult::NoTransforms) => {}
            Ok(FileResult::NoTests) => crate::outln!("?\t{}\t[no tests]", file.display())?,
            Ok(FileResult::Ran { failures }) => {
                let secs = start.elapsed().as_secs_f64();
                if failures == 0 {
                    crate::outln!("ok\t{}\t{secs:.3}s", file.display())?;
                } else {
                    crate::outln!("FAIL\t{}\t{secs:.3}s", file.display())?;
                }
            }
            Err(e) => {
                tally.errored_files += 1;
                eprintln!("{e:#}");
                crate::outln!("?\t{}\t[error]", file.display())?;
            }
        }
    }
    let failed = tally.failed + tally.errored_files;
    crate::outln!("{} passed, {} failed", tally.passed, failed)?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

enum FileResult {
    NoTransforms,
    NoTests,
    Ran { failures: usize },
}

fn test_file(
    registry: &Registry,
    rt: &tokio::runtime::Runtime,
    file: &Path,
    args: &Args,
    tally: &mut Tally,
) -> anyhow::Result<FileResult> {
    let Some(cfg) = super::load_optional(file, &args.ext_str)? else {
        return Ok(FileResult::NoTransforms);
    };
    let tests = cfg.tests()?;
    if tests.is_empty() {
        // As Substation's `test` does, a config without tests is not built: its sends may
        // need secrets or endpoints the test machine does not have (`sluice vet` checks
        // that a config builds).
        return Ok(FileResult::NoTests);
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
    let mut failures = 0;
    for t in &tests {
        match run_case(registry, rt, file, cfg.transforms(), t) {
            Ok(Outcome::Pass { outputs }) => {
                tally.passed += 1;
                if args.verbose {
                    crate::outln!("--- PASS: {} ({outputs} outputs)", t.name)?;
                }
            }
            Ok(Outcome::Fail { message, condition }) => {
                tally.failed += 1;
                failures += 1;
                crate::outln!("--- FAIL: {}", t.name)?;
                crate::outln!("    message:   {message}")?;
                crate::outln!("    condition: {condition}")?;
            }
            Err(e) => {
                tally.failed += 1;
                failures += 1;
                crate::outln!("--- FAIL: {}", t.name)?;
                crate::outln!("    error: {e:#}")?;
            }
        }
    }
    Ok(FileResult::Ran { failures })
}

enum Outcome {
    Pass { outputs: usize },
    Fail { message: String, condition: String },
}

fn run_case(
    registry: &Registry,
    rt: &tokio::runtime::Runtime,
    file: &Path,
    transforms: &serde_json::Value,
    t: &sluice_config::TestCase,
) -> anyhow::Result<Outcome> {
    // A fresh context per test, with its state files in a temporary directory: no kv
    // store (locks included) is shared between tests, or with real runs; the test's own
    // transforms and the config's share it, as they would share a store in one process.
    let state = tempfile::tempdir().context("creating the test's state directory")?;
    let ctx = Context::in_dir(state.path());
    let condition = super::build_condition(registry, file, &t.condition, &t.condition_location())?;
    let setup = registry
        .build_pipeline_in(&ctx, &t.transforms, &t.transforms_location())
        .with_context(|| format!("{}", file.display()))?;
    crate::output::warnings(file, &setup.warnings);
    let seeds = rt
        .block_on(setup.value.apply(vec![Message::ctrl()]))
        .context("running the test's transforms")?;
    let pipeline = super::build_pipeline_in(&ctx, registry, file, transforms)?;
    let out = rt
        .block_on(pipeline.apply(seeds))
        .context("running the config's transforms")?;
    let mut outputs = 0;
    for m in out.iter().filter(|m| !m.is_ctrl()) {
        outputs += 1;
        if !condition.test(m).context("evaluating the condition")? {
            return Ok(Outcome::Fail {
                message: String::from_utf8_lossy(m.data()).into_owned(),
                condition: serde_json::to_string(&t.condition).unwrap_or_default(),
            });
        }
    }
    if let Some(want) = t.outputs
        && want != outputs
    {
        return Ok(Outcome::Fail {
            message: format!("{outputs} output message(s)"),
            condition: format!("outputs: {want}"),
        });
    }
    Ok(Outcome::Pass { outputs })
}
