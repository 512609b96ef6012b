//! `enrich_kv_store_item_get` (and its deprecated name `enrich_kv_store_get`): looks the
//! value at `object.source_key` up in a kv store and writes what it finds to
//! `object.target_key`, null when the store has nothing under the key (Substation's
//! behaviour).
//!
//! Settings as Substation's: `kv_store` (required), `object.source_key` (the key,
//! required), `object.target_key` (required), `prefix` (the key becomes `prefix:key`),
//! `close_kv_store` (false). The store is read on first use, not when the config is built.
//! What it does differently from Substation is in [`super::kv_store`].

use sluice_engine::{
    Build, ConfigError, Message, StatefulTransform, TransformError, Value, async_trait,
};

use super::kv_store::{Common, GetSettings, failed};

/// The `enrich_kv_store_item_get` transform.
pub(crate) struct EnrichKvStoreItemGet {
    common: Common,
}

impl EnrichKvStoreItemGet {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: GetSettings = b.settings()?;
        let common = Common::build(
            b,
            &s.kv_store,
            (&s.object.source_key, &s.object.target_key),
            (
                "the key whose value is looked up",
                "the key the value found is written to",
            ),
            s.prefix,
            s.close_kv_store,
        )?;
        Ok(EnrichKvStoreItemGet { common })
    }
}

#[async_trait]
impl StatefulTransform for EnrichKvStoreItemGet {
    /// A kv store is seen by every message: Substation's order (this transform over the
    /// whole batch, then the next) decides what a later lookup finds.
    fn shares_state(&self) -> bool {
        true
    }

    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            self.common.ctrl(msg, out).await;
            return Ok(());
        }
        let Some(key) = self.common.key(&msg) else {
            out.push(msg);
            return Ok(());
        };
        let found = self.common.store.get(&key).await.map_err(failed)?;
        msg.set(&self.common.target, found.unwrap_or(Value::Null))?;
        out.push(msg);
        Ok(())
    }
}

impl EnrichKvStoreItemGet {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.common.is_stateful();
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// What registers the `enrich_kv_store_item_get` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_kv_store_item_get",
    // Substation's deprecated name, which its library (and so sluice's) still emits.
    aliases: &["enrich_kv_store_get"],
    library: "sub.tf.enrich.kv_store.iget",
    summary: "the value a kv store holds under a key",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn lookups_table() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("users.csv");
        std::fs::write(&csv, "id,name\nu1,ann\n").unwrap();
        let txt = dir.path().join("bad.txt");
        std::fs::write(&txt, "evil.example\n").unwrap();
        let csv_store = json!({"type": "csv_file", "settings": {"file": csv.to_str().unwrap(), "column": "id"}});
        let txt_store = json!({"type": "text_file", "settings": {"file": txt.to_str().unwrap()}});
        let r = registry();
        // Built in one context, the transforms share their kv stores.
        let ctx = sluice_engine::Context::new();
        // (settings, input, output)
        let cases = [
            (
                json!({"kv_store": csv_store, "object": {"source_key": "user", "target_key": "u"}}),
                r#"{"user":"u1"}"#,
                r#"{"user":"u1","u":{"name":"ann"}}"#,
            ),
            (
                json!({"kv_store": csv_store, "object": {"source_key": "user", "target_key": "u"}}),
                r#"{"user":"u2"}"#,
                r#"{"user":"u2","u":null}"#,
            ),
            // No key: unchanged, nothing looked up.
            (
                json!({"kv_store": csv_store, "object": {"source_key": "user", "target_key": "u"}}),
                r#"{"other":1}"#,
                r#"{"other":1}"#,
            ),
            (
                json!({"kv_store": txt_store, "object": {"source_key": "d", "target_key": "meta bad"}}),
                r#"{"d":"evil.example"}"#,
                r#"{"d":"evil.example"}"#,
            ),
            (
                json!({"kv_store": txt_store, "object": {"source_key": "d", "target_key": "bad"}}),
                r#"{"d":"fine.example"}"#,
                r#"{"d":"fine.example","bad":false}"#,
            ),
        ];
        for (settings, input, want) in cases {
            let t = testing::build_in(
                &r,
                &ctx,
                json!({"type": "enrich_kv_store_item_get", "settings": settings}),
            )
            .unwrap();
            let out = testing::run(t, &[input]).unwrap();
            assert_eq!(out, vec![want.to_string()], "{input}");
        }
        // The deprecated name builds the same transform.
        let t = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_get", "settings": {"kv_store": csv_store, "object": {"source_key": "user", "target_key": "u"}}}),
        )
        .unwrap();
        assert_eq!(
            testing::run(t, &[r#"{"user":"u1"}"#]).unwrap(),
            vec![r#"{"user":"u1","u":{"name":"ann"}}"#]
        );
    }

    #[test]
    fn prefix_and_store_errors() {
        let r = registry();
        // Built in one context, the transforms share their kv stores.
        let ctx = sluice_engine::Context::new();
        let mem = json!({"type": "memory", "settings": {"capacity": 7}});
        let set = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_item_set", "settings": {"kv_store": mem, "prefix": "p", "object": {"source_key": "k", "target_key": "v"}}}),
        )
        .unwrap();
        testing::run(set, &[r#"{"k":"a","v":{"x":1}}"#]).unwrap();
        for (prefix, want) in [
            ("p", r#"{"k":"a","got":{"x":1}}"#),
            ("", r#"{"k":"a","got":null}"#),
        ] {
            let get = testing::build_in(&r, &ctx,
                json!({"type": "enrich_kv_store_item_get", "settings": {"kv_store": mem, "prefix": prefix, "object": {"source_key": "k", "target_key": "got"}}}),
            )
            .unwrap();
            assert_eq!(testing::run(get, &[r#"{"k":"a"}"#]).unwrap(), vec![want]);
        }
        let missing = json!({"type": "json_file", "settings": {"file": "/nonexistent/kv.json"}});
        let get = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_item_get", "settings": {"kv_store": missing, "object": {"source_key": "k", "target_key": "got"}}}),
        )
        .unwrap();
        let e = testing::run(get, &[r#"{"k":"a"}"#])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("json_file: reading /nonexistent/kv.json: "),
            "{e}"
        );
    }

    #[test]
    fn settings_errors_name_the_field() {
        let r = registry();
        let mem = json!({"type": "memory"});
        testing::assert_config_errors(
            &r,
            "enrich_kv_store_item_get",
            &[
                (
                    json!({"object": {"source_key": "k", "target_key": "v"}}),
                    "settings.kv_store: missing required option",
                ),
                (
                    json!({"kv_store": mem, "object": {"target_key": "v"}}),
                    "settings.object.source_key: missing required option",
                ),
                (
                    json!({"kv_store": mem, "object": {"source_key": "k"}}),
                    "settings.object.target_key: missing required option",
                ),
                (
                    json!({"kv_store": {"type": "memroy"}, "object": {"source_key": "k", "target_key": "v"}}),
                    "settings.kv_store.type: unknown kv store type \"memroy\" (did you mean \"memory\"?)",
                ),
                (
                    json!({"kv_store": {"type": "sqlite", "settings": {"file": "x"}}, "object": {"source_key": "k", "target_key": "v"}}),
                    "settings.kv_store.type: the sqlite kv store holds locks only",
                ),
                (
                    json!({"kv_store": {"type": "memory", "settings": {"capacity": 0}}, "object": {"source_key": "k", "target_key": "v"}}),
                    "settings.kv_store.settings.capacity: must be at least 1",
                ),
                (
                    json!({"kv_store": {"type": "aws_dynamodb", "settings": {"aws": {"arn": "items"}, "attributes": {"partition_key": "pk"}}}, "object": {"source_key": "k", "target_key": "v"}}),
                    if cfg!(feature = "aws") {
                        "settings.kv_store.settings.attributes.value: missing required option"
                    } else {
                        "settings.kv_store.type: the aws_dynamodb kv store calls AWS"
                    },
                ),
                (
                    json!({"kv_store": mem, "close_kv_store": "yes", "object": {"source_key": "k", "target_key": "v"}}),
                    "settings.close_kv_store",
                ),
            ],
        );
    }
}
