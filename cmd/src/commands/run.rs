//! `sluice run`: a pipeline over stdin or files.
//!
//! Lines are read on a thread of their own (`input`), driven through the pipeline by the
//! engine's driver, and reported at the end: the lines not delivered, the locks that could
//! not settle. SIGINT and SIGTERM stop it within `--grace` (`stop`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use sluice_engine::driver::{ReadAhead, RunStats, SettleDeadline};
use sluice_engine::{SettleReport, TransformError};
use tokio::sync::mpsc;

use crate::files::parse_ext_str;
use crate::input::{self, InputError, LineReport, ReadOptions, Source, StopReading};
use crate::stop::{self, Ended, OnStop, Signal};

/// Arguments of `sluice run`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The config (.jsonnet, .libsonnet or .json): a file, or an s3://BUCKET/KEY or
    /// https:// URL. Without one, each line is written to stdout unchanged.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// A Jsonnet external string, KEY=VALUE (repeatable), read with std.extVar('KEY').
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
    /// Let a config read from a URL import, and read kv store files, from anywhere sluice
    /// can read (another host, s3://, gs://, loopback, local files): by default it reads
    /// only from under its own directory.
    #[arg(long)]
    allow_remote_imports: bool,
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
    /// Stop at the first line a transform fails (Substation's behaviour): the lines after
    /// it are not processed. Without it, a line that fails (not JSON where a key is set, a
    /// bad value) fails alone, is named at the end (`FILE:LINE: not delivered: why`) and
    /// the others go on; the exit status is non-zero all the same.
    #[arg(long)]
    fail_fast: bool,
    /// Streaming: once the oldest line read from a pipe or terminal has waited this long
    /// and no more input is ready, hand what was read to the pipeline and checkpoint (every
    /// send writes what it holds, locks commit), as at the end of input. A line of
    /// `tail -f app.log | sluice run` is out within about this time; a producer that never
    /// pauses still fills whole batches; one that trickles gets a checkpoint about this
    /// often (raise it for sends that should write large objects). `0s`: as soon as no
    /// more is ready; `off`: only full batches and the end. Files and compressed streams
    /// are read in whole batches. A duration: 500ms, 2s.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_flush_idle)]
    flush_idle: FlushIdle,
    /// On SIGTERM or SIGINT: how long to finish what was read (the final flush, the
    /// lock's commits) before giving up. Reading stops at the signal; the exit status is
    /// then 143 (SIGTERM) or 130 (SIGINT), and standard error says how many lines were read
    /// and delivered and the first line not read. What is still held when it runs out is
    /// failed and listed as not delivered, and lock keys not settled by then stay pending
    /// until their lease ends (the lock's `lease`, 1m by default), as after a crash. Keep it
    /// under the time your supervisor waits before SIGKILL (Kubernetes, ECS: 30s). A second
    /// signal exits at once.
    #[arg(long, value_name = "DURATION", default_value = stop::DEFAULT_GRACE, value_parser = stop::parse_grace)]
    grace: Duration,
    /// Input files, read in order (compression is detected), or objects at URLs
    /// (s3://BUCKET/KEY, gs://BUCKET/OBJECT, https://...). Standard input when none.
    files: Vec<PathBuf>,
}

/// `--flush-idle`: `None` for `off`.
#[derive(Debug, Clone, Copy)]
struct FlushIdle(Option<Duration>);

fn parse_flush_idle(s: &str) -> Result<FlushIdle, String> {
    if s == "off" {
        return Ok(FlushIdle(None));
    }
    sluice_engine::settings::parse_go_duration(s.trim())
        .map(|d| FlushIdle(Some(d)))
        .map_err(|e| format!("{e} (or `off`)"))
}

/// How many undelivered lines are listed on standard error.
const LISTED: usize = 10;

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    sluice_config::remote::allow_imports(args.allow_remote_imports);
    let registry = sluice_transforms::registry();
    let (pipeline, concurrency, config_name) = match &args.config {
        Some(path) => {
            let cfg = super::load(path, &args.ext_str)?;
            let ctx = if args.fail_fast {
                sluice_engine::Context::new()
            } else {
                Arc::new(sluice_engine::Context::default().with_messages_failing_alone())
            };
            let pipeline = super::build_pipeline_in(&ctx, &registry, path, cfg.transforms())?;
            (pipeline, cfg.concurrency()?, path.display().to_string())
        }
        None => {
            // Every line passes, however long (up to --max-line-bytes): the send's batch
            // holds at least one.
            let default = json!([{"type": "send_stdout", "settings": {
                "batch": {"size": args.max_line_bytes.max(1)}
            }}]);
            let pipeline =
                super::build_pipeline(&registry, Path::new("<default config>"), &default)?;
            (pipeline, None, "<default config>".to_string())
        }
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers = args.workers.or(concurrency).unwrap_or(cores).max(1);
    // What comes out of the pipeline is dropped here, so a send to standard output at its
    // end may have its lines written by the workers that made them.
    // A line that a transform fails fails alone (named at the end), unless --fail-fast.
    let pipeline = if args.fail_fast {
        pipeline
    } else {
        pipeline.failing_messages_alone()
    };
    let pipeline = Arc::new(pipeline.with_workers(workers).discarding_outputs());

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
        args.files.iter().cloned().map(Source::of_arg).collect()
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
    let stop_reading = StopReading::new(read_ahead.clone(), args.flush_idle.0)
        .context("making the pipe that stops the input")?;
    let report = Arc::new(LineReport::default());
    let reader = {
        let (report, read_ahead, stop_reading) =
            (report.clone(), read_ahead.clone(), stop_reading.clone());
        std::thread::Builder::new()
            .name("sluice-input".into())
            .spawn(move || {
                input::read_all(&sources, opts, &report, &read_ahead, &stop_reading, &tx)
            })?
    };

    // The driver runs as a task of the runtime, not on this thread: waiting for the
    // workers' chunks, it gives its thread to the next task instead of sleeping and being
    // woken from another core for every batch.
    let settle_by = Arc::new(SettleDeadline::default());
    let driving = {
        let (pipeline, settle_by) = (pipeline.clone(), settle_by.clone());
        runtime.spawn(async move {
            sluice_engine::driver::drive_settled_within(
                &pipeline,
                rx,
                Some(&read_ahead),
                &settle_by,
                |_| {},
            )
            .await
        })
    };
    let grace = args.grace;
    let on_stop = OnStop {
        stop_reading: |_| stop_reading.request(),
        at_once: {
            let (report, path) = (report.clone(), args.undelivered.clone());
            move |signal: Signal| exiting_at_once(signal, &report, path.as_deref())
        },
        reason: |signal: Signal| {
            format!(
                "stopped by {}, and the grace period ({}) ran out first",
                signal.name(),
                stop::show(grace)
            )
        },
    };
    let ended = runtime.block_on(stop::drive_until_stopped(
        &pipeline, driving, &settle_by, grace, on_stop,
    ))?;
    let run = Run {
        args: &args,
        config_name: &config_name,
        report: &report,
    };
    match ended {
        Ended::Finished((result, settled)) => {
            // After a pipeline error the reader may still wait for input (an idle pipe):
            // it stops now, naming what it had read as not processed.
            stop_reading.request();
            let read = reader
                .join()
                .map_err(|_| anyhow::anyhow!("the input thread panicked"))?;
            run.finished(result, read, &settled)
        }
        Ended::Stopped(signal, (result, settled)) => {
            let read = reader
                .join()
                .map_err(|_| anyhow::anyhow!("the input thread panicked"))?;
            if let Err(e) = run.stopped(signal, Some((result, read)), Some(&settled), None) {
                eprintln!("error: {e:#}");
            }
            Ok(ExitCode::from(signal.status() as u8))
        }
        Ended::OutOfTime(signal, settled) => {
            // The reader may wait on a pipeline that no longer takes anything, and the
            // driver may be in a call: neither is waited for (see `stop::exit_now`).
            let open = format!(
                "still in the pipeline when the grace period ({}) after {} ran out: it may have been delivered",
                stop::show(grace),
                signal.name()
            );
            if let Err(e) = run.stopped(signal, None, settled.as_ref(), Some(&open)) {
                eprintln!("error: {e:#}");
            }
            stop::exit_now(signal.status())
        }
    }
}

/// What the end of a run reports from.
struct Run<'a> {
    args: &'a Args,
    config_name: &'a str,
    report: &'a LineReport,
}

impl Run<'_> {
    /// The input ended and the pipeline finished: the undelivered lines, the locks that
    /// could not settle, the summary.
    fn finished(
        &self,
        result: Result<RunStats, TransformError>,
        read: Result<(), InputError>,
        settled: &SettleReport,
    ) -> anyhow::Result<ExitCode> {
        let args = self.args;
        let undelivered = self.report.undelivered();
        if let Some(path) = &args.undelivered {
            write_undelivered(path, &undelivered)?;
        }
        for line in &settled.unsettled {
            eprintln!("sluice: {line}");
        }
        let stats = result.with_context(|| format!("running {}", self.config_name))?;
        read?;
        if !undelivered.is_empty() {
            self.list(&undelivered);
            anyhow::bail!(
                "{} of {} input lines were not delivered{}",
                undelivered.len(),
                stats.messages_in,
                self.listed_in()
            );
        }
        if !settled.is_settled() {
            anyhow::bail!(
                "all {} input lines were delivered, but the lock store kept failing: not every lock key could be settled (above)",
                stats.messages_in
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

    /// A signal stopped the run: what it says on standard error (the pipeline's and the
    /// input's errors, the locks not settled, the undelivered lines) and in
    /// `--undelivered`, ending with one line naming the signal, the lines read and
    /// delivered, and the first line not read. `finished` is the driver's and the reader's
    /// results when they finished within the grace period; `open` is why the lines still
    /// in the pipeline (when they did not) were not delivered.
    fn stopped(
        &self,
        signal: Signal,
        finished: Option<(Result<RunStats, TransformError>, Result<(), InputError>)>,
        settled: Option<&SettleReport>,
        open: Option<&str>,
    ) -> anyhow::Result<()> {
        if let Some((result, read)) = finished {
            if let Err(e) = result {
                eprintln!("error: running {}: {e}", self.config_name);
            }
            if let Err(e) = read {
                eprintln!("error: {e}");
            }
        }
        match settled {
            Some(s) => {
                for line in &s.unsettled {
                    eprintln!("sluice: {line}");
                }
            }
            None => eprintln!(
                "sluice: settling the locks did not end within the grace period: keys not settled stay pending until their lease ends"
            ),
        }
        let undelivered = match open {
            Some(why) => self.report.undelivered_or_open(why),
            None => self.report.undelivered(),
        };
        let written = match &self.args.undelivered {
            Some(path) => write_undelivered(path, &undelivered),
            None => Ok(()),
        };
        self.list(&undelivered);
        let read = self.report.read();
        let not = if undelivered.is_empty() {
            String::new()
        } else {
            format!(
                " ({} not{})",
                undelivered.len(),
                match &self.args.undelivered {
                    Some(p) => format!(": listed in {}", p.display()),
                    None => ", listed above".into(),
                }
            )
        };
        let out_of_time = if open.is_some() {
            format!(
                ", and the grace period ({}) ran out before the pipeline finished",
                stop::show(self.args.grace)
            )
        } else {
            String::new()
        };
        eprintln!(
            "sluice: stopped by {}{out_of_time}: {read} lines read, {} delivered{not}; {}",
            signal.name(),
            read.saturating_sub(undelivered.len() as u64),
            self.where_reading_stopped()
        );
        written
    }

    /// The first line not read, or that all was.
    fn where_reading_stopped(&self) -> String {
        match self.report.next_unread() {
            Some((source, line)) if self.args.files.len() > 1 => {
                format!("the first line not read: {source}:{line} (and the files after it)")
            }
            Some((source, line)) => format!("the first line not read: {source}:{line}"),
            None => "all input was read".into(),
        }
    }

    /// Lists the first undelivered lines on standard error, unless `--undelivered` takes
    /// them.
    fn list(&self, undelivered: &[input::Undelivered]) {
        if self.args.undelivered.is_some() {
            return;
        }
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

    /// ` (listed in FILE)` with `--undelivered`.
    fn listed_in(&self) -> String {
        self.args
            .undelivered
            .as_ref()
            .map(|p| format!(" (listed in {})", p.display()))
            .unwrap_or_default()
    }
}

/// A second signal: the process exits at once (a crash on purpose). What is still in the
/// pipeline is listed as not known to be delivered, and one line says so.
fn exiting_at_once(signal: Signal, report: &LineReport, undelivered: Option<&Path>) {
    let why = format!(
        "still in the pipeline when a second signal ({}) ended the run at once: it may have been delivered",
        signal.name()
    );
    let lines = report.undelivered_or_open(&why);
    let listed = match undelivered.map(|p| (p, write_undelivered(p, &lines))) {
        Some((p, Ok(()))) => format!(" ({} listed in {})", lines.len(), p.display()),
        Some((_, Err(e))) => format!(" ({e:#})"),
        None => String::new(),
    };
    let next = match report.next_unread() {
        Some((source, line)) => format!("the first line not read: {source}:{line}"),
        None => "all input was read".into(),
    };
    eprintln!(
        "sluice: {} again: exiting at once, as a crash would: {} lines read, {} not known to be delivered{listed}; lock keys not settled stay pending until their lease ends; {next}",
        signal.name(),
        report.read(),
        lines.len(),
    );
}

/// Writes `FILE:LINE<tab>reason` per undelivered line (an empty file when there is none).
fn write_undelivered(path: &Path, lines: &[input::Undelivered]) -> anyhow::Result<()> {
    let mut text = String::new();
    for u in lines {
        let reason = u.reason.replace(['\n', '\r', '\t'], " ");
        text.push_str(&format!("{}:{}\t{reason}\n", u.source, u.line));
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
