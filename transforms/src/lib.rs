//! # sluice-transforms
//!
//! Every transform and condition type sluice knows, one file per type, grouped by family
//! (`object/copy.rs` is `object_copy`), so the file tree is the catalogue. [`registry`]
//! returns a [`Registry`] with all of them registered under Substation's type names; each
//! family's `mod.rs` has the one line per type that registers it.

#![warn(unreachable_pub)]

// The public API: the registry, and what the CLI, the Lambda function and the integration
// tests use beside it (the kv stores). Everything else is this crate's own; what the
// transforms call out through (AWS, Cloud Storage, HTTP, URLs, secrets, EMF, KPL) is
// `sluice-platform`'s.
pub mod compression;
#[doc(hidden)]
pub mod fuzzing;
pub mod kv_store;

mod aggregate;
mod array;
mod common;
#[cfg(test)]
mod compliance;
mod condition;
mod enrich;
mod format;
mod hash;
mod meta;
mod metrics;
mod network;
mod number;
mod object;
mod send;
mod string;
mod test;
mod time;
mod utility;
#[cfg(any(test, not(feature = "aws")))]
mod without_aws;

use sluice_engine::Registry;

/// The transforms that call AWS services (built only with the `aws` feature).
pub const AWS_TRANSFORMS: [&str; 10] = [
    "enrich_aws_dynamodb_query",
    "enrich_aws_lambda",
    "send_aws_data_firehose",
    "send_aws_dynamodb_put",
    "send_aws_eventbridge",
    "send_aws_kinesis_data_stream",
    "send_aws_lambda",
    "send_aws_s3",
    "send_aws_sns",
    "send_aws_sqs",
];

/// Whether a transform, kv store or secret provider `type` calls AWS: one of
/// [`AWS_TRANSFORMS`], the `aws_dynamodb` kv store or the `aws_secrets_manager` provider.
pub fn calls_aws(type_name: &str) -> bool {
    AWS_TRANSFORMS.contains(&type_name)
        || type_name == "aws_dynamodb"
        || type_name == "aws_secrets_manager"
}

/// A registry with every transform and condition.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    aggregate::register(&mut r);
    array::register(&mut r);
    condition::register(&mut r);
    enrich::register(&mut r);
    format::register(&mut r);
    hash::register(&mut r);
    meta::register(&mut r);
    network::register(&mut r);
    number::register(&mut r);
    object::register(&mut r);
    send::register(&mut r);
    string::register(&mut r);
    test::register(&mut r);
    time::register(&mut r);
    utility::register(&mut r);
    #[cfg(not(feature = "aws"))]
    without_aws::register(&mut r);
    r
}
