//! `sluice-lambda`: the Lambda bootstrap. See `sluice_cmd::lambda` and docs/lambda.md.

use std::process::ExitCode;

// As in the CLI: many small allocations per message, which mimalloc serves cheaper.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    sluice_cmd::lambda::main()
}
