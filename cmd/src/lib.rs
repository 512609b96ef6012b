//! The library half of `sluice-cmd`: what the `sluice-lambda` bootstrap and the tests use.
//!
//! `lambda` holds the Lambda handlers (one module per event source family) and the core
//! that runs one invocation through the pipeline; `remote` reads configs at `s3://` and
//! `https://` URLs, shared with the `sluice` CLI; `tap` reads live Kinesis streams for
//! `sluice tap`; `memory` sets how the allocator gives memory back, for both binaries;
//! `lock_lint` warns about where a config's locks let duplicates reach a send (`sluice vet`
//! and the Lambda function's init); `play_guard` decides which requests `sluice play`'s server
//! takes (a library module so that the fuzz target reaches it).

pub mod compression;
pub mod jsonnet_fmt;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod lock_lint;
pub mod memory;
pub mod play_guard;
pub mod remote;
#[cfg(feature = "aws")]
pub mod tap;
