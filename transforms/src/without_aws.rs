//! A build without the `aws` feature still knows the AWS-backed types' names, so a config
//! that uses one is told why it cannot run rather than that the type does not exist. Each
//! family registers its AWS-backed types with [`crate::register_aws`], which in such a
//! build registers their descriptors here.

use sluice_engine::{Build, ConfigError, Registry, Transform, TypeInfo};
use sluice_platform::built_without_aws;

fn unavailable(b: &Build<'_>) -> Result<Transform, ConfigError> {
    Err(b.error(
        None,
        built_without_aws(&format!("the {} transform", b.type_name())),
    ))
}

/// Registers the AWS-backed transform `info` describes as one that explains itself.
pub(crate) fn register(r: &mut Registry, info: &'static TypeInfo) {
    r.transform(info, unavailable);
}

#[cfg(test)]
mod tests {
    use sluice_engine::{Registry, json, testing};

    /// The AWS-backed transforms, from their descriptors.
    fn aws_types() -> Vec<&'static sluice_engine::TypeInfo> {
        crate::registry()
            .transform_infos()
            .filter(|i| i.calls_aws())
            .collect()
    }

    #[test]
    fn each_aws_transform_says_this_build_lacks_it() {
        let mut r = Registry::new();
        let infos = aws_types();
        assert!(infos.len() >= 10, "{} AWS-backed types", infos.len());
        for info in &infos {
            super::register(&mut r, info);
        }
        for name in infos.iter().flat_map(|i| i.names()) {
            let e = testing::build(&r, json!({"type": name, "settings": {}}))
                .err()
                .unwrap_or_else(|| panic!("{name} built"))
                .to_string();
            let want = format!(
                "the {name} transform calls AWS, and this sluice was built without its `aws` feature"
            );
            assert!(e.contains(&want), "{name}: {e}");
            assert!(crate::calls_aws(name), "{name}");
        }
    }

    /// The descriptors say "calls AWS" of exactly the types whose names say so, and of no
    /// condition.
    #[test]
    fn the_descriptors_name_every_aws_transform() {
        let r = crate::registry();
        let by_name: Vec<&str> = r
            .transform_types()
            .filter(|t| t.contains("_aws_"))
            .collect();
        let by_info: Vec<&str> = aws_types().iter().flat_map(|i| i.names()).collect();
        assert_eq!(by_name, by_info);
        assert!(r.condition_infos().all(|i| !i.calls_aws()));
        assert!(crate::calls_aws("aws_dynamodb") && crate::calls_aws("aws_secrets_manager"));
        assert!(!crate::calls_aws("send_stdout") && !crate::calls_aws("memory"));
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
