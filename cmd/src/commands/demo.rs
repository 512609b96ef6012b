//! `sluice demo`: a built-in pipeline over a built-in event, with no network and no files,
//! so that a first look at sluice needs nothing but the binary.
//!
//! The pipeline is `examples/demo/config.jsonnet` (compiled into the binary), which turns a
//! CloudTrail sign-in event into ECS; the event is the config's own `demo` field, the same
//! one its `tests:` use. It prints the config, the input and what the pipeline wrote, then
//! how to run the same config yourself.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use sluice_engine::Message;

/// The demo config, as `examples/demo/config.jsonnet` has it.
const CONFIG: &str = include_str!("../../../examples/demo/config.jsonnet");
/// The name it is compiled and reported under.
const NAME: &str = "examples/demo/config.jsonnet";

/// Arguments of `sluice demo`.
#[derive(clap::Args)]
pub(crate) struct Args {}

/// Runs the command.
pub(crate) fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let cfg = sluice_config::load_text(NAME, CONFIG, &[], None)?;
    let event = cfg
        .json
        .get("demo")
        .context("the demo config has no `demo` event")?;
    let input = serde_json::to_string(event)?;
    let registry = sluice_transforms::registry();
    let pipeline = super::build_pipeline(&registry, std::path::Path::new(NAME), cfg.transforms())?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "# config ({NAME})\n")?;
    writeln!(out, "{}", CONFIG.trim_end())?;
    writeln!(out, "\n# input (one line)\n")?;
    writeln!(out, "{input}")?;
    writeln!(out, "\n# output (what send_stdout wrote)\n")?;
    out.flush()?;
    drop(out);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (ran, _) = runtime.block_on(sluice_engine::driver::drive_all_within(
        &pipeline,
        vec![vec![Message::new(input.into_bytes())]],
        &sluice_engine::driver::SettleDeadline::default(),
        |_| {},
    ));
    ran?;

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n# try it yourself\n\n\
         echo '{{\"eventName\":\"ConsoleLogin\",\"eventSource\":\"signin.amazonaws.com\"}}' \
         | sluice run -c {NAME}\n\
         sluice test {NAME}"
    )?;
    Ok(ExitCode::SUCCESS)
}
