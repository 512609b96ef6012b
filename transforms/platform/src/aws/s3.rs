//! Amazon S3: the client sluice's S3 users make (`send_aws_s3`, files at `s3://` URLs),
//! reading one object, and error texts with S3's error code.
//!
//! The client is made from [`super::load`]'s configuration (the explicit HTTPS client, the
//! default credential, region and endpoint chains, sluice's retries) with longer timeouts:
//! an attempt that moves an object (or a 16 MiB part) must not be cut off after the 5 s that
//! bound the other services' small calls. Region: S3 bucket ARNs carry none, so it comes
//! from `AWS_REGION` (or the profile). Endpoint: `AWS_ENDPOINT_URL_S3`, then
//! `AWS_ENDPOINT_URL`; an IP endpoint (an emulator on loopback) gets path-style requests.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::RequestChecksumCalculation;

use super::{AwsTarget, CONNECT_TIMEOUT};

/// The longest one attempt of an S3 operation may take (an object or a part moves in one).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest an S3 operation may take, retries included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(900);

/// The timeouts of S3 clients (see the module documentation).
pub fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(OPERATION_TIMEOUT)
        .build()
}

/// An S3 client from `conf`. `checksums` says whether the SDK adds a checksum to uploads
/// that did not ask for one (`WhenSupported`, CRC32) or not (`WhenRequired`); an upload
/// that names an algorithm needs `WhenSupported` for it to be computed.
pub fn client(conf: &SdkConfig, checksums: RequestChecksumCalculation) -> Client {
    let conf = aws_sdk_s3::config::Builder::from(conf)
        .timeout_config(timeout_config())
        .request_checksum_calculation(checksums)
        .build();
    Client::from_conf(conf)
}

/// Reads object `key` of `bucket` with the default chains (no role, region from the
/// environment), refusing one larger than `max_bytes` (`what` names what the object is, for
/// that error: "a config"). The error names neither bucket nor key (the caller does) and
/// says why: no region, S3's error code, the size.
/// `GetObject`'s answer: the object's length when S3 gives it, and its body, to be read as
/// it arrives.
pub async fn get_object_body(
    bucket: &str,
    key: &str,
) -> Result<(Option<u64>, aws_sdk_s3::primitives::ByteStream), String> {
    let conf = super::load(&AwsTarget::default()).await;
    if conf.region().is_none() {
        return Err("no AWS region: set AWS_REGION".into());
    }
    let c = client(&conf, RequestChecksumCalculation::WhenRequired);
    let out = c
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| format!("GetObject failed: {}", super::describe_error(&e)))?;
    let length = out.content_length().and_then(|n| u64::try_from(n).ok());
    Ok((length, out.body))
}

pub async fn get_object(
    bucket: &str,
    key: &str,
    max_bytes: usize,
    what: &str,
) -> Result<Vec<u8>, String> {
    let (length, mut body) = get_object_body(bucket, key).await?;
    let too_big = |n: u64| {
        format!("the object has {n} bytes, more than the {max_bytes} bytes {what} may have")
    };
    if let Some(n) = length
        && n > max_bytes as u64
    {
        return Err(too_big(n));
    }
    let mut data = Vec::new();
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| format!("reading the object: {}", super::error_chain(&e)))?
    {
        data.extend_from_slice(&chunk);
        if data.len() > max_bytes {
            return Err(too_big(data.len() as u64));
        }
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_fit_object_transfers() {
        let t = timeout_config();
        assert_eq!(t.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
        assert!(ATTEMPT_TIMEOUT >= Duration::from_secs(60));
    }
}
