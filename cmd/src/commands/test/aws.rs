//! Whether `sluice test` can run a config that calls AWS: which AWS-backed types a config
//! uses, and whether anything in the environment tells the AWS SDK where AWS is. Without
//! that, the config's tests would fail after the SDK had waited for instance metadata, so
//! the file is skipped with the reason instead.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

/// The AWS-backed types a compiled config uses (transforms, kv stores, secrets; in its
/// tests too), joined with `, `; `None` when it uses none.
pub(super) fn aws_types(config: &serde_json::Value) -> Option<String> {
    fn walk(v: &serde_json::Value, found: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(t) = m.get("type").and_then(|t| t.as_str())
                    && sluice_transforms::calls_aws(t)
                {
                    found.insert(t.to_string());
                }
                m.values().for_each(|x| walk(x, found));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, found)),
            _ => {}
        }
    }
    let mut found = std::collections::BTreeSet::new();
    walk(config, &mut found);
    (!found.is_empty()).then(|| found.into_iter().collect::<Vec<_>>().join(", "))
}

/// Whether anything in `env` tells the AWS SDK where AWS is: credentials, a profile, a web
/// identity or container credentials, an endpoint (`AWS_ENDPOINT_URL` or a per-service
/// `AWS_ENDPOINT_URL_*`), shared config files, or an explicit `AWS_EC2_METADATA_DISABLED=false`
/// (use instance metadata).
pub(super) fn aws_configured(env: &HashMap<String, OsString>) -> bool {
    const VARS: &[&str] = &[
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ];
    let set = |k: &str| env.get(k).is_some_and(|v| !v.is_empty());
    if VARS.iter().any(|k| set(k))
        || env
            .iter()
            .any(|(k, v)| k.starts_with("AWS_ENDPOINT_URL") && !v.is_empty())
        || env
            .get("AWS_EC2_METADATA_DISABLED")
            .is_some_and(|v| v.eq_ignore_ascii_case("false"))
    {
        return true;
    }
    let file_var = |k: &str| env.get(k).is_some_and(|p| Path::new(p).is_file());
    let home_file = |name: &str| {
        env.get("HOME")
            .is_some_and(|h| Path::new(h).join(".aws").join(name).is_file())
    };
    file_var("AWS_SHARED_CREDENTIALS_FILE")
        || file_var("AWS_CONFIG_FILE")
        || home_file("credentials")
        || home_file("config")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configs_that_call_aws_are_found() {
        let cfg = json!({
            "transforms": [
                {"type": "meta_switch", "settings": {"cases": [{"transforms": [
                    {"type": "send_aws_kinesis_data_stream", "settings": {}}
                ]}]}},
                {"type": "meta_kv_store_lock", "settings": {"kv_store": {"type": "aws_dynamodb"}}},
                {"type": "utility_metric_count", "settings": {"metric": {"destination": {"type": "aws_cloudwatch_embedded_metrics"}}}},
            ],
            "tests": [{"transforms": [{"type": "enrich_aws_lambda"}]}],
        });
        assert_eq!(
            aws_types(&cfg).as_deref(),
            Some("aws_dynamodb, enrich_aws_lambda, send_aws_kinesis_data_stream")
        );
        let local = json!({"transforms": [{"type": "send_stdout"}, {"type": "utility_metric_count", "settings": {"metric": {"destination": {"type": "aws_cloudwatch_embedded_metrics"}}}}]});
        assert_eq!(aws_types(&local), None, "EMF lines go to stdout, not AWS");
    }

    #[test]
    fn what_counts_as_aws_being_configured() {
        let env = |pairs: &[(&str, &str)]| -> HashMap<String, OsString> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), OsString::from(v)))
                .collect()
        };
        assert!(!aws_configured(&env(&[])));
        assert!(!aws_configured(&env(&[
            ("HOME", "/nonexistent"),
            ("AWS_REGION", "us-east-1")
        ])));
        assert!(!aws_configured(&env(&[("AWS_ACCESS_KEY_ID", "")])));
        assert!(!aws_configured(&env(&[("AWS_CONFIG_FILE", "/dev/null")])));
        assert!(!aws_configured(&env(&[(
            "AWS_EC2_METADATA_DISABLED",
            "true"
        )])));
        for yes in [
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("AWS_PROFILE", "dev"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
            ("AWS_ENDPOINT_URL_KINESIS", "http://127.0.0.1:4566"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("AWS_EC2_METADATA_DISABLED", "false"),
        ] {
            assert!(aws_configured(&env(&[yes])), "{yes:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(dir.path().join(".aws/credentials"), "[default]\n").unwrap();
        let home = dir.path().to_str().unwrap();
        assert!(aws_configured(&env(&[("HOME", home)])));
    }
}
