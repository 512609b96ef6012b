//! `sluice tap`: a live Kinesis stream, printed or run through a config.
//!
//! The records are read by `sluice_cmd::tap` (every shard, resharding followed, KPL
//! aggregates taken apart) and become the messages, metadata included, that the Lambda
//! Kinesis handler makes of them, so a config tried here behaves as it will when deployed.
//! Without a config each record's data is printed as it arrives, one per line. The first
//! Ctrl-C (or SIGTERM) stops reading, lets what was read through the pipeline and sends the
//! one ctrl message that flushes every batch, within `--grace` (`crate::stop`), then exits
//! with 130 (143) after one line saying how many records were read and delivered and where
//! each shard would resume; a second one exits at once.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::files::parse_ext_str;

/// Arguments of `sluice tap`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The Kinesis stream: its name or ARN (an ARN also gives the region).
    #[arg(
        long,
        visible_alias = "aws-kinesis-data-stream",
        value_name = "NAME|ARN"
    )]
    stream: String,
    /// Where to start: latest (records that arrive from now on), trim-horizon (everything
    /// the stream holds; also `earliest`), or a time (RFC 3339, or seconds since the epoch).
    #[arg(
        long,
        visible_alias = "offset",
        default_value = "latest",
        value_name = "WHERE"
    )]
    from: String,
    /// A config to run the records through (.jsonnet or .json, a file or an s3:// or
    /// https:// URL). Without one, each record's data is printed as it arrives.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The config, as Substation's `tap [config]` takes it.
    #[arg(value_name = "CONFIG", conflicts_with = "config")]
    config_arg: Option<PathBuf>,
    /// A Jsonnet external string, KEY=VALUE (repeatable), read with std.extVar('KEY').
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
    /// Worker threads for stateless transforms. Default: the config's `concurrency`, else
    /// the number of cores.
    #[arg(long)]
    workers: Option<usize>,
    /// On Ctrl-C or SIGTERM: how long to finish what was read (the final flush, the lock's
    /// commits) before giving up, as for `sluice run`. The exit status is then 130 (SIGINT)
    /// or 143 (SIGTERM), after a line saying how many records were read and delivered and
    /// where each shard would resume. Lock keys not settled by then stay pending until
    /// their lease ends. A second signal exits at once.
    #[arg(long, value_name = "DURATION", default_value = crate::stop::DEFAULT_GRACE, value_parser = crate::stop::parse_grace)]
    grace: std::time::Duration,
}

/// Runs the command.
#[cfg(not(feature = "aws"))]
pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "sluice tap reads Kinesis, and this sluice was built without AWS \
         (--no-default-features); build it with the default features"
    )
}

/// Runs the command.
#[cfg(feature = "aws")]
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;

    use std::sync::Arc;

    use anyhow::Context as _;
    use serde_json::json;
    use sluice_cmd::tap::{self, Ledger, StartAt};
    use sluice_engine::driver::SettleDeadline;
    use sluice_platform::aws::{self, AwsTarget};
    use tokio::sync::mpsc;

    use crate::stop::{self, Ended, OnStop, Signal};

    let start = StartAt::parse(&args.from).map_err(|e| anyhow::anyhow!("--from: {e}"))?;
    let registry = sluice_transforms::registry();
    let config = args.config.or(args.config_arg);
    let (pipeline, concurrency, config_name) = match &config {
        Some(path) => {
            let cfg = super::load(path, &args.ext_str)?;
            let pipeline = super::build_pipeline(&registry, path, cfg.transforms())?;
            (pipeline, cfg.concurrency()?, path.display().to_string())
        }
        None => {
            // Each record printed as it arrives, not held for a batch.
            let print = json!([{"type": "send_stdout", "settings": {"batch": {"count": 1}}}]);
            let pipeline = super::build_pipeline(&registry, std::path::Path::new("<tap>"), &print)?;
            (pipeline, None, "<tap>".to_string())
        }
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers = args.workers.or(concurrency).unwrap_or(cores).max(1);
    let pipeline = pipeline.with_workers(workers);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(2))
        .enable_all()
        .build()?;

    let pipeline = std::sync::Arc::new(pipeline);
    let (name, region) = tap::stream_name_and_region(&args.stream)?;
    let grace = args.grace;
    runtime.block_on(async {
        let sdk = aws::load(&AwsTarget {
            region,
            ..AwsTarget::default()
        })
        .await;
        if sdk.region().is_none() {
            anyhow::bail!(
                "no AWS region for stream {}: set AWS_REGION or give the stream's ARN",
                args.stream
            );
        }
        let client = aws_sdk_kinesis::Client::new(&sdk);
        let stream = tap::resolve(&client, name).await?;
        if std::io::stderr().is_terminal() {
            eprintln!(
                "sluice: tapping {} from {}; Ctrl-C stops",
                stream.name, args.from
            );
        }
        let (tx, rx) = mpsc::channel(4);
        let ledger = Arc::new(Ledger::default());
        // Tap reads until the first signal (or until the driver stopped and nobody takes
        // the records).
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stop_rx.await;
        };
        let tapping = tokio::spawn(tap::tap(client, stream, start, tx, shutdown, ledger.clone()));
        let settle_by = Arc::new(SettleDeadline::default());
        let driving = {
            let (pipeline, settle_by) = (pipeline.clone(), settle_by.clone());
            tokio::spawn(async move {
                sluice_engine::driver::drive_settled_within(&pipeline, rx, None, &settle_by, |_| {})
                    .await
            })
        };
        let on_stop = OnStop {
            stop_reading: move |_| {
                let _ = stop_tx.send(());
            },
            at_once: {
                let ledger = ledger.clone();
                move |signal: Signal| {
                    let s = ledger.summary();
                    eprintln!(
                        "sluice: {} again: exiting at once, as a crash would: {}; lock keys not settled stay pending until their lease ends",
                        signal.name(),
                        records(&s)
                    );
                }
            },
            reason: |signal: Signal| {
                format!(
                    "stopped by {}, and the grace period ({}) ran out first",
                    signal.name(),
                    stop::show(grace)
                )
            },
        };
        let ended = stop::drive_until_stopped(&pipeline, driving, &settle_by, grace, on_stop).await?;
        match ended {
            Ended::Finished((driven, settled)) => {
                for line in &settled.unsettled {
                    eprintln!("sluice: {line}");
                }
                let tapped = tapping
                    .await
                    .map_err(|e| anyhow::anyhow!("tap stopped: {e}"))?;
                let run = driven.with_context(|| format!("running {config_name}"));
                let stats = tapped?;
                run?;
                if std::io::stderr().is_terminal() {
                    eprintln!(
                        "sluice: {} records, {} messages, {} shards read to their end",
                        stats.records, stats.messages, stats.shards_ended
                    );
                }
                if stats.unreadable > 0 {
                    anyhow::bail!(
                        "{} records were not processed: they are corrupt KPL aggregates (logged above)",
                        stats.unreadable
                    );
                }
                if !settled.is_settled() {
                    anyhow::bail!(
                        "the lock store kept failing: not every lock key could be settled (above)"
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            Ended::Stopped(signal, (driven, settled)) => {
                for line in &settled.unsettled {
                    eprintln!("sluice: {line}");
                }
                if let Err(e) = driven {
                    eprintln!("error: running {config_name}: {e}");
                }
                match tapping.await {
                    Ok(Ok(stats)) if stats.unreadable > 0 => eprintln!(
                        "sluice: {} records were not processed: they are corrupt KPL aggregates (logged above)",
                        stats.unreadable
                    ),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => eprintln!("error: {e}"),
                    Err(e) => eprintln!("error: tap stopped: {e}"),
                }
                eprintln!("sluice: stopped by {}: {}", signal.name(), records(&ledger.summary()));
                Ok(ExitCode::from(signal.status() as u8))
            }
            Ended::OutOfTime(signal, settled) => {
                match settled {
                    Some(s) => s.unsettled.iter().for_each(|l| eprintln!("sluice: {l}")),
                    None => eprintln!(
                        "sluice: settling the locks did not end within the grace period: keys not settled stay pending until their lease ends"
                    ),
                }
                eprintln!(
                    "sluice: stopped by {}, and the grace period ({}) ran out before the pipeline finished: {}",
                    signal.name(),
                    stop::show(grace),
                    records(&ledger.summary())
                );
                stop::exit_now(signal.status())
            }
        }
    })
}

/// `N records read, M delivered (K not, first: why); resume SHARD at sequence S, ...`
#[cfg(feature = "aws")]
fn records(s: &sluice_cmd::tap::Summary) -> String {
    let not = match &s.first_reason {
        Some(why) => format!(" ({} not, first: {why})", s.not_delivered()),
        None => String::new(),
    };
    let resume = match s.resume_positions() {
        r if r.is_empty() => String::new(),
        r => format!("; resume {r}"),
    };
    format!(
        "{} records read, {} delivered{not}{resume}",
        s.read, s.delivered
    )
}
