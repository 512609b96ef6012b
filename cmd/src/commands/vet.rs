//! `sluice vet`: compile configs and build every transform and test, reporting each problem
//! with its place; non-zero exit on any problem (Substation's exits 0).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::files::{config_files, parse_ext_str};

/// Arguments of `sluice vet`.
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
    /// Files, directories, or config URLs (s3://BUCKET/KEY, https://...).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = args.recursive;
    let registry = sluice_transforms::registry();
    let files = config_files(&args.paths, args.shallow)?;
    let mut problems = 0;
    for file in &files {
        match vet_file(&registry, file, &args.ext_str) {
            Ok(true) => crate::outln!("ok\t{}", file.display())?,
            Ok(false) => crate::outln!("-\t{}\t[no transforms]", file.display())?,
            Err(e) => {
                problems += 1;
                crate::outln!("FAIL\t{}", file.display())?;
                eprintln!("{e:#}");
            }
        }
    }
    eprintln!("vet: {} files, {} with problems", files.len(), problems);
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn vet_file(
    registry: &sluice_engine::Registry,
    file: &std::path::Path,
    ext: &[(String, String)],
) -> anyhow::Result<bool> {
    let Some(cfg) = super::load_optional(file, ext)? else {
        return Ok(false);
    };
    super::build_pipeline(registry, file, cfg.transforms())?;
    cfg.concurrency()?;
    for t in cfg.tests()? {
        super::build_condition(registry, file, &t.condition, &t.condition_location())?;
        let built = registry.build_pipeline(&t.transforms, &t.transforms_location())?;
        crate::output::warnings(file, &built.warnings);
    }
    Ok(true)
}
