//! The `aws_secrets_manager` secret provider: a secret's `SecretString` read with
//! `GetSecretValue` (`sub.secrets.aws.secrets_manager({id, aws: {arn}, ttl_offset})`).
//!
//! `aws.arn` is the `SecretId`: the secret's ARN (whose region is used) or its name (the
//! region then comes from `AWS_REGION`). The client is made on first use with sluice's
//! AWS settings (`crate::aws`: retries of throttling, 5xx and network errors, timeouts,
//! `AWS_ENDPOINT_URL_SECRETS_MANAGER`/`AWS_ENDPOINT_URL` for an emulator).
//!
//! As in Substation only `SecretString` is used; a secret that has only `SecretBinary` is
//! an error saying so. Errors name the secret and the service's error code, never a value.

use aws_sdk_secretsmanager::Client;
use serde::Deserialize;
use sluice_engine::{Build, ConfigError};
use tokio::sync::OnceCell;

use super::Secret;
use crate::aws::{Arn, AwsSettings, AwsTarget, check_role, lazy_client, non_empty};

/// Settings of the `aws_secrets_manager` provider.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The cache id that `${SECRET:id}` names.
    pub id: Option<String>,
    /// `arn` (the secret's ARN or name) and `assume_role_arn`.
    pub aws: AwsSettings,
    /// How long a value is used before it is fetched again (default 15m).
    pub ttl_offset: Option<String>,
}

/// A secret in AWS Secrets Manager.
pub struct AwsSecretsManager {
    secret_id: String,
    target: AwsTarget,
    client: OnceCell<Client>,
}

impl AwsSecretsManager {
    /// Builds it from `s`, found at `field`.
    pub fn build(b: &Build<'_>, field: &str, s: &Settings) -> Result<Self, ConfigError> {
        let arn_field = format!("{field}.aws.arn");
        let secret_id = non_empty(s.aws.arn.clone()).ok_or_else(|| {
            b.field_error(
                &arn_field,
                "missing required option: the secret's ARN \
                 (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME) or its name",
            )
        })?;
        let region = if secret_id.starts_with("arn:") {
            match Arn::parse(&secret_id) {
                Ok(a)
                    if a.service == "secretsmanager"
                        && a.resource.starts_with("secret:")
                        && a.resource.len() > "secret:".len()
                        && !a.region.is_empty() =>
                {
                    Some(a.region)
                }
                _ => {
                    return Err(b.field_error(
                        &arn_field,
                        format!(
                            "{secret_id:?} is not a Secrets Manager secret ARN \
                             (expected arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)"
                        ),
                    ));
                }
            }
        } else {
            None
        };
        let role = non_empty(s.aws.assume_role_arn.clone());
        check_role(&role).map_err(|m| b.field_error(&format!("{field}.aws.assume_role_arn"), m))?;
        Ok(AwsSecretsManager {
            secret_id,
            target: AwsTarget {
                region,
                assume_role_arn: role,
                ..Default::default()
            },
            client: OnceCell::new(),
        })
    }

    /// The secret `secret_id` read with `client` (tests with mocked responses).
    #[cfg(any(test, feature = "test-support"))]
    pub fn with_client(secret_id: &str, client: Client) -> Self {
        AwsSecretsManager {
            secret_id: secret_id.to_string(),
            target: AwsTarget::default(),
            client: OnceCell::new_with(Some(client)),
        }
    }

    /// Fetches the secret's `SecretString`.
    pub async fn fetch(&self) -> Result<Secret, String> {
        let no_region = || {
            format!(
                "no AWS region for {:?}: give the secret's ARN in aws.arn or set AWS_REGION",
                self.secret_id
            )
        };
        let client = lazy_client(&self.client, &self.target, no_region, Client::new)
            .await
            .map_err(|e| e.to_string())?;
        let out = client
            .get_secret_value()
            .secret_id(&self.secret_id)
            .send()
            .await
            .map_err(|e| {
                use aws_sdk_secretsmanager::error::{ProvideErrorMetadata, SdkError};
                let code = match &e {
                    SdkError::ServiceError(s) => s.err().code().unwrap_or("ServiceError"),
                    SdkError::TimeoutError(_) => "TimeoutError",
                    SdkError::DispatchFailure(_) => "DispatchFailure",
                    _ => "SdkError",
                };
                let message = match &e {
                    SdkError::ServiceError(s) => s.err().message().map(str::to_string),
                    _ => None,
                }
                .unwrap_or_else(|| crate::aws::describe_error(&e));
                format!(
                    "GetSecretValue of {:?} failed: {code}: {message}",
                    self.secret_id
                )
            })?;
        match out.secret_string {
            Some(s) if !s.is_empty() => Ok(Secret::new(s)),
            _ if out.secret_binary.is_some() => Err(format!(
                "{:?} holds a binary secret; only SecretString is supported",
                self.secret_id
            )),
            _ => Err(format!("{:?} has an empty SecretString", self.secret_id)),
        }
    }
}
