//! `enrich_kv_store_set_add`: adds the value at `object.target_key` to the set of strings
//! a kv store keeps under the key at `object.source_key`; the message passes unchanged.
//! An array adds each of its elements. `enrich_kv_store_item_get` reads the set back as
//! an array of strings.
//!
//! Settings as `enrich_kv_store_item_set` (Substation's): `kv_store` (required; `memory`
//! or `aws_dynamodb`), `object.source_key` (the key) and `object.target_key` (the value),
//! both required, `object.ttl_key`, `ttl_offset` (`0s`), `prefix`, `close_kv_store`.
//! Each add sets the set's TTL when there is one. What sluice does differently from
//! Substation is in [`super::kv_store`]; here also: members are always strings (a number
//! is added as its text; Substation's DynamoDB store makes number sets with six decimals
//! and fails on booleans and objects), an empty array adds nothing, and an add without a
//! TTL leaves the set's TTL alone (Substation's DynamoDB store writes a TTL of 0, which
//! makes DynamoDB delete the set).

use sluice_engine::{Build, ConfigError, Message, StatefulTransform, TransformError, async_trait};

use super::kv_store::{Common, SetSettings, Ttl, failed};
use crate::kv_store::item::set_members;

/// The `enrich_kv_store_set_add` transform.
pub(crate) struct EnrichKvStoreSetAdd {
    common: Common,
    ttl: Ttl,
}

impl EnrichKvStoreSetAdd {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: SetSettings = b.settings()?;
        let common = Common::build(
            b,
            &s.kv_store,
            (&s.object.source_key, &s.object.target_key),
            (
                "the key whose value is the kv store key",
                "the key whose value is added to the set",
            ),
            s.prefix,
            s.close_kv_store,
        )?;
        let ttl = Ttl::build(b, &s.object.ttl_key, s.ttl_offset)?;
        Ok(EnrichKvStoreSetAdd { common, ttl })
    }
}

#[async_trait]
impl StatefulTransform for EnrichKvStoreSetAdd {
    /// A kv store is seen by every message: Substation's order (this transform over the
    /// whole batch, then the next) decides what a later lookup finds.
    fn shares_state(&self) -> bool {
        true
    }

    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            self.common.ctrl(msg, out).await;
            return Ok(());
        }
        let members = msg.get(&self.common.target).map(|v| set_members(&v));
        if let (Some(key), Some(members)) = (self.common.key(&msg), members) {
            let ttl = self.ttl.of(&msg)?;
            self.common
                .store
                .set_add(&key, members, ttl)
                .await
                .map_err(failed)?;
        }
        out.push(msg);
        Ok(())
    }
}

impl EnrichKvStoreSetAdd {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.common.is_stateful();
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// What registers the `enrich_kv_store_set_add` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_kv_store_set_add",
    aliases: &[],
    library: "sub.tf.enrich.kv_store.sadd",
    summary: "adds a value to the set of strings a kv store holds under a key",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn adds_table() {
        let r = registry();
        // Built in one context, the transforms share their kv stores.
        let ctx = sluice_engine::Context::new();
        // (memory capacity, inputs, key read back, what the get writes)
        let cases = [
            (
                201,
                vec![
                    r#"{"k":"u","v":"a"}"#,
                    r#"{"k":"u","v":"b"}"#,
                    r#"{"k":"u","v":"a"}"#,
                ],
                "u",
                r#"{"k":"u","got":["a","b"]}"#,
            ),
            (
                202,
                vec![r#"{"k":"u","v":["a",2,true]}"#, r#"{"k":"u","v":[]}"#],
                "u",
                r#"{"k":"u","got":["a","2","true"]}"#,
            ),
            (
                203,
                vec![r#"{"k":"u"}"#, r#"{"v":"x"}"#],
                "u",
                r#"{"k":"u","got":null}"#,
            ),
        ];
        for (cap, inputs, key, want) in cases {
            let mem = json!({"type": "memory", "settings": {"capacity": cap}});
            let add = testing::build_in(&r, &ctx,
                json!({"type": "enrich_kv_store_set_add", "settings": {"kv_store": mem, "ttl_offset": "1h", "object": {"source_key": "k", "target_key": "v"}}}),
            )
            .unwrap();
            let outs = testing::run(add, &inputs).unwrap();
            assert_eq!(
                outs,
                inputs.iter().map(|s| s.to_string()).collect::<Vec<_>>()
            );
            let get = testing::build_in(&r, &ctx,
                json!({"type": "enrich_kv_store_item_get", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "got"}}}),
            )
            .unwrap();
            let got = testing::run(get, &[&format!(r#"{{"k":"{key}"}}"#)]).unwrap();
            assert_eq!(got, vec![want], "{cap}");
        }
    }

    /// As in Substation, the add runs over the whole batch before the lookup after it: every
    /// message of the batch sees every addition (run message by message, the first would see
    /// only its own).
    #[test]
    fn a_lookup_after_an_add_sees_the_whole_batch() {
        let mem = json!({"type": "memory", "settings": {"capacity": 205}});
        let p = testing::build_pipeline(
            &registry(),
            json!([
                {"type": "object_copy", "settings": {"object": {"source_key": "v", "target_key": "w"}}},
                {"type": "enrich_kv_store_set_add", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "w"}}},
                {"type": "enrich_kv_store_item_get", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "seen"}}},
            ]),
        )
        .unwrap();
        assert_eq!(
            testing::run_pipeline(&p, &[r#"{"k":"u","v":"a"}"#, r#"{"k":"u","v":"b"}"#]).unwrap(),
            [
                r#"{"k":"u","v":"a","w":"a","seen":["a","b"]}"#,
                r#"{"k":"u","v":"b","w":"b","seen":["a","b"]}"#
            ]
        );
    }

    #[test]
    fn errors() {
        let r = registry();
        // Built in one context, the transforms share their kv stores.
        let ctx = sluice_engine::Context::new();
        let mem = json!({"type": "memory", "settings": {"capacity": 204}});
        let set = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_item_set", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "v"}}}),
        )
        .unwrap();
        testing::run(set, &[r#"{"k":"plain","v":1}"#]).unwrap();
        let add = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_set_add", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "v"}}}),
        )
        .unwrap();
        let e = testing::run(add, &[r#"{"k":"plain","v":"x"}"#])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory: bad key \"plain\": it holds a value that is not a set"),
            "{e}"
        );
        let csv = json!({"type": "csv_file", "settings": {"file": "x.csv", "column": "id"}});
        let add = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_set_add", "settings": {"kv_store": csv, "object": {"source_key": "k", "target_key": "v"}}}),
        )
        .unwrap();
        let e = testing::run(add, &[r#"{"k":"a","v":"x"}"#])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("csv_file x.csv: set_add is not supported"),
            "{e}"
        );
        testing::assert_config_errors(
            &r,
            "enrich_kv_store_set_add",
            &[(
                json!({"object": {"source_key": "k", "target_key": "v"}}),
                "settings.kv_store: missing required option",
            )],
        );
    }
}
