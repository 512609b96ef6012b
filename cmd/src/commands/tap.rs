//! `sluice tap`: a live Kinesis stream, printed or run through a config.
//!
//! The records are read by `sluice_cmd::tap` (every shard, resharding followed, KPL
//! aggregates taken apart) and become the messages, metadata included, that the Lambda
//! Kinesis handler makes of them, so a config tried here behaves as it will when deployed.
//! Without a config each record's data is printed as it arrives, one per line. The first
//! Ctrl-C (or SIGTERM) stops reading, lets what was read through the pipeline and sends the
//! one ctrl message that flushes every batch; a second one exits at once.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::files::parse_ext_str;

/// Arguments of `sluice tap`.
#[derive(clap::Args)]
pub struct Args {
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
}

/// Runs the command.
#[cfg(not(feature = "aws"))]
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "sluice tap reads Kinesis, and this sluice was built without AWS \
         (--no-default-features); build it with the default features"
    )
}

/// Runs the command.
#[cfg(feature = "aws")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;

    use anyhow::Context as _;
    use serde_json::json;
    use sluice_cmd::tap::{self, StartAt};
    use sluice_transforms::aws::{self, AwsTarget};
    use tokio::sync::mpsc;

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

    let (name, region) = tap::stream_name_and_region(&args.stream)?;
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
        let tapping = tap::tap(client, stream, start, tx, stop_signal());
        let driving = sluice_engine::driver::drive(&pipeline, rx, |_| {});
        let (tapped, driven) = tokio::join!(tapping, driving);
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
        Ok(ExitCode::SUCCESS)
    })
}

/// Completes at the first Ctrl-C or SIGTERM; a second one ends the process at once.
#[cfg(feature = "aws")]
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // No signal handling: run until the input ends.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    tracing::info!("stopping: finishing what was read (Ctrl-C again to quit at once)");
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        std::process::exit(130);
    });
}
