//! The `aws_dynamodb` kv store as an item store, for the `enrich_kv_store_*` transforms:
//! the same table settings as the lock store ([`super`]), one item per key.
//!
//! An item is `{partition_key: KEY, [sort_key: "substation:kv_store"], value: VALUE,
//! [ttl: EPOCH SECONDS]}`, with the attribute names of `attributes.*`, as Substation
//! writes it (`reference/substation.md` §5.2), so a table shared with Substation keeps
//! working. `attributes.value` is required for items.
//!
//! - get: `GetItem`, strongly consistent when `consistent_read` is true; the value
//!   attribute as plain JSON (`S` a string, `N` a number, `M` an object, `L` an array, a
//!   string set an array of strings...). An item whose `ttl` has passed is not returned,
//!   whether DynamoDB has deleted it yet or not.
//! - set: `PutItem` of the whole item (a value without a TTL replaces one with).
//! - set_add: `UpdateItem` with `ADD value :strings` (a string set, `SS`) and, with a TTL,
//!   `SET ttl = :ttl`.
//!
//! Where this differs from Substation: `consistent_read` is used (Substation ignores it);
//! `get` honours the TTL (Substation returns expired items until DynamoDB deletes them,
//! which can take days); `set_add` always adds strings (Substation picks a number, binary
//! or string set by the value's Go type, writes numbers with six decimals, and fails on
//! booleans, objects and empty arrays), adds nothing for an empty array, and leaves the
//! TTL alone when there is none (Substation writes a TTL of 0, which makes DynamoDB delete
//! the set at its next sweep).
//!
//! Permissions: `dynamodb:GetItem`, `dynamodb:PutItem`, `dynamodb:UpdateItem` on the table.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::types::AttributeValue;
use sluice_engine::{Value, async_trait};

use super::{DynamoDbStore, number, parse_number};
use crate::kv_store::item::store::{ItemError, ItemStore};
use crate::kv_store::lock::{LockStore, StoreError};
use sluice_platform::aws::dynamodb_attributes::{attribute_json, attribute_value};

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn failed(e: StoreError) -> ItemError {
    ItemError::Failed(e.0)
}

impl DynamoDbStore {
    /// The value attribute's name (checked when the store is built for items).
    fn value_attribute(&self) -> Result<&str, ItemError> {
        self.table.attributes.value.as_deref().ok_or_else(|| {
            ItemError::Failed(format!(
                "{}: attributes.value is not set",
                LockStore::describe(self)
            ))
        })
    }
}

#[async_trait]
impl ItemStore for DynamoDbStore {
    fn describe(&self) -> String {
        LockStore::describe(self)
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError> {
        let value = self.value_attribute()?;
        let client = self.client().await.map_err(failed)?;
        let out = client
            .get_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(key)))
            .consistent_read(self.table.consistent_read)
            .send()
            .await
            .map_err(|e| failed(self.sdk_fail(&format!("GetItem of key {key:?}"), &e)))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        if let Some(ttl) = item
            .get(&self.table.attributes.ttl)
            .and_then(|v| v.as_n().ok())
            .map(|n| parse_number(n))
            && ttl > 0
            && ttl <= now_s()
        {
            return Ok(None);
        }
        match item.get(value) {
            None => Ok(None),
            Some(v) => attribute_json(v).map(Some).map_err(|e| {
                failed(self.fail(&format!("reading key {key:?}"), format!("{value}: {e}")))
            }),
        }
    }

    async fn set(&self, key: &str, v: Value, ttl: Option<i64>) -> Result<(), ItemError> {
        let value = self.value_attribute()?;
        let client = self.client().await.map_err(failed)?;
        let mut item: HashMap<String, AttributeValue> = self.key(key);
        item.insert(value.to_string(), attribute_value(&v));
        if let Some(ttl) = ttl {
            item.insert(self.table.attributes.ttl.clone(), number(ttl));
        }
        client
            .put_item()
            .table_name(&self.table.name)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| failed(self.sdk_fail(&format!("PutItem of key {key:?}"), &e)))?;
        Ok(())
    }

    async fn set_add(
        &self,
        key: &str,
        values: Vec<String>,
        ttl: Option<i64>,
    ) -> Result<(), ItemError> {
        let value = self.value_attribute()?;
        let mut clauses = Vec::new();
        let mut names = HashMap::new();
        let mut values_map = HashMap::new();
        if !values.is_empty() {
            clauses.push("ADD #v :members".to_string());
            names.insert("#v".to_string(), value.to_string());
            let mut members = values;
            members.sort();
            members.dedup();
            values_map.insert(":members".to_string(), AttributeValue::Ss(members));
        }
        if let Some(ttl) = ttl {
            clauses.push("SET #ttl = :ttl".to_string());
            names.insert("#ttl".to_string(), self.table.attributes.ttl.clone());
            values_map.insert(":ttl".to_string(), number(ttl));
        }
        if clauses.is_empty() {
            return Ok(());
        }
        let client = self.client().await.map_err(failed)?;
        client
            .update_item()
            .table_name(&self.table.name)
            .set_key(Some(self.key(key)))
            .update_expression(clauses.join(" "))
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values_map))
            .send()
            .await
            .map_err(|e| failed(self.sdk_fail(&format!("UpdateItem of key {key:?}"), &e)))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::operation::get_item::{GetItemInput, GetItemOutput};
    use aws_sdk_dynamodb::operation::put_item::{PutItemInput, PutItemOutput};
    use aws_sdk_dynamodb::operation::update_item::{UpdateItemInput, UpdateItemOutput};
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use sluice_engine::json;
    use sluice_engine::testing::block_on;
    use std::sync::{Arc, Mutex};

    fn store(settings: Value, rules: &[&Rule]) -> DynamoDbStore {
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules);
        DynamoDbStore::from_settings(&settings)
            .unwrap()
            .with_client(client)
    }

    fn settings() -> Value {
        json!({"aws": {"arn": "arn:aws:dynamodb:us-east-1:1:table/items"},
               "attributes": {"partition_key": "PK", "sort_key": "SK", "value": "v", "ttl": "exp"},
               "consistent_read": true})
    }

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_string())
    }

    #[test]
    fn get_reads_the_value_and_honours_the_ttl() {
        let seen: Arc<Mutex<Vec<GetItemInput>>> = Arc::default();
        let sn = seen.clone();
        let rule = mock!(Client::get_item)
            .match_requests(move |r: &GetItemInput| {
                sn.lock().unwrap().push(r.clone());
                true
            })
            .then_compute_output(|r: &GetItemInput| {
                let k = r.key().unwrap()["PK"].as_s().unwrap().clone();
                let mut item = r.key().unwrap().clone();
                match k.as_str() {
                    "live" => {
                        item.insert(
                            "v".into(),
                            AttributeValue::M(HashMap::from([(
                                "n".into(),
                                AttributeValue::N("1".into()),
                            )])),
                        );
                        item.insert("exp".into(), number(now_s() + 100));
                    }
                    "expired" => {
                        item.insert("v".into(), s("old"));
                        item.insert("exp".into(), number(now_s() - 1));
                    }
                    "novalue" => {}
                    _ => return GetItemOutput::builder().build(),
                }
                GetItemOutput::builder().set_item(Some(item)).build()
            });
        let st = store(settings(), &[&rule]);
        assert_eq!(block_on(st.get("live")).unwrap(), Some(json!({"n": 1})));
        assert_eq!(block_on(st.get("expired")).unwrap(), None);
        assert_eq!(block_on(st.get("novalue")).unwrap(), None);
        assert_eq!(block_on(st.get("absent")).unwrap(), None);
        let r = &seen.lock().unwrap()[0];
        assert_eq!(r.table_name(), Some("items"));
        assert_eq!(r.consistent_read(), Some(true));
        assert_eq!(r.key().unwrap()["SK"], s("substation:kv_store"));
    }

    #[test]
    fn set_puts_the_whole_item() {
        let seen: Arc<Mutex<Vec<PutItemInput>>> = Arc::default();
        let sn = seen.clone();
        let rule = mock!(Client::put_item)
            .match_requests(move |r: &PutItemInput| {
                sn.lock().unwrap().push(r.clone());
                true
            })
            .then_output(|| PutItemOutput::builder().build());
        let st = store(settings(), &[&rule]);
        block_on(st.set("k", json!(["a", 1]), Some(1_700_000_000))).unwrap();
        block_on(st.set("k", json!("b"), None)).unwrap();
        let seen = seen.lock().unwrap();
        let item = seen[0].item().unwrap();
        assert_eq!(item["PK"], s("k"));
        assert_eq!(item["SK"], s("substation:kv_store"));
        assert_eq!(
            item["v"],
            AttributeValue::L(vec![s("a"), AttributeValue::N("1".into())])
        );
        assert_eq!(item["exp"], number(1_700_000_000));
        assert!(!seen[1].item().unwrap().contains_key("exp"));
    }

    #[test]
    fn set_add_adds_strings_and_touches_the_ttl_only_when_given() {
        let seen: Arc<Mutex<Vec<UpdateItemInput>>> = Arc::default();
        let sn = seen.clone();
        let rule = mock!(Client::update_item)
            .match_requests(move |r: &UpdateItemInput| {
                sn.lock().unwrap().push(r.clone());
                true
            })
            .then_output(|| UpdateItemOutput::builder().build());
        let st = store(settings(), &[&rule]);
        block_on(st.set_add("k", vec!["b".into(), "a".into(), "b".into()], Some(5))).unwrap();
        block_on(st.set_add("k", vec!["c".into()], None)).unwrap();
        block_on(st.set_add("k", vec![], None)).unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "nothing to add and no TTL: no call");
        assert_eq!(
            seen[0].update_expression(),
            Some("ADD #v :members SET #ttl = :ttl")
        );
        assert_eq!(
            seen[0].expression_attribute_values().unwrap()[":members"],
            AttributeValue::Ss(vec!["a".into(), "b".into()])
        );
        assert_eq!(seen[1].update_expression(), Some("ADD #v :members"));
        assert_eq!(seen[1].expression_attribute_names().unwrap()["#v"], "v");
    }

    #[test]
    fn errors_name_the_table_and_key() {
        let rule = mock!(Client::get_item)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}"#.into()),
            )
            .repeatedly()
            .build();
        let st = store(settings(), &[&rule]);
        let e = block_on(st.get("k")).unwrap_err().to_string();
        assert!(
            e.starts_with("aws_dynamodb table items: GetItem of key \"k\": "),
            "{e}"
        );
        assert!(e.contains("ResourceNotFoundException"), "{e}");
    }
}
