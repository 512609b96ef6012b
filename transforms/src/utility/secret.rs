//! `utility_secret`: loads a secret into the process-wide secrets cache
//! ([`sluice_platform::secrets`]) under its `id`, so that `${SECRET:id}` in the HTTP transforms' URLs
//! and headers is replaced by it; messages pass through unchanged.
//!
//! Settings as in Substation: `secret`, a provider config (`sub.secrets.environment_variable`
//! or `sub.secrets.aws.secrets_manager`) with `id`, the provider's own settings and
//! `ttl_offset` (how long a fetched value is used, default 15m; `"0s"`: fetched once for the
//! life of the process).
//!
//! When the value is fetched: an environment variable is read when the transform is built
//! (as Substation does), so an unset variable is a configuration error naming it. Secrets
//! Manager is asked when the first data message arrives, since building a config
//! never touches the network. After `ttl_offset` the next message fetches the value again,
//! once: messages that arrive meanwhile wait for that one fetch, and the new value is fresh
//! for another `ttl_offset`.
//!
//! Where sluice differs from Substation: an unset environment variable is an error
//! (Substation caches nothing, silently); expiry is counted from each fetch (Substation
//! counts it from construction and never advances it, so after the first expiry it fetches
//! the secret again for every message); a failed fetch is an error naming the secret and the
//! cause, never the value.

use std::time::Instant;

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

use sluice_platform::secrets::{self, SecretConfig, SecretSource};

/// Settings of `utility_secret`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The secret's provider config.
    pub secret: Option<SecretConfig>,
}

/// The `utility_secret` transform.
#[derive(Debug)]
pub(crate) struct UtilitySecret {
    source: SecretSource,
    /// Held while the value is fetched, so that one expiry causes one fetch.
    refresh: tokio::sync::Mutex<()>,
}

impl UtilitySecret {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let cfg = s.secret.ok_or_else(|| {
            b.field_error(
                "secret",
                "missing required option: a secret provider \
                 (sub.secrets.environment_variable or sub.secrets.aws.secrets_manager)",
            )
        })?;
        let source = SecretSource::build(b, "secret", &cfg)?;
        if let Some(Err(m)) = source.fetch_now() {
            return Err(b.field_error("secret.settings.name", m));
        }
        Ok(Self::from_source(source))
    }

    /// Fetches from `source` (tests give it a mocked provider).
    fn from_source(source: SecretSource) -> Self {
        UtilitySecret {
            source,
            refresh: tokio::sync::Mutex::new(()),
        }
    }

    /// Makes sure the cache holds a fresh value.
    async fn ensure_fresh(&self) -> Result<(), TransformError> {
        if secrets::is_fresh(&self.source.id, Instant::now()) {
            return Ok(());
        }
        let _one_fetch = self.refresh.lock().await;
        // Another message may have refreshed it while this one waited.
        if secrets::is_fresh(&self.source.id, Instant::now()) {
            return Ok(());
        }
        let value = self.source.fetch().await?;
        secrets::store(&self.source.id, value, self.source.ttl);
        Ok(())
    }
}

#[async_trait]
impl StatelessTransform for UtilitySecret {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        self.ensure_fresh().await?;
        out.push(msg);
        Ok(())
    }
}

/// What registers the `utility_secret` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_secret",
    aliases: &[],
    library: "sub.tf.util.secret",
    summary: "loads a secret for `${SECRET:id}` (environment variable, Secrets Manager)",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"secret": {"type": "environment_variable", "settings": {"id": "compliance_secret", "name": "PATH"}}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};
    use sluice_platform::secrets::Template;

    fn env_secret(id: &str, name: &str) -> sluice_engine::Value {
        json!({"secret": {"type": "environment_variable", "settings": {"id": id, "name": name}}})
    }

    #[test]
    fn settings_table() {
        // SAFETY: the tests of this crate set only variables whose names are theirs alone.
        unsafe { std::env::set_var("SLUICE_TEST_SECRET_TABLE", "table-secret-value-1") };
        let r = registry();
        for s in [
            env_secret("a", "SLUICE_TEST_SECRET_TABLE"),
            json!({"secret": {"type": "environment_variable", "settings": {"id": "a", "name": "SLUICE_TEST_SECRET_TABLE", "ttl_offset": "1h"}}}),
        ] {
            testing::build(&r, json!({"type": "utility_secret", "settings": s}))
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        testing::assert_config_errors(
            &r,
            "utility_secret",
            &[
                (json!({}), "settings.secret: missing required option"),
                (
                    json!({"secret": {"type": "vault", "settings": {}}}),
                    "settings.secret.type: unknown secret provider \"vault\"",
                ),
                (
                    json!({"secret": {"type": "environment_variable", "settings": {"name": "SLUICE_TEST_SECRET_TABLE"}}}),
                    "settings.secret.settings.id: missing required option",
                ),
                (
                    json!({"secret": {"type": "environment_variable", "settings": {"id": "a"}}}),
                    "settings.secret.settings.name: missing required option",
                ),
                (
                    env_secret("a", "SLUICE_TEST_SECRET_SURELY_UNSET"),
                    "settings.secret.settings.name: environment variable \"SLUICE_TEST_SECRET_SURELY_UNSET\" is not set",
                ),
                (
                    json!({"secret": {"type": "environment_variable", "settings": {"id": "a", "name": "SLUICE_TEST_SECRET_TABLE", "ttl_offset": "1d"}}}),
                    "settings.secret.settings.ttl_offset: invalid duration",
                ),
            ],
        );
    }

    #[test]
    fn an_environment_variable_is_loaded_when_built() {
        // SAFETY: as above.
        unsafe { std::env::set_var("SLUICE_TEST_SECRET_ENV", "tok-env-1") };
        let t = testing::build(
            &registry(),
            json!({"type": "utility_secret", "settings": env_secret("env-id", "SLUICE_TEST_SECRET_ENV")}),
        )
        .unwrap();
        let tpl = Template::parse("Bearer ${SECRET:env-id}").unwrap();
        assert_eq!(tpl.render(None).unwrap(), "Bearer tok-env-1");
        assert_eq!(
            testing::run(t, &["a", r#"{"b":1}"#]).unwrap(),
            ["a", r#"{"b":1}"#],
            "messages pass through"
        );
    }

    /// AWS Secrets Manager, with a mocked client.
    #[cfg(feature = "aws")]
    mod secrets_manager {
        use super::super::*;
        use crate::registry;
        use aws_sdk_secretsmanager::Client;
        use aws_sdk_secretsmanager::config::retry::RetryConfig;
        use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueOutput;
        use aws_sdk_secretsmanager::primitives::Blob;
        use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
        use sluice_engine::{json, testing};
        use sluice_platform::secrets::aws_secrets_manager::AwsSecretsManager;
        use sluice_platform::secrets::{Provider, Template};
        use std::sync::Arc;
        use std::time::Duration;

        #[test]
        fn settings_table() {
            let r = registry();
            for s in [
                json!({"secret": {"type": "aws_secrets_manager", "settings": {"id": "b", "aws": {"arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:api-AbCdEf"}}}}),
                json!({"secret": {"type": "aws_secrets_manager", "settings": {"id": "b", "aws": {"arn": "api-key"}, "ttl_offset": "0s"}}}),
            ] {
                testing::build(&r, json!({"type": "utility_secret", "settings": s}))
                    .unwrap_or_else(|e| panic!("{s}: {e}"));
            }
            testing::assert_config_errors(
                &r,
                "utility_secret",
                &[
                    (
                        json!({"secret": {"type": "aws_secrets_manager", "settings": {"id": "b"}}}),
                        "settings.secret.settings.aws.arn: missing required option",
                    ),
                    (
                        json!({"secret": {"type": "aws_secrets_manager", "settings": {"id": "b", "aws": {"arn": "arn:aws:s3:::bucket"}}}}),
                        "settings.secret.settings.aws.arn: \"arn:aws:s3:::bucket\" is not a Secrets Manager secret ARN",
                    ),
                    (
                        json!({"secret": {"type": "aws_secrets_manager", "settings": {"id": "b", "aws": {"arn": "x", "assume_role_arn": "nope"}}}}),
                        "settings.secret.settings.aws.assume_role_arn:",
                    ),
                    (
                        json!({"secret": {"type": "aws_secrets_manager", "settings": {"id": "b}", "aws": {"arn": "x"}}}}),
                        "settings.secret.settings.id: \"b}\": an id cannot contain `}`",
                    ),
                ],
            );
        }

        fn answer(s: &str) -> GetSecretValueOutput {
            GetSecretValueOutput::builder().secret_string(s).build()
        }

        fn from_mock(id: &str, ttl: Duration, rules: &[&Rule]) -> UtilitySecret {
            let client = mock_client!(aws_sdk_secretsmanager, RuleMode::MatchAny, rules, |b| b
                .retry_config(
                    RetryConfig::standard()
                        .with_max_attempts(2)
                        .with_initial_backoff(Duration::from_millis(1))
                ));
            let provider = AwsSecretsManager::with_client(
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:api-AbCdEf",
                client,
            );
            UtilitySecret::from_source(SecretSource {
                id: id.to_string(),
                ttl,
                provider: Provider::AwsSecretsManager(Box::new(provider)),
            })
        }

        fn run(t: &UtilitySecret, n: usize) -> Result<(), String> {
            for _ in 0..n {
                let mut out = Vec::new();
                testing::block_on(t.transform(Message::new(&b"x"[..]), &mut out))
                    .map_err(|e| e.to_string())?;
                assert_eq!(out.len(), 1);
            }
            Ok(())
        }

        #[test]
        fn secrets_manager_is_asked_once_per_expiry_not_per_message() {
            let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let c = n.clone();
            let rule = mock!(Client::get_secret_value).then_output(move || {
                let i = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                answer(&format!("value-{i}"))
            });
            let t = from_mock("sm-refresh", Duration::from_millis(200), &[&rule]);
            let tpl = Template::parse("${SECRET:sm-refresh}").unwrap();
            assert!(
                tpl.render(None).is_err(),
                "nothing before the first message"
            );
            run(&t, 20).unwrap();
            assert_eq!(rule.num_calls(), 1);
            assert_eq!(tpl.render(None).unwrap(), "value-0");
            std::thread::sleep(Duration::from_millis(250));
            run(&t, 20).unwrap();
            assert_eq!(rule.num_calls(), 2, "one refresh after the expiry");
            assert_eq!(tpl.render(None).unwrap(), "value-1");
        }

        #[test]
        fn a_ttl_of_zero_fetches_once() {
            let rule = mock!(Client::get_secret_value).then_output(|| answer("forever"));
            let t = from_mock("sm-zero", Duration::ZERO, &[&rule]);
            run(&t, 5).unwrap();
            assert_eq!(rule.num_calls(), 1);
        }

        #[test]
        fn secrets_manager_errors_name_the_secret_and_never_the_value() {
            let rule = mock!(Client::get_secret_value).then_http_response(|| {
                aws_smithy_runtime_api::http::Response::new(
                    aws_smithy_runtime_api::http::StatusCode::try_from(400).unwrap(),
                    aws_smithy_types::body::SdkBody::from(
                        r#"{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}"#,
                    ),
                )
            });
            let t = from_mock("sm-missing", Duration::ZERO, &[&rule]);
            let e = run(&t, 1).unwrap_err();
            assert_eq!(
                e,
                "secret \"sm-missing\": GetSecretValue of \"arn:aws:secretsmanager:us-east-1:123456789012:secret:api-AbCdEf\" failed: ResourceNotFoundException: Secrets Manager can't find the specified secret."
            );

            let rule = mock!(Client::get_secret_value).then_output(|| {
                GetSecretValueOutput::builder()
                    .secret_binary(Blob::new(b"\x00\x01".to_vec()))
                    .build()
            });
            let t = from_mock("sm-binary", Duration::ZERO, &[&rule]);
            let e = run(&t, 1).unwrap_err();
            assert!(e.contains("holds a binary secret"), "{e}");

            // A value that reaches an error text (a refresh that fails after a value was
            // cached, whose cause quotes it) is redacted.
            sluice_platform::secrets::store(
                "sm-leak",
                sluice_platform::secrets::Secret::new("p4ssw0rd-xyz"),
                Duration::from_nanos(1),
            );
            let rule = mock!(Client::get_secret_value).then_http_response(|| {
                aws_smithy_runtime_api::http::Response::new(
                    aws_smithy_runtime_api::http::StatusCode::try_from(400).unwrap(),
                    aws_smithy_types::body::SdkBody::from(
                        r#"{"__type":"InvalidRequestException","Message":"bad token p4ssw0rd-xyz"}"#,
                    ),
                )
            });
            let t = from_mock("sm-leak", Duration::ZERO, &[&rule]);
            let e = run(&t, 1).unwrap_err();
            assert!(!e.contains("p4ssw0rd-xyz"), "{e}");
            assert!(
                e.ends_with("InvalidRequestException: bad token <redacted>"),
                "{e}"
            );
        }
    }

    #[test]
    fn compliance() {
        // SAFETY: as above.
        unsafe { std::env::set_var("SLUICE_TEST_SECRET_COMPLIANCE", "compliance-secret-value-2") };
        testing::check_type_compliance(
            &registry(),
            "utility_secret",
            env_secret("compliance", "SLUICE_TEST_SECRET_COMPLIANCE"),
        );
    }
}
