//! `sluice`: run, test, build and check sluice pipelines locally.
//!
//! The binary is thin: it parses arguments, loads a config (`sluice-config`), builds the
//! pipeline from the registry of every transform (`sluice-transforms`), feeds it lines from
//! stdin or files (`input`), and reports. Configs may also be read from `s3://` and
//! `https://` URLs (`sluice_config::remote`).

mod commands;
mod files;
mod input;
mod output;
mod stop;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

// A pipeline allocates and frees many small objects per message (parsed JSON keys and
// values); mimalloc does that several times cheaper than the system allocator. Blocks past
// 512 KiB (a large line, its output) go to glibc, which reuses them at once. How memory goes
// back: `main` and `sluice_cmd::memory`.
#[global_allocator]
static GLOBAL: sluice_cmd::memory::Allocator = sluice_cmd::memory::Allocator::LARGE_FROM_LIBC;

/// sluice: a streaming transform engine configured by Jsonnet (Substation-compatible).
#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "sluice: a streaming transform engine configured by Jsonnet (Substation-compatible)",
    long_about = None,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The longest one config's Jsonnet evaluation may take before it is an error (a
    /// config that computes for ever).
    #[arg(long, global = true, value_name = "DURATION", default_value = "60s", value_parser = stop::parse_grace)]
    eval_timeout: std::time::Duration,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline over stdin or files, one message per line; one ctrl message at the end.
    /// SIGINT or SIGTERM stops reading and finishes what was read within --grace.
    Run(commands::run::Args),
    /// Run the `tests` of configs and report like `go test`; non-zero exit if any fails.
    Test(commands::test::Args),
    /// Compile Jsonnet configs to JSON (`config.jsonnet` -> `config.json`).
    Build(commands::build::Args),
    /// Compile configs and build every transform; report each problem with its place.
    Vet(commands::vet::Args),
    /// Format Jsonnet configs as jsonnetfmt does: print them, or with -w rewrite them in
    /// place (--check: only report what is not formatted).
    Fmt(commands::fmt::Args),
    /// Read a live Kinesis stream (every shard, reshards followed): print its records or run
    /// them through a config. Ctrl-C (or SIGTERM) finishes what was read within --grace.
    Tap(commands::tap::Args),
    /// A local web playground: edit a config and input, run it, see each transform's
    /// output, run its tests, format it, share it as a URL.
    Play(commands::play::Args),
    /// Run a built-in pipeline (CloudTrail to ECS) over a built-in event: no network, no
    /// files. Prints the config, the input and the output.
    Demo(commands::demo::Args),
    /// Print a shell completion script: `source <(sluice completions bash)`, or save it
    /// where your shell loads completions from (zsh: a `_sluice` file on `$fpath`; fish:
    /// `~/.config/fish/completions/sluice.fish`).
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    sluice_cmd::memory::no_huge_pages();
    sluice_cmd::memory::purge_after(sluice_cmd::memory::PURGE_DELAY_MS);
    sluice_cmd::memory::tune_large_blocks();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                // The AWS credential chain logs each provider that found nothing, on every
                // call; a failed call says "no AWS credentials found" itself, once.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,aws_config=error")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: logs redirected to a file or a collector stay plain.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    sluice_config::set_eval_limit(cli.eval_timeout);
    let result = match cli.command {
        Command::Run(a) => commands::run::run(a),
        Command::Test(a) => commands::test::run(a),
        Command::Build(a) => commands::build::run(a),
        Command::Vet(a) => commands::vet::run(a),
        Command::Fmt(a) => commands::fmt::run(a),
        Command::Tap(a) => commands::tap::run(a),
        Command::Demo(a) => commands::demo::run(a),
        Command::Play(a) => commands::play::run(a),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "sluice", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
