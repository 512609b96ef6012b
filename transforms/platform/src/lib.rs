//! # sluice-platform
//!
//! What sluice calls out through, apart from the transforms that call it: the clients of
//! the services it talks to and the formats those services define. It is a closed layer
//! below the transform catalogue (`sluice-transforms`) and the adapters (`sluice-cmd`'s
//! CLI, the Lambda function, `sluice tap`), which all use it; it knows no transform and
//! depends on nothing of sluice's but the engine's settings and error types.
//!
//! - [`aws`] (feature `aws`): sluice's AWS SDK configuration (retries, timeouts, the HTTPS
//!   client, roles), what an error's outcome says about a record's delivery, DynamoDB
//!   attribute values, the S3 and Lambda clients.
//! - [`gcp`]: Cloud Storage through its JSON API, with Google's credentials.
//! - [`http`]: the HTTP client the HTTP transforms and Cloud Storage share.
//! - [`fetch`]: reading a file named by a URL (`s3://`, `gs://`, `https://`): configs,
//!   the kv stores' files, `sluice run`'s inputs.
//! - [`secrets`]: the secret providers, the cache `${SECRET:id}` is filled from, and
//!   redaction.
//! - [`emf`]: CloudWatch's embedded metric format, written by the metric transforms and
//!   the Lambda function's telemetry.
//! - [`kpl`]: the Kinesis Producer Library's aggregated records, written by the Kinesis
//!   send and read by `sluice tap` and the Lambda function.
//!
//! Without the `aws` feature the AWS SDK is not built; what needs it (`s3://` URLs, the
//! `aws_secrets_manager` provider) then fails with [`built_without_aws`]'s words.

#[cfg(feature = "aws")]
pub mod aws;
pub mod emf;
pub mod fetch;
pub mod gcp;
pub mod http;
pub mod kpl;
pub mod secrets;

/// Why `what` cannot be used in a build without the `aws` feature.
pub fn built_without_aws(what: &str) -> String {
    format!(
        "{what} calls AWS, and this sluice was built without its `aws` feature \
         (build with the default features, or with `--features aws`)"
    )
}
