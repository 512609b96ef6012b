//! A build without the `aws` feature still knows the AWS-backed types' names, so a config
//! that uses one is told why it cannot run rather than that the type does not exist.

use sluice_engine::{Build, ConfigError, Registry, Transform};
use sluice_platform::built_without_aws;

fn unavailable(b: &Build<'_>) -> Result<Transform, ConfigError> {
    Err(b.error(
        None,
        built_without_aws(&format!("the {} transform", b.type_name())),
    ))
}

/// Registers every AWS-backed transform name as one that explains itself.
pub(crate) fn register(r: &mut Registry) {
    for name in crate::AWS_TRANSFORMS {
        r.transform(name, unavailable);
    }
}

#[cfg(test)]
mod tests {
    use sluice_engine::{Registry, json, testing};

    #[test]
    fn each_aws_transform_says_this_build_lacks_it() {
        let mut r = Registry::new();
        super::register(&mut r);
        for name in crate::AWS_TRANSFORMS {
            let e = testing::build(&r, json!({"type": name, "settings": {}}))
                .err()
                .unwrap_or_else(|| panic!("{name} built"))
                .to_string();
            let want = format!(
                "the {name} transform calls AWS, and this sluice was built without its `aws` feature"
            );
            assert!(e.contains(&want), "{name}: {e}");
        }
    }

    /// The list names exactly the AWS-backed transforms the full build registers.
    #[cfg(feature = "aws")]
    #[test]
    fn the_list_is_every_aws_transform() {
        let r = crate::registry();
        let registered: Vec<&str> = r
            .transform_types()
            .filter(|t| t.contains("_aws_"))
            .collect();
        assert_eq!(registered, crate::AWS_TRANSFORMS);
    }

    #[cfg(not(feature = "aws"))]
    #[test]
    fn the_aws_kv_store_and_secret_provider_say_this_build_lacks_them() {
        let r = crate::registry();
        for (cfg, want) in [
            (
                json!({"type": "meta_kv_store_lock", "settings": {"kv_store": {"type": "aws_dynamodb", "settings": {"aws": {"arn": "locks"}}}, "transforms": [{"type": "send_stdout"}]}}),
                "settings.kv_store.type: the aws_dynamodb kv store calls AWS",
            ),
            (
                json!({"type": "enrich_kv_store_item_get", "settings": {"kv_store": {"type": "aws_dynamodb", "settings": {"aws": {"arn": "items"}}}, "object": {"source_key": "k", "target_key": "v"}}}),
                "settings.kv_store.type: the aws_dynamodb kv store calls AWS",
            ),
            (
                json!({"type": "utility_secret", "settings": {"secret": {"type": "aws_secrets_manager", "settings": {"id": "b", "aws": {"arn": "api-key"}}}}}),
                "settings.secret.type: the aws_secrets_manager secret provider calls AWS",
            ),
        ] {
            let e = testing::build(&r, cfg.clone()).err().unwrap().to_string();
            assert!(e.contains(want), "{cfg}: {e}");
        }
    }
}
