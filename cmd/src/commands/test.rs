//! `sluice test`: run the `tests` a config carries.
//!
//! For each test, as Substation does: the test's own transforms get one ctrl message (so
//! `test_message` transforms emit their messages in order, then the ctrl); a fresh instance
//! of the config's pipeline gets all of that in one batch (so batches flush at the ctrl);
//! the condition must hold for every data message that comes out. Unlike Substation, a
//! failing or erroring test makes the exit status non-zero, so CI can rely on it; a test
//! may also say how many messages must come out (`outputs: N`, which Substation ignores),
//! and every test gets fresh kv stores in a temporary directory.
//!
//! A config that calls AWS (an `*_aws_*` transform, the `aws_dynamodb` kv store, the
//! `aws_secrets_manager` secret) is skipped, with the reason, when nothing tells the AWS SDK
//! where to go: no credentials, profile or endpoint in the environment and no `~/.aws`
//! files. Run there, its tests would fail after the SDK had waited for instance metadata
//! (`AWS_EC2_METADATA_DISABLED=false` says to use it).

use std::collections::HashMap;
use std::ffi::OsString;
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
    skipped_files: usize,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = args.recursive;
    let registry = sluice_transforms::registry();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let files = config_files(&args.paths, args.shallow)?;
    let env: HashMap<String, OsString> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .collect();
    let aws_ready = aws_configured(&env);
    let mut tally = Tally::default();
    for file in &files {
        let start = Instant::now();
        match test_file(&registry, &runtime, file, &args, aws_ready, &mut tally) {
            Ok(FileResult::NoTransforms) => {}
            Ok(FileResult::NoTests) => crate::outln!("?\t{}\t[no tests]", file.display())?,
            Ok(FileResult::Skipped(why)) => {
                tally.skipped_files += 1;
                crate::outln!("?\t{}\t[skipped: {why}]", file.display())?
            }
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
    if tally.skipped_files > 0 {
        crate::outln!(
            "{} passed, {} failed, {} files skipped",
            tally.passed,
            failed,
            tally.skipped_files
        )?;
    } else {
        crate::outln!("{} passed, {} failed", tally.passed, failed)?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

enum FileResult {
    NoTransforms,
    NoTests,
    /// Not run, and why (the config calls AWS and nothing says where AWS is).
    Skipped(String),
    Ran {
        failures: usize,
    },
}

fn test_file(
    registry: &Registry,
    rt: &tokio::runtime::Runtime,
    file: &Path,
    args: &Args,
    aws_ready: bool,
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
    if !aws_ready && let Some(services) = aws_types(&cfg.json) {
        return Ok(FileResult::Skipped(format!(
            "calls AWS ({services}) and no AWS credentials, profile or endpoint is configured; \
             set them (AWS_ENDPOINT_URL for local emulators: scripts/emulators.sh starts them)"
        )));
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

/// The AWS-backed types a compiled config uses (transforms, kv stores, secrets; in its
/// tests too), joined with `, `; `None` when it uses none.
fn aws_types(config: &serde_json::Value) -> Option<String> {
    fn walk(v: &serde_json::Value, found: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(t) = m.get("type").and_then(|t| t.as_str())
                    && sluice_transforms::calls_aws(t)
                {
                    found.insert(t.to_string());
                }
                m.values().for_each(|x| walk(x, found));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, found)),
            _ => {}
        }
    }
    let mut found = std::collections::BTreeSet::new();
    walk(config, &mut found);
    (!found.is_empty()).then(|| found.into_iter().collect::<Vec<_>>().join(", "))
}

/// Whether anything in `env` tells the AWS SDK where AWS is: credentials, a profile, a web
/// identity or container credentials, an endpoint (`AWS_ENDPOINT_URL` or a per-service
/// `AWS_ENDPOINT_URL_*`), shared config files, or an explicit `AWS_EC2_METADATA_DISABLED=false`
/// (use instance metadata).
fn aws_configured(env: &HashMap<String, OsString>) -> bool {
    const VARS: &[&str] = &[
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ];
    let set = |k: &str| env.get(k).is_some_and(|v| !v.is_empty());
    if VARS.iter().any(|k| set(k))
        || env
            .iter()
            .any(|(k, v)| k.starts_with("AWS_ENDPOINT_URL") && !v.is_empty())
        || env
            .get("AWS_EC2_METADATA_DISABLED")
            .is_some_and(|v| v.eq_ignore_ascii_case("false"))
    {
        return true;
    }
    let file_var = |k: &str| env.get(k).is_some_and(|p| Path::new(p).is_file());
    let home_file = |name: &str| {
        env.get("HOME")
            .is_some_and(|h| Path::new(h).join(".aws").join(name).is_file())
    };
    file_var("AWS_SHARED_CREDENTIALS_FILE")
        || file_var("AWS_CONFIG_FILE")
        || home_file("credentials")
        || home_file("config")
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configs_that_call_aws_are_found() {
        let cfg = json!({
            "transforms": [
                {"type": "meta_switch", "settings": {"cases": [{"transforms": [
                    {"type": "send_aws_kinesis_data_stream", "settings": {}}
                ]}]}},
                {"type": "meta_kv_store_lock", "settings": {"kv_store": {"type": "aws_dynamodb"}}},
                {"type": "utility_metric_count", "settings": {"metric": {"destination": {"type": "aws_cloudwatch_embedded_metrics"}}}},
            ],
            "tests": [{"transforms": [{"type": "enrich_aws_lambda"}]}],
        });
        assert_eq!(
            aws_types(&cfg).as_deref(),
            Some("aws_dynamodb, enrich_aws_lambda, send_aws_kinesis_data_stream")
        );
        let local = json!({"transforms": [{"type": "send_stdout"}, {"type": "utility_metric_count", "settings": {"metric": {"destination": {"type": "aws_cloudwatch_embedded_metrics"}}}}]});
        assert_eq!(aws_types(&local), None, "EMF lines go to stdout, not AWS");
    }

    #[test]
    fn what_counts_as_aws_being_configured() {
        let env = |pairs: &[(&str, &str)]| -> HashMap<String, OsString> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), OsString::from(v)))
                .collect()
        };
        assert!(!aws_configured(&env(&[])));
        assert!(!aws_configured(&env(&[
            ("HOME", "/nonexistent"),
            ("AWS_REGION", "us-east-1")
        ])));
        assert!(!aws_configured(&env(&[("AWS_ACCESS_KEY_ID", "")])));
        assert!(!aws_configured(&env(&[("AWS_CONFIG_FILE", "/dev/null")])));
        assert!(!aws_configured(&env(&[(
            "AWS_EC2_METADATA_DISABLED",
            "true"
        )])));
        for yes in [
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("AWS_PROFILE", "dev"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
            ("AWS_ENDPOINT_URL_KINESIS", "http://127.0.0.1:4566"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_EC2_METADATA_DISABLED", "false"),
        ] {
            assert!(aws_configured(&env(&[yes])), "{yes:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(dir.path().join(".aws/credentials"), "[default]\n").unwrap();
        let home = dir.path().to_str().unwrap();
        assert!(aws_configured(&env(&[("HOME", home)])));
    }
}
