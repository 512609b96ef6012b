//! `sluice run`: a pipeline over stdin or files.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde_json::json;
use sluice_engine::driver::ReadAhead;
use tokio::sync::mpsc;

use crate::files::parse_ext_str;
use crate::input::{self, LineReport, ReadOptions, Source};

/// Arguments of `sluice run`.
#[derive(clap::Args)]
pub struct Args {
    /// The config (.jsonnet, .libsonnet or .json): a file, or an s3://BUCKET/KEY or
    /// https:// URL. Without one, each line is written to stdout unchanged.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// A Jsonnet external string, KEY=VALUE (repeatable), read with std.extVar('KEY').
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
    /// Worker threads for stateless transforms. Default: the config's `concurrency`, else
    /// the number of cores.
    #[arg(long)]
    workers: Option<usize>,
    /// Messages handed to the pipeline at a time.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    batch_messages: u32,
    /// Bytes of input handed to the pipeline at a time: a batch closes at --batch-messages
    /// lines or before a line would take it past this many bytes (a longer line goes
    /// alone). A batch's parsed documents are held together, so this bounds them too.
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    batch_bytes: u64,
    /// Bytes of input read ahead: lines read and not yet through the pipeline (the batch
    /// being read, those waiting, the one in the pipeline). Reading waits at this, so memory
    /// stays bounded however long the lines; raise it to read further ahead.
    #[arg(long, default_value_t = 8 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    read_ahead_bytes: u64,
    /// The longest input line accepted, in bytes.
    #[arg(long, default_value_t = 128 * 1024 * 1024)]
    max_line_bytes: usize,
    /// Write the place (`FILE:LINE`, a tab, and why) of every input line that was not
    /// delivered to this file, one per line, for a retry of just those. Without it they
    /// are listed on standard error. Either way the exit status is non-zero when any was.
    #[arg(long, value_name = "FILE")]
    undelivered: Option<PathBuf>,
    /// Input files, read in order (gzip is detected). Standard input when none.
    files: Vec<PathBuf>,
}

/// How many undelivered lines are listed on standard error.
const LISTED: usize = 10;

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let registry = sluice_transforms::registry();
    let (pipeline, concurrency, config_name) = match &args.config {
        Some(path) => {
            let cfg = super::load(path, &args.ext_str)?;
            let pipeline = super::build_pipeline(&registry, path, cfg.transforms())?;
            (pipeline, cfg.concurrency()?, path.display().to_string())
        }
        None => {
            let default = json!([{"type": "send_stdout", "settings": {}}]);
            let pipeline = super::build_pipeline(
                &registry,
                std::path::Path::new("<default config>"),
                &default,
            )?;
            (pipeline, None, "<default config>".to_string())
        }
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers = args.workers.or(concurrency).unwrap_or(cores).max(1);
    // What comes out of the pipeline is dropped here, so a send to standard output at its
    // end may have its lines written by the workers that made them.
    let pipeline = pipeline.with_workers(workers).discarding_outputs();

    let runtime = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };

    let sources: Vec<Source> = if args.files.is_empty() {
        vec![Source::Stdin]
    } else {
        args.files.iter().cloned().map(Source::File).collect()
    };
    let opts = ReadOptions {
        batch_messages: args.batch_messages as usize,
        batch_bytes: usize::try_from(args.batch_bytes).unwrap_or(usize::MAX),
        max_line_bytes: args.max_line_bytes,
    };
    // Freed pages are kept longer while every line is small (`memory` says why).
    sluice_cmd::memory::purge_by_message_size();
    let (tx, rx) = mpsc::channel(4);
    let read_ahead = Arc::new(ReadAhead::new(
        usize::try_from(args.read_ahead_bytes).unwrap_or(usize::MAX),
    ));
    let report = Arc::new(LineReport::default());
    let lines = report.clone();
    let reading = read_ahead.clone();
    let reader = std::thread::Builder::new()
        .name("sluice-input".into())
        .spawn(move || input::read_all(&sources, opts, &lines, &reading, &tx))?;

    // The driver runs as a task of the runtime, not on this thread: waiting for the
    // workers' chunks, it gives its thread to the next task instead of sleeping and being
    // woken from another core for every batch.
    let driving = runtime.spawn(async move {
        sluice_engine::driver::drive_bounded(&pipeline, rx, Some(&read_ahead), |_| {}).await
    });
    let result = runtime
        .block_on(driving)
        .map_err(|e| anyhow::anyhow!("the pipeline's driver stopped: {e}"))?;
    let read_result = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the input thread panicked"))?;
    let undelivered = report.undelivered();
    if let Some(path) = &args.undelivered {
        write_undelivered(path, &undelivered)?;
    }
    let stats = result.with_context(|| format!("running {config_name}"))?;
    read_result?;
    if !undelivered.is_empty() {
        if args.undelivered.is_none() {
            for u in undelivered.iter().take(LISTED) {
                eprintln!(
                    "sluice: {}:{}: not delivered: {}",
                    u.source, u.line, u.reason
                );
            }
            if undelivered.len() > LISTED {
                eprintln!(
                    "sluice: ... and {} more (--undelivered FILE lists them all)",
                    undelivered.len() - LISTED
                );
            }
        }
        anyhow::bail!(
            "{} of {} input lines were not delivered{}",
            undelivered.len(),
            stats.messages_in,
            args.undelivered
                .as_ref()
                .map(|p| format!(" (listed in {})", p.display()))
                .unwrap_or_default()
        );
    }

    if std::io::stderr().is_terminal() {
        let secs = stats.elapsed.as_secs_f64();
        eprintln!(
            "sluice: {} in, {} out, {:.3} s, {:.0} messages/s",
            stats.messages_in,
            stats.messages_out,
            secs,
            if secs > 0.0 {
                stats.messages_in as f64 / secs
            } else {
                0.0
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `FILE:LINE<tab>reason` per undelivered line (an empty file when there is none).
fn write_undelivered(path: &std::path::Path, lines: &[input::Undelivered]) -> anyhow::Result<()> {
    let mut text = String::new();
    for u in lines {
        let reason = u.reason.replace(['\n', '\r', '\t'], " ");
        text.push_str(&format!("{}:{}\t{reason}\n", u.source, u.line));
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
