//! `enrich_aws_dynamodb_query`: queries a DynamoDB table by the key found at
//! `object.source_key` and writes the items, as plain JSON, as an array at
//! `object.target_key`.
//!
//! Substation compatibility (`reference/substation.md` §2.1 row 7): the same type name,
//! settings and default id. The value at the source key is the partition key (its text, as
//! GJSON's `String()` gives it, sent as a string, `S`), or, when `attributes.sort_key` is
//! set, it may be a two-element array `[partition key, sort key]` (both texts) to match the
//! sort key too; any other array passes the message through unchanged, as does a message
//! without a value at the source key, and a query that finds nothing. `limit` items at most
//! (the library's default is 1), in sort key order, descending unless `scan_index_forward`
//! is true: with the library's defaults, the item with the greatest sort key. Items become
//! plain JSON ([`item_json`](sluice_platform::aws::dynamodb_attributes::item_json)); their keys are sorted, as Go's JSON encoder sorts map keys.
//!
//! Where sluice differs from Substation:
//!
//! - **`limit`**: the number of items wanted; pages are followed (`LastEvaluatedKey`) until
//!   that many were found or the partition is exhausted. `0` (the built-in default) means
//!   every item of the key. Substation sends `limit` as the one call's `Limit` (so `0`, its
//!   Go default, is rejected by DynamoDB) and ignores further pages.
//! - **Numbers** keep their value where JSON numbers can: integers within 64 bits exactly
//!   (Substation decodes every number as a float, so integers beyond 2^53 change), others as
//!   the nearest double.
//! - **`aws.arn`** may be the table's ARN (its region is used; Substation passes the whole
//!   ARN as the table name) or its name (region from `AWS_REGION`).
//! - **Settings**: `object.source_key` is required (without it Substation passes every
//!   message through); an empty partition key value is an error before any call.
//!
//! Reads are eventually consistent, as in Substation. Throttling, 5xx and network errors
//! are retried by the SDK (`sluice_platform::aws`); what still fails is an error naming the table.
//! Permission: `dynamodb:Query` on the table.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait, value,
};
use tokio::sync::OnceCell;

use sluice_platform::aws::dynamodb_attributes::item_json;

use sluice_platform::aws::{
    AwsSettings, AwsTarget, check_role, lazy_client, non_empty, parse_dynamodb_table,
};

/// `attributes`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AttributeSettings {
    /// The table's partition key attribute (required).
    pub partition_key: Option<String>,
    /// The table's sort key attribute, to query by `[partition key, sort key]`.
    pub sort_key: Option<String>,
}

/// Settings of `enrich_aws_dynamodb_query`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The table (ARN or name) and the role.
    pub aws: AwsSettings,
    /// The key attributes' names.
    pub attributes: AttributeSettings,
    /// Items wanted at most; 0 means all.
    pub limit: u32,
    /// Ascending sort key order (default descending).
    pub scan_index_forward: bool,
    /// `source_key` (the key value) and `target_key` (where the items go); both required.
    pub object: ObjectSettings,
}

/// The `enrich_aws_dynamodb_query` transform.
pub(crate) struct EnrichAwsDynamodbQuery {
    table: String,
    target: AwsTarget,
    partition_key: String,
    sort_key: Option<String>,
    limit: u32,
    scan_index_forward: bool,
    source: Key,
    destination: Key,
    client: OnceCell<Client>,
}

impl EnrichAwsDynamodbQuery {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let arn = non_empty(s.aws.arn).ok_or_else(|| {
            b.field_error(
                "aws.arn",
                "missing required option: the table's ARN \
                 (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME) or its name",
            )
        })?;
        let (table, region) =
            parse_dynamodb_table(&arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let partition_key = non_empty(s.attributes.partition_key).ok_or_else(|| {
            b.field_error(
                "attributes.partition_key",
                "missing required option: the name of the table's partition key attribute",
            )
        })?;
        let sort_key = non_empty(s.attributes.sort_key);
        if sort_key.as_ref() == Some(&partition_key) {
            return Err(b.field_error(
                "attributes.sort_key",
                format!("{partition_key:?} is the partition key already"),
            ));
        }
        if s.limit > i32::MAX as u32 {
            return Err(b.field_error(
                "limit",
                format!("at most {} (DynamoDB's largest Limit)", i32::MAX),
            ));
        }
        let source = b
            .opt_key("object.source_key", &s.object.source_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.source_key",
                    "missing required option: the key whose value is the key to query",
                )
            })?;
        let destination = b
            .opt_key("object.target_key", &s.object.target_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.target_key",
                    "missing required option: the key the items are written to",
                )
            })?;
        Ok(EnrichAwsDynamodbQuery {
            table,
            target: AwsTarget {
                region,
                assume_role_arn: role,
                ..Default::default()
            },
            partition_key,
            sort_key,
            limit: s.limit,
            scan_index_forward: s.scan_index_forward,
            source,
            destination,
            client: OnceCell::new(),
        })
    }

    /// Uses `client` instead of making one (tests with mocked responses).
    #[cfg(test)]
    pub(crate) fn with_client(mut self, client: Client) -> Self {
        self.client = OnceCell::new_with(Some(client));
        self
    }

    fn fail(&self, why: impl std::fmt::Display) -> TransformError {
        TransformError::failed(format!("dynamodb table {}: {why}", self.table))
    }

    async fn client(&self) -> Result<&Client, TransformError> {
        lazy_client(
            &self.client,
            &self.target,
            || {
                format!(
                    "dynamodb table {}: no AWS region: give the table's ARN in aws.arn or set AWS_REGION",
                    self.table
                )
            },
            Client::new,
        )
        .await
    }

    /// The key values to query with: `(partition key, sort key)`; `None` when the value
    /// is an array that is not a `[partition key, sort key]` pair (the message passes).
    fn key_values(&self, v: &Value) -> Option<(String, Option<String>)> {
        match v {
            Value::Array(a) => match (a.as_slice(), &self.sort_key) {
                ([pk, sk], Some(_)) => Some((
                    value::to_text(pk).into_owned(),
                    Some(value::to_text(sk).into_owned()),
                )),
                _ => None,
            },
            other => Some((value::to_text(other).into_owned(), None)),
        }
    }

    /// Queries the items with these key values: up to `limit` (all when 0), following pages.
    async fn query(
        &self,
        pk: String,
        sk: Option<String>,
    ) -> Result<Vec<HashMap<String, AttributeValue>>, TransformError> {
        if pk.is_empty() {
            return Err(self.fail(format!(
                "the partition key value at {:?} is empty",
                self.source.as_str()
            )));
        }
        let client = self.client().await?;
        let mut condition = "#pk = :pk".to_string();
        let mut names = HashMap::from([("#pk".to_string(), self.partition_key.clone())]);
        let mut values = HashMap::from([(":pk".to_string(), AttributeValue::S(pk))]);
        if let (Some(name), Some(sk)) = (&self.sort_key, sk) {
            condition.push_str(" AND #sk = :sk");
            names.insert("#sk".into(), name.clone());
            values.insert(":sk".into(), AttributeValue::S(sk));
        }
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page_limit = match self.limit as usize {
                0 => None,
                n => Some((n - items.len()) as i32),
            };
            let out = client
                .query()
                .table_name(&self.table)
                .key_condition_expression(&condition)
                .set_expression_attribute_names(Some(names.clone()))
                .set_expression_attribute_values(Some(values.clone()))
                .scan_index_forward(self.scan_index_forward)
                .set_limit(page_limit)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| {
                    self.fail(format!(
                        "Query failed: {}",
                        sluice_platform::aws::describe_error(&e)
                    ))
                })?;
            start = out.last_evaluated_key;
            items.extend(out.items.unwrap_or_default());
            let enough = self.limit != 0 && items.len() >= self.limit as usize;
            if enough || start.as_ref().is_none_or(|k| k.is_empty()) {
                items.truncate(if self.limit == 0 {
                    usize::MAX
                } else {
                    self.limit as usize
                });
                return Ok(items);
            }
        }
    }
}

#[async_trait]
impl StatelessTransform for EnrichAwsDynamodbQuery {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let keys = msg.get(&self.source).and_then(|v| self.key_values(&v));
        let Some((pk, sk)) = keys else {
            out.push(msg);
            return Ok(());
        };
        let items = self.query(pk, sk).await?;
        if !items.is_empty() {
            let items = items
                .iter()
                .map(item_json)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.fail(e))?;
            msg.set(&self.destination, Value::Array(items.into()))?;
        }
        out.push(msg);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::operation::query::{QueryInput, QueryOutput};
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use sluice_engine::{Transform, json, testing};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    const ARN: &str = "arn:aws:dynamodb:us-east-1:123456789012:table/users";

    fn settings(extra: Value) -> Value {
        let mut base = json!({
            "aws": {"arn": ARN},
            "attributes": {"partition_key": "pk", "sort_key": "sk"},
            "object": {"source_key": "key", "target_key": "found"},
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut base, extra) {
            for (k, v) in extra.iter() {
                base.insert(k.as_str(), v.clone());
            }
        }
        base
    }

    /// Builds the transform from `settings` through the registry's settings decoder and
    /// gives it a mocked client.
    fn query(settings: Value, rules: &[&Rule]) -> EnrichAwsDynamodbQuery {
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, rules, |b| b
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(2)
                    .with_initial_backoff(Duration::from_millis(1))
            ));
        thread_local! {
            static BUILT: std::cell::RefCell<Option<EnrichAwsDynamodbQuery>> =
                const { std::cell::RefCell::new(None) };
        }
        let mut r = sluice_engine::Registry::new();
        r.transform(
            &const { sluice_engine::TypeInfo::named("enrich_aws_dynamodb_query") },
            |b: &Build<'_>| {
                let built = EnrichAwsDynamodbQuery::build(b)?;
                BUILT.with(|c| *c.borrow_mut() = Some(built));
                EnrichAwsDynamodbQuery::build(b).map(Transform::stateless)
            },
        );
        testing::build(
            &r,
            json!({"type": "enrich_aws_dynamodb_query", "settings": settings}),
        )
        .unwrap();
        let t = BUILT.with(|c| c.borrow_mut().take()).unwrap();
        t.with_client(client)
    }

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_string())
    }

    fn n(v: &str) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }

    fn item(pk: &str, sk: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))])
    }

    fn page(items: Vec<HashMap<String, AttributeValue>>, more: bool) -> QueryOutput {
        let last = items.last().cloned().filter(|_| more);
        QueryOutput::builder()
            .set_items(Some(items))
            .set_last_evaluated_key(last)
            .build()
    }

    fn run(t: &EnrichAwsDynamodbQuery, input: &str) -> Result<String, String> {
        let mut out = Vec::new();
        testing::block_on(t.transform(Message::new(input.as_bytes().to_vec()), &mut out))
            .map_err(|e| e.to_string())?;
        assert_eq!(out.len(), 1);
        Ok(String::from_utf8_lossy(out[0].data()).into_owned())
    }

    #[test]
    fn settings_table() {
        let r = registry();
        for st in [
            settings(json!({})),
            settings(json!({"aws": {"arn": "users"}, "limit": 0, "scan_index_forward": true})),
            settings(json!({"attributes": {"partition_key": "pk", "sort_key": ""}, "limit": 10})),
        ] {
            testing::build(
                &r,
                json!({"type": "enrich_aws_dynamodb_query", "settings": st}),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        testing::assert_config_errors(
            &r,
            "enrich_aws_dynamodb_query",
            &[
                (
                    settings(json!({"aws": {}})),
                    "settings.aws.arn: missing required option",
                ),
                (
                    settings(json!({"aws": {"arn": "arn:aws:dynamodb:us-east-1:1:stream/x"}})),
                    "settings.aws.arn: \"arn:aws:dynamodb:us-east-1:1:stream/x\" is not a DynamoDB table ARN",
                ),
                (settings(json!({"aws": {"arn": "t"}})), "nor a table name"),
                (
                    settings(json!({"aws": {"arn": ARN, "assume_role_arn": "x"}})),
                    "settings.aws.assume_role_arn",
                ),
                (
                    settings(json!({"attributes": {"sort_key": "sk"}})),
                    "settings.attributes.partition_key: missing required option",
                ),
                (
                    settings(json!({"attributes": {"partition_key": "k", "sort_key": "k"}})),
                    "settings.attributes.sort_key: \"k\" is the partition key already",
                ),
                (settings(json!({"limit": -1})), "settings.limit"),
                (
                    settings(json!({"limit": 3000000000u64})),
                    "settings.limit: at most 2147483647",
                ),
                (
                    settings(json!({"scan_index_forward": "yes"})),
                    "settings.scan_index_forward",
                ),
                (
                    settings(json!({"object": {"target_key": "found"}})),
                    "settings.object.source_key: missing required option",
                ),
                (
                    settings(json!({"object": {"source_key": "key"}})),
                    "settings.object.target_key: missing required option",
                ),
            ],
        );
    }

    #[test]
    fn the_query_request() {
        let seen: Arc<Mutex<Vec<QueryInput>>> = Arc::default();
        let sn = seen.clone();
        let rule = mock!(Client::query)
            .match_requests(move |r: &QueryInput| {
                sn.lock().unwrap().push(r.clone());
                true
            })
            .then_output(|| page(vec![item("u1", "2024")], false));
        // Library defaults: limit 1, descending.
        let t = query(settings(json!({"limit": 1})), &[&rule]);
        run(&t, r#"{"key":"u1"}"#).unwrap();
        // A pair, ascending, no limit.
        let t = query(
            settings(
                json!({"scan_index_forward": true, "attributes": {"partition_key": "id", "sort_key": "at"}}),
            ),
            &[&rule],
        );
        run(&t, r#"{"key":["u1",2024]}"#).unwrap();
        let seen = seen.lock().unwrap();
        let q = &seen[0];
        assert_eq!(q.table_name(), Some("users"), "the name, not the ARN");
        assert_eq!(q.key_condition_expression(), Some("#pk = :pk"));
        assert_eq!(q.expression_attribute_names().unwrap()["#pk"], "pk");
        assert_eq!(q.expression_attribute_values().unwrap()[":pk"], s("u1"));
        assert_eq!(q.limit(), Some(1));
        assert_eq!(q.scan_index_forward(), Some(false));
        let q = &seen[1];
        assert_eq!(
            q.key_condition_expression(),
            Some("#pk = :pk AND #sk = :sk")
        );
        assert_eq!(q.expression_attribute_names().unwrap()["#sk"], "at");
        assert_eq!(
            q.expression_attribute_values().unwrap()[":sk"],
            s("2024"),
            "as text"
        );
        assert_eq!(q.limit(), None);
        assert_eq!(q.scan_index_forward(), Some(true));
    }

    #[test]
    fn items_are_written_as_an_array() {
        let rule = mock!(Client::query).then_output(|| {
            let mut a = item("u1", "2");
            a.insert("score".into(), n("10"));
            page(vec![a, item("u1", "1")], false)
        });
        let t = query(settings(json!({})), &[&rule]);
        assert_eq!(
            run(&t, r#"{"key":"u1","n":1}"#).unwrap(),
            r#"{"key":"u1","n":1,"found":[{"pk":"u1","score":10,"sk":"2"},{"pk":"u1","sk":"1"}]}"#
        );
    }

    #[test]
    fn what_passes_through_unchanged() {
        let none = mock!(Client::query).then_output(|| page(vec![], false));
        let t = query(settings(json!({})), &[&none]);
        // No items.
        assert_eq!(
            run(&t, r#"{"key":"nobody"}"#).unwrap(),
            r#"{"key":"nobody"}"#
        );
        assert_eq!(none.num_calls(), 1);
        // No value at the source key, data that is not JSON, arrays that are not a pair.
        for input in [
            r#"{"other":1}"#,
            "plain",
            r#"{"key":["a"]}"#,
            r#"{"key":["a","b","c"]}"#,
        ] {
            assert_eq!(run(&t, input).unwrap(), input);
        }
        // Without a sort key, even a pair is not a key.
        let t = query(
            settings(json!({"attributes": {"partition_key": "pk"}})),
            &[&none],
        );
        assert_eq!(
            run(&t, r#"{"key":["a","b"]}"#).unwrap(),
            r#"{"key":["a","b"]}"#
        );
        assert_eq!(none.num_calls(), 1, "no call for any of them");
    }

    #[test]
    fn pages_are_followed_up_to_the_limit() {
        // Each call's (Limit, whether it started after a previous page).
        type Calls = Arc<Mutex<Vec<(Option<i32>, bool)>>>;
        let seen: Calls = Arc::default();
        let sn = seen.clone();
        // The table answers pages of two items, four pages in all.
        let rule = mock!(Client::query)
            .match_requests(move |r: &QueryInput| {
                sn.lock()
                    .unwrap()
                    .push((r.limit(), r.exclusive_start_key().is_some()));
                true
            })
            .then_compute_output(|r: &QueryInput| {
                let from: usize = r
                    .exclusive_start_key()
                    .map(|k| match &k["sk"] {
                        AttributeValue::S(s) => s.parse::<usize>().unwrap() + 1,
                        _ => 0,
                    })
                    .unwrap_or(0);
                let n = r.limit().map_or(2, |l| (l as usize).min(2));
                let items: Vec<_> = (from..(from + n).min(8))
                    .map(|i| item("u", &i.to_string()))
                    .collect();
                let more = from + n < 8;
                page(items, more)
            });
        let count = |limit: u32| {
            let t = query(settings(json!({"limit": limit})), &[&rule]);
            let out = run(&t, r#"{"key":"u"}"#).unwrap();
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v["found"].as_array().unwrap().len()
        };
        assert_eq!(count(1), 1);
        assert_eq!(count(3), 3);
        assert_eq!(count(0), 8, "all");
        assert_eq!(count(100), 8);
        let seen = seen.lock().unwrap();
        // limit 1: one call; limit 3: Limit 3 then the remaining 1.
        assert_eq!(seen[0], (Some(1), false));
        assert_eq!(seen[1], (Some(3), false));
        assert_eq!(seen[2], (Some(1), true));
    }

    #[test]
    fn errors_name_the_table() {
        let rule = mock!(Client::query)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}"#.into()),
            )
            .repeatedly()
            .build();
        let t = query(settings(json!({})), &[&rule]);
        let e = run(&t, r#"{"key":"u1"}"#).unwrap_err();
        assert!(e.starts_with("dynamodb table users: Query failed: "), "{e}");
        assert!(e.contains("ResourceNotFoundException"), "{e}");
        let e = run(&t, r#"{"key":""}"#).unwrap_err();
        assert_eq!(
            e,
            r#"dynamodb table users: the partition key value at "key" is empty"#
        );
        let e = run(&t, r#"{"key":null}"#).unwrap_err();
        assert!(e.contains("is empty"), "{e}");
    }

    #[test]
    fn throttling_is_retried() {
        let rule = mock!(Client::query)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#.into()),
            )
            .output(|| page(vec![item("u1", "1")], false))
            .build();
        let t = query(settings(json!({})), &[&rule]);
        run(&t, r#"{"key":"u1"}"#).unwrap();
        assert_eq!(rule.num_calls(), 2);
    }

    #[test]
    fn compliance() {
        let rule = mock!(Client::query).then_output(|| page(vec![], false));
        testing::check_compliance(Transform::stateless(query(settings(json!({})), &[&rule])));
    }
}
