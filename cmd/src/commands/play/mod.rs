//! `sluice play`: a local web playground. One page (`page.html`, its script and styles
//! inline, compiled into the binary) to edit a config and input lines, run them and see each
//! transform's output (the step view), run the config's `tests:`, format it, pick an example
//! and share the state as a URL.
//!
//! The server listens on 127.0.0.1:8080 unless `--addr` says otherwise, and prints its URL
//! as one line on standard output when it is listening (`--addr 127.0.0.1:0` picks a free
//! port). The URL carries a per-process token (`http://127.0.0.1:PORT/?token=…`, as
//! Jupyter's does): without it nothing, not even the page, is served, so another local
//! user or a page of another origin cannot drive it. A config it runs reaches no
//! environment variable, file or network unless the user allows it with `--allow-env`,
//! `--allow-files` or `--allow-network` ([`trust`]). The request checks are in
//! [`sluice_cmd::play_guard`], the routes in [`api`], the worker processes that do the
//! runs in [`worker`], what a run does in [`runner`]. docs/security.md has the threat
//! model.
//!
//! Connections: at most [`MAX_CONNECTIONS`] at once (more are answered 503 and closed), and
//! a request's headers must arrive within [`HEADER_TIME`], so half-sent requests cannot
//! hold the server's sockets.
//!
//! HTTP is hyper 1's HTTP/1 server with hyper-util's tokio glue: hyper is already in the
//! tree as the AWS SDK's HTTP client, so the server costs its server half only, where a
//! framework would add a router and middleware stack this page of a few routes does not
//! need.

mod api;
mod diff;
mod runner;
mod trust;
mod worker;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use sluice_cmd::play_guard::{self, Guard};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::Semaphore;

use self::trust::Trust;

use crate::files::parse_ext_str;

/// Arguments of `sluice play`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Where to listen, IP:PORT. Port 0 picks a free one. An address other than loopback
    /// lets anyone who reaches it and has the token (in the printed URL) run configs.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// A Jsonnet external string, KEY=VALUE (repeatable), for every config the page runs.
    /// Only the command line sets these; the page cannot.
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
    /// Let configs read environment variables (`environment_variable` secrets, jq's
    /// `env`). Off: a run's process has an empty environment. The page shows it.
    #[arg(long)]
    allow_env: bool,
    /// Let configs read and write files (`send_file`; the kv stores that keep or read
    /// files: sqlite and the file stores). The page shows it.
    #[arg(long)]
    allow_files: bool,
    /// Let configs call the network (the AWS, GCP and HTTP sends and enrichments, the
    /// aws_dynamodb kv store, aws_secrets_manager secrets). AWS credentials from the
    /// environment also need --allow-env. The page shows it.
    #[arg(long)]
    allow_network: bool,
    /// Internal: do one run handed over on standard input (the server starts itself this
    /// way for each run, so that a run past its time limit can be killed).
    #[arg(long, hide = true)]
    worker: bool,
}

/// Connections served at once.
const MAX_CONNECTIONS: usize = 64;
/// How long a request's headers may take to arrive.
const HEADER_TIME: Duration = Duration::from_secs(10);

/// Runs the command: serves until interrupted.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.worker {
        return worker::serve_one();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(args))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "sluice play: warning: listening on {addr}, which is not a loopback address: anyone \
             who can reach it and learns the token in its URL (which travels unencrypted over \
             plain HTTP) can run configs as you. Use --addr 127.0.0.1:PORT to keep it to this \
             machine."
        );
    }
    let token = play_guard::new_token().context("making the playground's token")?;
    let trust = Trust {
        env: args.allow_env,
        files: args.allow_files,
        network: args.allow_network,
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "sluice play: http://{addr}/?token={token} (Ctrl-C stops it)"
        )
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    }
    if !trust.flags().is_empty() {
        eprintln!(
            "sluice play: configs run here may use what {} allows",
            trust.flags().join(", ")
        );
    }
    let guard = Guard::new(addr.ip(), addr.port(), token);
    let server = Arc::new(api::Server::new(args.ext_str, trust, guard));
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (mut stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: the next accept may succeed.
                    tracing::warn!("sluice play: accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Ok(slot) = connections.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                // Best effort: the connection is closed either way.
                let _ = stream.write_all(BUSY).await;
                let _ = stream.shutdown().await;
            });
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| server.clone().handle(req));
            if let Err(e) = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIME)
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("sluice play: connection: {e}");
            }
            drop(slot);
        });
    }
}

/// The answer to a connection over [`MAX_CONNECTIONS`].
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
connection: close\r\ncontent-length: 77\r\n\r\n\
{\"error\":\"sluice play is serving as many connections as it takes; try again\"}";
