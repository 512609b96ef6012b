//! `sluice vet`: compile configs and build every transform and test, reporting each problem
//! with its place; non-zero exit on any problem (Substation's exits 0). Warnings (unknown
//! settings, a lock whose duplicates continue into a send after it:
//! `sluice_config::lock_lint`) are printed and do not fail it.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::files::{config_files, parse_ext_str};

/// Arguments of `sluice vet`.
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
    /// Files, directories, or config URLs (s3://BUCKET/KEY, https://...).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    sluice_config::remote::allow_imports(args.allow_remote_imports);
    let _ = args.recursive;
    let registry = sluice_transforms::registry();
    let files = config_files(&args.paths, args.shallow)?;
    let mut with_problems = 0;
    for file in &files {
        match vet_file(&registry, file, &args.ext_str) {
            Vetted::Ok => crate::outln!("ok\t{}", file.display())?,
            Vetted::NoTransforms => crate::outln!("-\t{}\t[no transforms]", file.display())?,
            Vetted::Problems(problems) => {
                with_problems += 1;
                crate::outln!("FAIL\t{}", file.display())?;
                for e in problems {
                    eprintln!("{e:#}");
                }
            }
        }
    }
    eprintln!(
        "vet: {} files, {} with problems",
        files.len(),
        with_problems
    );
    Ok(if with_problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What vetting one file found.
enum Vetted {
    Ok,
    /// A library or data file: nothing to build.
    NoTransforms,
    /// Every problem found, each with its place.
    Problems(Vec<anyhow::Error>),
}

/// Compiles `file` and builds each of its transforms and each test's transforms and
/// condition on its own, so that every problem is reported, not only the first. A problem
/// inside a meta transform's inner list is reported as the first problem of that transform.
fn vet_file(
    registry: &sluice_engine::Registry,
    file: &std::path::Path,
    ext: &[(String, String)],
) -> Vetted {
    let cfg = match super::load_optional(file, ext) {
        Ok(Some(cfg)) => cfg,
        Ok(None) => return Vetted::NoTransforms,
        Err(e) => return Vetted::Problems(vec![e]),
    };
    let mut problems = Vec::new();
    let at_file =
        |e: sluice_engine::ConfigError| anyhow::Error::new(e).context(file.display().to_string());
    let build_each = |list: &serde_json::Value,
                      location: &str,
                      problems: &mut Vec<anyhow::Error>| match list.as_array()
    {
        Some(items) => {
            for (i, item) in items.iter().enumerate() {
                match registry.build_transform(item, &format!("{location}[{i}]")) {
                    Ok(built) => crate::output::warnings(file, &built.warnings),
                    Err(e) => problems.push(at_file(e)),
                }
            }
        }
        None => match registry.build_pipeline(list, location) {
            Ok(built) => crate::output::warnings(file, &built.warnings),
            Err(e) => problems.push(at_file(e)),
        },
    };
    build_each(cfg.transforms(), "transforms", &mut problems);
    crate::output::warnings(
        file,
        &sluice_config::lock_lint::warnings(cfg.transforms(), "transforms"),
    );
    if let Err(e) = cfg.concurrency() {
        problems.push(e.into());
    }
    match cfg.tests() {
        Ok(tests) => {
            for t in tests {
                match registry.build_condition(&t.condition, &t.condition_location()) {
                    Ok(built) => crate::output::warnings(file, &built.warnings),
                    Err(e) => problems.push(at_file(e)),
                }
                build_each(&t.transforms, &t.transforms_location(), &mut problems);
            }
        }
        Err(e) => problems.push(e.into()),
    }
    if problems.is_empty() {
        Vetted::Ok
    } else {
        Vetted::Problems(problems)
    }
}
