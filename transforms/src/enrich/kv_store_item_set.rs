//! `enrich_kv_store_item_set` (and its deprecated name `enrich_kv_store_set`): stores the
//! value at `object.target_key` in a kv store under the key at `object.source_key`; the
//! message passes unchanged.
//!
//! Settings as Substation's (note the direction: `source_key` is the **key**,
//! `target_key` the **value**): `kv_store` (required; a store that can be written:
//! `memory` or `aws_dynamodb`), `object.source_key`, `object.target_key` (both required),
//! `object.ttl_key`, `ttl_offset` (`0s`), `prefix`, `close_kv_store` (false). The TTL is
//! described in [`super::kv_store`], with what sluice does differently from Substation;
//! here also: a message without a value at `object.target_key` stores nothing (Substation
//! stores null, replacing what was there).

use sluice_engine::{Build, ConfigError, Message, StatefulTransform, TransformError, async_trait};

use super::kv_store::{Common, SetSettings, Ttl, failed};

/// The `enrich_kv_store_item_set` transform.
pub(crate) struct EnrichKvStoreItemSet {
    common: Common,
    ttl: Ttl,
}

impl EnrichKvStoreItemSet {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: SetSettings = b.settings()?;
        let common = Common::build(
            b,
            &s.kv_store,
            (&s.object.source_key, &s.object.target_key),
            (
                "the key whose value is the kv store key",
                "the key whose value is stored",
            ),
            s.prefix,
            s.close_kv_store,
        )?;
        let ttl = Ttl::build(b, &s.object.ttl_key, s.ttl_offset)?;
        Ok(EnrichKvStoreItemSet { common, ttl })
    }
}

#[async_trait]
impl StatefulTransform for EnrichKvStoreItemSet {
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
        let value = msg.get(&self.common.target).map(|v| v.into_owned());
        if let (Some(key), Some(value)) = (self.common.key(&msg), value) {
            let ttl = self.ttl.of(&msg)?;
            self.common
                .store
                .set(&key, value, ttl)
                .await
                .map_err(failed)?;
        }
        out.push(msg);
        Ok(())
    }
}

impl EnrichKvStoreItemSet {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.common.is_stateful();
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// What registers the `enrich_kv_store_item_set` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_kv_store_item_set",
    // Substation's deprecated name, which its library (and so sluice's) still emits.
    aliases: &["enrich_kv_store_set"],
    library: "sub.tf.enrich.kv_store.iset",
    summary: "stores a value in a kv store under a key",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};
    use std::time::{SystemTime, UNIX_EPOCH};

    fn now() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    /// Runs `inputs` through an item_set into a memory store of capacity `cap`, then
    /// reads `key` back with an item_get; returns the set's outputs and what the get found.
    fn set_then_get(
        cap: u32,
        settings: sluice_engine::Value,
        inputs: &[&str],
        key: &str,
    ) -> (Vec<String>, String) {
        let r = registry();
        // Built in one context, the transforms share their kv stores.
        let ctx = sluice_engine::Context::new();
        let mem = json!({"type": "memory", "settings": {"capacity": cap}});
        let mut s = json!({"kv_store": mem, "object": {"source_key": "k", "target_key": "v"}});
        if let (sluice_engine::Value::Object(s), sluice_engine::Value::Object(extra)) =
            (&mut s, settings)
        {
            for (k, v) in extra.iter() {
                s.insert(k.as_str(), v.clone());
            }
        }
        let set = testing::build_in(
            &r,
            &ctx,
            json!({"type": "enrich_kv_store_item_set", "settings": s}),
        )
        .unwrap();
        let outs = testing::run(set, inputs).unwrap();
        let get = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_item_get", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "got"}}}),
        )
        .unwrap();
        let got = testing::run(get, &[&format!(r#"{{"k":"{key}"}}"#)]).unwrap();
        (outs, got[0].clone())
    }

    #[test]
    fn sets_table() {
        let t = now();
        // (capacity, extra settings, inputs, key read back, what the get writes)
        let cases = [
            (
                101,
                json!({}),
                vec![r#"{"k":"a","v":{"n":1}}"#],
                "a",
                r#"{"k":"a","got":{"n":1}}"#,
            ),
            // The later message wins.
            (
                102,
                json!({}),
                vec![r#"{"k":"a","v":1}"#, r#"{"k":"a","v":2}"#],
                "a",
                r#"{"k":"a","got":2}"#,
            ),
            // No value: nothing stored; no key: nothing stored.
            (
                103,
                json!({}),
                vec![r#"{"k":"a","v":1}"#, r#"{"k":"a"}"#, r#"{"v":3}"#],
                "a",
                r#"{"k":"a","got":1}"#,
            ),
            // A TTL in the past (event time + offset): gone when read.
            (
                104,
                json!({"object": {"source_key": "k", "target_key": "v", "ttl_key": "t"}, "ttl_offset": "1s"}),
                vec![r#"{"k":"a","v":1,"t":1000}"#],
                "a",
                r#"{"k":"a","got":null}"#,
            ),
            // Event time in ms, an hour ahead: still there.
            (
                105,
                json!({"object": {"source_key": "k", "target_key": "v", "ttl_key": "t"}}),
                vec![Box::leak(
                    format!(r#"{{"k":"a","v":1,"t":{}}}"#, (t + 3600) * 1000).into_boxed_str(),
                )],
                "a",
                r#"{"k":"a","got":1}"#,
            ),
            (
                106,
                json!({"ttl_offset": "1h"}),
                vec![r#"{"k":"a","v":true}"#],
                "a",
                r#"{"k":"a","got":true}"#,
            ),
            (
                107,
                json!({"prefix": "p"}),
                vec![r#"{"k":"a","v":1}"#],
                "p:a",
                r#"{"k":"p:a","got":1}"#,
            ),
        ];
        for (cap, settings, inputs, key, want) in cases {
            let (outs, got) = set_then_get(cap, settings, &inputs, key);
            let inputs: Vec<String> = inputs.iter().map(|s| s.to_string()).collect();
            assert_eq!(outs, inputs, "messages pass unchanged");
            assert_eq!(got, want, "{cap}");
        }
    }

    #[test]
    fn errors() {
        let r = registry();
        // Built in one context, the transforms share their kv stores.
        let ctx = sluice_engine::Context::new();
        let mem = json!({"type": "memory", "settings": {"capacity": 108}});
        for (input, want) in [
            (
                r#"{"k":"a","v":1}"#,
                r#"object.ttl_key "t": no value in the message"#,
            ),
            (
                r#"{"k":"a","v":1,"t":"soon"}"#,
                r#"object.ttl_key "t": soon is not a whole number"#,
            ),
            (
                r#"{"k":"a","v":1,"t":-5}"#,
                r#"object.ttl_key "t": negative"#,
            ),
        ] {
            let set = testing::build_in(&r, &ctx,
                json!({"type": "enrich_kv_store_item_set", "settings": {"kv_store": mem, "object": {"source_key": "k", "target_key": "v", "ttl_key": "t"}}}),
            )
            .unwrap();
            let e = testing::run(set, &[input]).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let txt = json!({"type": "text_file", "settings": {"file": "list.txt"}});
        let set = testing::build_in(&r, &ctx,
            json!({"type": "enrich_kv_store_set", "settings": {"kv_store": txt, "object": {"source_key": "k", "target_key": "v"}}}),
        )
        .unwrap();
        let e = testing::run(set, &[r#"{"k":"a","v":1}"#])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("text_file list.txt: set is not supported: the store is read-only"),
            "{e}"
        );
        testing::assert_config_errors(
            &r,
            "enrich_kv_store_item_set",
            &[
                (
                    json!({"kv_store": mem, "object": {"source_key": "k", "target_key": "v"}, "ttl_offset": "1d"}),
                    "settings.ttl_offset",
                ),
                (
                    json!({"kv_store": mem, "object": {"source_key": "k"}}),
                    "settings.object.target_key: missing required option",
                ),
            ],
        );
    }
}
