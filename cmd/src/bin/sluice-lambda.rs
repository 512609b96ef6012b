//! `sluice-lambda`: the Lambda bootstrap. See `sluice_lambda` (cmd/lambda/) and docs/lambda.md.
//!
//! Memory is what a Lambda function is billed and sized by, so the allocator is told to give
//! memory back rather than keep it for speed: freed pages are returned to the OS at once
//! (mimalloc's `purge_delay` 0; its default is a second, and a batch's worth of freed messages
//! then stays resident while the next stage allocates its own), and no transparent huge
//! pages (a 2 MiB page is resident whole however little of it is used). Measured with
//! `scripts/bench.sh lambda` (10,000 records of 1 KB): peak RSS 85–88 MiB without these,
//! ~50 MiB with them, for ~15% more invocation time (docs/notes/performance-log.md). The Lambda
//! function pays that: its memory is its size and its bill, and an invocation's batch is
//! at most 6 MB. (`sluice` waits 20 ms instead: see `sluice_cmd::memory`.)

use std::process::ExitCode;

// As in the CLI: many small allocations per message, which mimalloc serves cheaper. Unlike
// the CLI, large blocks stay in mimalloc too, whose purge delay of 0 returns them at once.
#[global_allocator]
static GLOBAL: sluice_cmd::memory::Allocator = sluice_cmd::memory::Allocator::MIMALLOC;

fn main() -> ExitCode {
    sluice_cmd::memory::no_huge_pages();
    sluice_cmd::memory::purge_after(0);
    sluice_lambda::main()
}
