//! What every AWS-backed part of sluice shares: parsing the `aws` settings (an ARN and
//! an optional role to assume) and loading the SDK configuration they mean.
//!
//! The SDK crates are built with slim features (no default HTTPS client, no SSO, no second
//! TLS stack; `reference/toolchain.md`), so the HTTP client is set here explicitly: hyper
//! with rustls on the `ring` provider. Everything else comes from the SDK's own default
//! chains, as with any AWS tool:
//!
//! - credentials: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, the shared profile files,
//!   web identity, the ECS and EC2 metadata endpoints (in that order);
//! - region: the ARN's region when a resource is named by ARN, else `AWS_REGION`, then
//!   the profile;
//! - endpoint: `AWS_ENDPOINT_URL_<SERVICE>` (e.g. `AWS_ENDPOINT_URL_DYNAMODB`), then
//!   `AWS_ENDPOINT_URL`, then the profile's `endpoint_url`, then AWS's own; this is how
//!   sluice is pointed at a local emulator.
//!
//! Retries: the SDK's standard mode (exponential backoff with jitter and a retry quota)
//! with [`MAX_ATTEMPTS`] attempts, for throttling, 5xx and I/O errors; except Kinesis
//! `PutRecords`, which the send retries itself so that it never re-sends blindly what may
//! have been applied (`send::aws_kinesis_data_stream`). Timeouts bound a
//! single attempt ([`ATTEMPT_TIMEOUT`]) and an operation with its retries
//! ([`OPERATION_TIMEOUT`]), so a stalled network fails a call instead of hanging the
//! pipeline. Inside a Lambda invocation an attempt also ends when the invocation's work
//! must stop (`sluice_engine::invocation::call_deadline`), and is not made when no time is
//! left, and the SDK's backoff between attempts ends there too, so that neither a stalled
//! call nor a throttled one makes the function answer after its deadline: an attempt cut
//! there may have been applied, one not made was not (`outcome`).
//!
//! Every AWS-backed transform takes the same `aws` settings ([`AwsSettings`]): the resource
//! (an ARN, or a bare name) and an optional role ([`check_role`]); its SDK client is made on
//! first use ([`lazy_client`]), so building a config never touches the network. The kv
//! store and `enrich_aws_dynamodb_query` name their table alike ([`parse_dynamodb_table`]);
//! the Lambda transforms share [`lambda`].
//!
//! The AWS sends (Kinesis, Firehose, SQS, SNS, EventBridge, S3, DynamoDB, Lambda), the
//! enrichments and the DynamoDB kv store reuse this module; [`s3`] adds what S3 needs,
//! [`outcome`] tells a failed call that may have been applied from one that was not (the
//! KPL's aggregated records are read and written by [`crate::kpl`], which needs no SDK).

pub mod dynamodb_attributes;
pub mod outcome;
pub mod s3;

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use serde::Deserialize;
use sluice_engine::TransformError;
// The SDK's shared types; every service crate re-exports the same ones.
use aws_sdk_dynamodb::config::{
    AsyncSleep, Credentials, SharedCredentialsProvider, SharedHttpClient, Sleep,
};
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

mod error_text;
pub mod lambda;

pub use error_text::{describe_error, error_chain};

/// Whether a Kinesis call's error code means "slow down" (the shard's or the key's limit,
/// or KMS's): retried with backoff by every Kinesis reader and writer.
pub fn kinesis_throttled(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ProvisionedThroughputExceededException"
                | "KMSThrottlingException"
                | "LimitExceededException"
                | "ThrottlingException"
        )
    )
}
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;

/// Attempts per SDK operation (the first and the retries).
pub const MAX_ATTEMPTS: u32 = 8;
/// The first retry's backoff ceiling; it doubles per retry (with full jitter).
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
/// The largest backoff between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The longest one attempt of an operation may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest an operation may take, retries included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest establishing a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The parts of an Amazon Resource Name
/// (`arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arn {
    /// `aws`, `aws-cn`, `aws-us-gov`, ...
    pub partition: String,
    /// The service, e.g. `dynamodb`.
    pub service: String,
    /// The region (empty for global resources).
    pub region: String,
    /// The account id.
    pub account: String,
    /// The rest, e.g. `table/locks`.
    pub resource: String,
}

impl Arn {
    /// Parses `s`; the message of an error says what is wrong.
    pub fn parse(s: &str) -> Result<Arn, String> {
        let mut parts = s.splitn(6, ':');
        let mut next = || parts.next().unwrap_or("");
        let (arn, partition, service, region, account, resource) =
            (next(), next(), next(), next(), next(), next());
        if arn != "arn" || partition.is_empty() || service.is_empty() || resource.is_empty() {
            return Err(format!(
                "{s:?} is not an ARN (expected arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE)"
            ));
        }
        Ok(Arn {
            partition: partition.to_string(),
            service: service.to_string(),
            region: region.to_string(),
            account: account.to_string(),
            resource: resource.to_string(),
        })
    }
}

/// `aws`: the settings every AWS-backed transform takes, as Substation spells them.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct AwsSettings {
    /// The resource's ARN (or its name).
    pub arn: Option<String>,
    /// A role to assume.
    pub assume_role_arn: Option<String>,
}

/// `s` unless it is empty (Substation's library fills unset options with `""`).
pub fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// Checks `aws.assume_role_arn`.
pub fn check_role(role: &Option<String>) -> Result<(), String> {
    if let Some(role) = role {
        match Arn::parse(role) {
            Ok(a) if a.service == "iam" && a.resource.starts_with("role/") => {}
            _ => {
                return Err(format!(
                    "{role:?} is not an IAM role ARN (expected arn:aws:iam::ACCOUNT:role/NAME)"
                ));
            }
        }
    }
    Ok(())
}

/// DynamoDB's table name rule: 3 to 255 of `[a-zA-Z0-9_.-]`.
fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// The DynamoDB table named by `arn` (an `aws.arn` setting, not empty): its name, and its
/// region when it is given by ARN (`arn:aws:dynamodb:REGION:ACCOUNT:table/NAME`); a bare
/// table name leaves the region to the SDK's chain (`AWS_REGION`).
pub fn parse_dynamodb_table(arn: &str) -> Result<(String, Option<String>), String> {
    if arn.starts_with("arn:") {
        let a = Arn::parse(arn)?;
        let name = a.resource.strip_prefix("table/").unwrap_or("");
        if a.service != "dynamodb" || !valid_table_name(name) || a.region.is_empty() {
            return Err(format!(
                "{arn:?} is not a DynamoDB table ARN \
                 (expected arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"
            ));
        }
        Ok((name.to_string(), Some(a.region)))
    } else if valid_table_name(arn) {
        Ok((arn.to_string(), None))
    } else {
        Err(format!(
            "{arn:?} is neither a DynamoDB table ARN \
             (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME) nor a table name \
             (3 to 255 letters, digits, '_', '-', '.')"
        ))
    }
}

/// Which AWS configuration to load: the settings-derived parts. Everything not set here
/// comes from the SDK's default chains (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AwsTarget {
    /// The region, when the configuration fixes one (from a resource ARN).
    pub region: Option<String>,
    /// A role to assume (through STS) with the default credentials.
    pub assume_role_arn: Option<String>,
    /// An endpoint to use instead of the default chain's (tests against an emulator).
    pub endpoint_url: Option<String>,
    /// Fixed `(access key, secret key)` credentials instead of the default chain (tests
    /// against an emulator, which accepts anything but needs something to sign with).
    pub static_credentials: Option<(String, String)>,
}

/// The HTTPS client (hyper + rustls with the `ring` provider); plain `http://` endpoints
/// (local emulators) work through it too. Inside a Lambda invocation its calls end in time
/// (`WithinInvocation`).
pub fn https_client() -> SharedHttpClient {
    use aws_smithy_http_client::tls;
    SharedHttpClient::new(WithinInvocation(
        aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https(),
    ))
}

/// An HTTP client whose calls made inside a Lambda invocation end by
/// `sluice_engine::invocation::call_deadline` (when the work must stop, or, while the
/// locks settle, shortly before the answer is due). A call made with no time left is not
/// made: a "user" error, which the SDK does not retry and [`outcome`] counts as never
/// sent. A call cut short may have been applied: an error the SDK does not retry either
/// (no time is left for a retry) and [`outcome`] counts as uncertain.
#[derive(Debug)]
struct WithinInvocation(SharedHttpClient);

impl HttpClient for WithinInvocation {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(WithinInvocationConnector(
            self.0.http_connector(settings, components),
        ))
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        self.0.connector_metadata()
    }
}

#[derive(Debug)]
struct WithinInvocationConnector(SharedHttpConnector);

/// The SDK's sleeps (the backoff between a call's attempts, its timeouts), ended by
/// `sluice_engine::invocation::call_deadline` inside a Lambda invocation: a retry's backoff
/// (up to [`MAX_BACKOFF`]) never takes a call past the time the function keeps to answer;
/// the attempt after it is then not made (`WithinInvocation`).
#[derive(Debug)]
struct SleepWithinInvocation;

impl AsyncSleep for SleepWithinInvocation {
    fn sleep(&self, duration: Duration) -> Sleep {
        // Read here, in the task making the call (the invocation's deadline is task-local).
        let until = tokio::time::Instant::now() + duration;
        let until = match sluice_engine::invocation::call_deadline() {
            Some(at) => until.min(at.into()),
            None => until,
        };
        Sleep::new(tokio::time::sleep_until(until))
    }
}

/// Why a call inside an invocation was not made (`false`), or was cut short (`true`).
#[derive(Debug)]
struct OutOfTime(bool);

impl std::fmt::Display for OutOfTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the Lambda invocation's deadline is near (its work stops {:?} before it, so that the function answers in time)",
            if self.0 {
                "no answer in time"
            } else {
                "not sent"
            },
            sluice_engine::invocation::WORK_MARGIN
        )
    }
}

impl std::error::Error for OutOfTime {}

impl HttpConnector for WithinInvocationConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        // Read here, in the task making the call (the invocation's deadline is task-local).
        let Some(at) = sluice_engine::invocation::call_deadline() else {
            return self.0.call(request);
        };
        if at <= std::time::Instant::now() {
            return HttpConnectorFuture::ready(Err(ConnectorError::user(Box::new(OutOfTime(
                false,
            )))));
        }
        let call = self.0.call(request);
        HttpConnectorFuture::new(async move {
            match tokio::time::timeout_at(at.into(), call).await {
                Ok(answer) => answer,
                Err(_) => Err(ConnectorError::other(Box::new(OutOfTime(true)), None)),
            }
        })
    }
}

/// The retry configuration every sluice AWS client uses (see the module documentation).
pub fn retry_config() -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(MAX_ATTEMPTS)
        .with_initial_backoff(INITIAL_BACKOFF)
        .with_max_backoff(MAX_BACKOFF)
}

/// The timeouts every sluice AWS client uses (see the module documentation).
pub fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(OPERATION_TIMEOUT)
        .build()
}

/// Loads the SDK configuration for `target`: the default chains, the explicit HTTP
/// client, sluice's retry and timeout settings, then the target's overrides; with
/// `assume_role_arn`, credentials become the role's (refreshed before they expire).
pub async fn load(target: &AwsTarget) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(https_client())
        .sleep_impl(SleepWithinInvocation)
        .retry_config(retry_config())
        .timeout_config(timeout_config());
    if let Some(region) = &target.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(url) = &target.endpoint_url {
        loader = loader.endpoint_url(url.clone());
    }
    if let Some((key, secret)) = &target.static_credentials {
        loader = loader.credentials_provider(Credentials::new(
            key.clone(),
            secret.clone(),
            None,
            None,
            "sluice-static",
        ));
    }
    let base = loader.load().await;
    let Some(role) = &target.assume_role_arn else {
        return base;
    };
    let mut provider = aws_config::sts::AssumeRoleProvider::builder(role.clone())
        .session_name(format!("sluice-{}", std::process::id()))
        .configure(&base);
    if let Some(region) = base.region() {
        provider = provider.region(region.clone());
    }
    let provider = provider.build().await;
    base.into_builder()
        .credentials_provider(SharedCredentialsProvider::new(provider))
        .build()
}

/// The SDK configuration for `target`; `no_region` is the error text when it has no region.
pub async fn sdk_config(
    target: &AwsTarget,
    no_region: impl FnOnce() -> String,
) -> Result<SdkConfig, TransformError> {
    let conf = load(target).await;
    if conf.region().is_none() {
        return Err(TransformError::failed(no_region()));
    }
    Ok(conf)
}

/// The client in `cell`, made from [`sdk_config`] with `make` on first use.
pub async fn lazy_client<'c, C>(
    cell: &'c tokio::sync::OnceCell<C>,
    target: &AwsTarget,
    no_region: impl FnOnce() -> String,
    make: impl FnOnce(&SdkConfig) -> C,
) -> Result<&'c C, TransformError> {
    cell.get_or_try_init(|| async { Ok(make(&sdk_config(target, no_region).await?)) })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inside_an_invocation_the_sdks_sleeps_end_when_its_calls_must() {
        use sluice_engine::invocation::{WORK_MARGIN, with_deadline_since};
        use std::time::Instant;
        // An invocation that has run long enough for the whole margin to be kept.
        let long_ago = Instant::now() - Duration::from_secs(60);
        let started = Instant::now();
        let deadline = started + WORK_MARGIN + Duration::from_millis(100);
        // The SDK asks for its sleep inside the task making the call.
        with_deadline_since(long_ago, deadline, async {
            SleepWithinInvocation.sleep(Duration::from_secs(10)).await
        })
        .await;
        let slept = started.elapsed();
        assert!(
            slept >= Duration::from_millis(90) && slept < Duration::from_secs(1),
            "{slept:?}"
        );
        // Outside an invocation a sleep is what it was asked to be.
        let started = Instant::now();
        SleepWithinInvocation.sleep(Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn arns_parse_into_their_parts() {
        let a = Arn::parse("arn:aws:dynamodb:eu-west-1:123456789012:table/locks").unwrap();
        assert_eq!(
            a,
            Arn {
                partition: "aws".into(),
                service: "dynamodb".into(),
                region: "eu-west-1".into(),
                account: "123456789012".into(),
                resource: "table/locks".into(),
            }
        );
        // The resource keeps its colons.
        let a = Arn::parse("arn:aws:kinesis:us-east-1:1:stream/s:x").unwrap();
        assert_eq!(a.resource, "stream/s:x");
        for bad in [
            "",
            "locks",
            "arn:aws",
            "arn:aws:dynamodb:r:a:",
            "nra:aws:x:r:a:b",
        ] {
            assert!(Arn::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dynamodb_tables_by_arn_or_name() {
        assert_eq!(
            parse_dynamodb_table("arn:aws:dynamodb:eu-west-1:1:table/locks"),
            Ok(("locks".into(), Some("eu-west-1".into())))
        );
        assert_eq!(
            parse_dynamodb_table("my-table.v2"),
            Ok(("my-table.v2".into(), None))
        );
        for (bad, why) in [
            ("arn:aws:s3:::bucket", "is not a DynamoDB table ARN"),
            (
                "arn:aws:dynamodb::1:table/locks",
                "is not a DynamoDB table ARN",
            ),
            (
                "arn:aws:dynamodb:r:1:table/x",
                "is not a DynamoDB table ARN",
            ),
            ("ab", "nor a table name"),
            ("a b c", "nor a table name"),
        ] {
            let e = parse_dynamodb_table(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(check_role(&Some("arn:aws:iam::1:role/r".into())).is_ok());
        assert!(check_role(&None).is_ok());
        assert!(check_role(&Some("arn:aws:s3:::b".into())).is_err());
    }

    #[test]
    fn retry_and_timeouts_are_bounded() {
        let r = retry_config();
        assert_eq!(r.max_attempts(), MAX_ATTEMPTS);
        assert_eq!(r.initial_backoff(), INITIAL_BACKOFF);
        let t = timeout_config();
        assert_eq!(t.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
        assert_eq!(t.operation_timeout(), Some(OPERATION_TIMEOUT));
    }
}
