//! The library half of `sluice-cmd`: what the `sluice` CLI shares with the `sluice-lambda`
//! shim, the tests and the fuzz targets.
//!
//! `memory` sets how the allocator gives memory back, for both binaries; `tap` reads live
//! Kinesis streams for `sluice tap`; `play_guard` decides which requests `sluice play`'s
//! server takes (a library module so that the fuzz target reaches it). The Lambda function
//! itself is the `sluice-lambda` crate (cmd/lambda/); configs at URLs and the lock warnings
//! are `sluice_config`'s, compressed input `sluice_transforms`'.

pub mod jsonnet_fmt;
pub mod memory;
pub mod play_guard;
#[cfg(feature = "aws")]
pub mod tap;
