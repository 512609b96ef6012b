//! `sluice build`: compile Jsonnet configs to JSON.
//!
//! A config named by URL (`s3://`, `https://`) is compiled to standard output, as with
//! `--stdout`: there is no place next to it to write a `.json` file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::files::{config_files, parse_ext_str};

/// Arguments of `sluice build`.
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
    /// Let a config read from a URL import from anywhere sluice can read (another host,
    /// s3://, gs://, loopback): by default it imports only from under its own directory.
    #[arg(long)]
    allow_remote_imports: bool,
    /// Print the compiled JSON to stdout instead of writing `.json` files.
    #[arg(long)]
    stdout: bool,
    /// Files, directories, or config URLs (s3://BUCKET/KEY, https://...).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    sluice_config::remote::allow_imports(args.allow_remote_imports);
    let _ = args.recursive;
    let files: Vec<PathBuf> = config_files(&args.paths, args.shallow)?
        .into_iter()
        .filter(|p| super::url_of(p).is_some() || p.extension().is_some_and(|e| e != "json"))
        .collect();
    let mut failed = 0;
    for file in &files {
        let url = super::url_of(file);
        let compiled = match url {
            Some(url) => sluice_config::remote::compile_to_string(url, &args.ext_str, true)
                .map_err(anyhow::Error::from),
            None => sluice_config::compile_to_string(file, &args.ext_str, true).map_err(Into::into),
        };
        match compiled {
            Ok(json) => {
                if args.stdout || url.is_some() {
                    crate::outln!("{json}")?;
                } else {
                    let out = file.with_extension("json");
                    std::fs::write(&out, format!("{json}\n"))
                        .with_context(|| format!("writing {}", out.display()))?;
                    crate::outln!("{}", out.display())?;
                }
            }
            Err(e) => {
                eprintln!("{e}");
                failed += 1;
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
