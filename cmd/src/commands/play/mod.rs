//! `sluice play`: a local web playground. One page (`page.html`, its script and styles
//! inline, compiled into the binary) to edit a config and input lines, run them and see each
//! transform's output (the step view), run the config's `tests:`, format it, pick an example
//! and share the state as a URL.
//!
//! The server listens on 127.0.0.1:8080 unless `--addr` says otherwise, and prints its URL
//! as one line on standard output when it is listening (`--addr 127.0.0.1:0` picks a free
//! port). Anyone who can reach it can run configs, and a config can read files and call the
//! network as the user, so a non-loopback address is only used when asked for and is
//! warned about. The safety rules (no environment variables from requests, time and size
//! limits, stdout captured per run) are in [`api`]; what a run does is in [`runner`].
//!
//! HTTP is hyper 1's HTTP/1 server with hyper-util's tokio glue: hyper is already in the
//! tree as the AWS SDK's HTTP client, so the server costs its server half only, where a
//! framework would add a router and middleware stack this page of five routes does not
//! need.

mod api;
mod runner;

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use crate::files::parse_ext_str;

/// Arguments of `sluice play`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to listen, IP:PORT. Port 0 picks a free one. An address other than loopback
    /// lets anyone who reaches it run configs as you (read your files, call the network).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// A Jsonnet external string, KEY=VALUE (repeatable), for every config the page runs.
    /// Only the command line sets these; the page cannot.
    #[arg(long = "ext-str", value_name = "KEY=VALUE", value_parser = parse_ext_str)]
    ext_str: Vec<(String, String)>,
}

/// Runs the command: serves until interrupted.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
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
             who can reach it can run configs, and so read your files and call the network as \
             you. Use --addr 127.0.0.1:PORT to keep it to this machine."
        );
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "sluice play: http://{addr}/ (Ctrl-C stops it)")
            .and_then(|()| out.flush())
            .context("writing to stdout")?;
    }
    let server = Arc::new(api::Server::new(args.ext_str, addr));
    loop {
        let (stream, _) = tokio::select! {
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
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| server.clone().handle(req));
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("sluice play: connection: {e}");
            }
        });
    }
}
