//! `sluice fmt`: formats Jsonnet configs as `jsonnetfmt` does, with Substation's command
//! line: the formatted text goes to standard output, or with `-w` back into each file;
//! `--check` (for CI) only says which files are not formatted.
//!
//! Files are `.jsonnet` and `.libsonnet`, named or found in directories (recursively:
//! Substation's `-R` is accepted and changes nothing). With `-w` a file is rewritten only
//! when formatting changes it, through a temporary file renamed over it, so an interrupted
//! run never leaves half a file, and each file changed (with `--check`, each that would
//! change) is printed, one per line. A file that is not Jsonnet is reported with its place
//! and the others are still formatted; the exit status is then non-zero, as it is with
//! `--check` when any file would change.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use sluice_cmd::jsonnet_fmt;

/// Arguments of `sluice fmt`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Write the formatted text back into each file that changes (and print its name)
    /// instead of printing the text.
    #[arg(short = 'w', long, conflicts_with = "check")]
    write: bool,
    /// Change nothing: print the files that are not formatted and exit non-zero if any is.
    #[arg(long)]
    check: bool,
    /// Accepted for Substation's command lines: directories are always walked recursively.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// Files or directories (walked for .jsonnet and .libsonnet files).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let files = jsonnet_files(&args.paths)?;
    let mut unformatted = 0;
    let mut broken = 0;
    let mut out = std::io::stdout().lock();
    for file in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let formatted = match jsonnet_fmt::format(&file.display().to_string(), &text) {
            Ok(f) => f,
            Err(e) => {
                broken += 1;
                eprintln!("error: {e}");
                continue;
            }
        };
        if !args.write && !args.check {
            out.write_all(formatted.as_bytes())?;
            continue;
        }
        if formatted == text {
            continue;
        }
        unformatted += 1;
        if args.write {
            write_atomically(file, &formatted)?;
        }
        writeln!(out, "{}", file.display())?;
    }
    out.flush()?;
    if broken > 0 {
        anyhow::bail!(
            "{broken} of {} files could not be formatted (not Jsonnet)",
            files.len()
        );
    }
    if args.check && unformatted > 0 {
        eprintln!(
            "sluice fmt: {unformatted} of {} files are not formatted (run sluice fmt -w to format them)",
            files.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The Jsonnet files named by `paths`: files as given, directories walked recursively (in
/// name order; see [`crate::files::walk`]).
fn jsonnet_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
        if meta.is_dir() {
            crate::files::walk(p, false, &["jsonnet", "libsonnet"], &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Replaces `path`'s contents with `text` through a temporary file in the same directory.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
