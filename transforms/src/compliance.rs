//! Every registered type, from one table: each transform and condition builds alone with
//! the settings here, one pipeline of all of them builds without a warning, and every
//! transform complies: a ctrl message comes out exactly once and last, a stateless
//! transform holds no batch, and data that is not JSON, empty or not UTF-8 does not panic
//! ([`sluice_engine::testing::check_compliance`]).
//!
//! A transform whose data path does I/O (an AWS call, a DNS or HTTP request) is checked
//! here with a lone ctrl, which makes no call, and in full in its own file against a test
//! double (a mocked SDK client, a local server); the second table says where. A new
//! transform type must be named in one of the two tables, and a new condition type in the
//! third, or the tests fail. (`tests/library_registry.rs` checks that the Jsonnet library
//! and the registry name the same types.)

use std::collections::BTreeSet;

use sluice_engine::{Value, json, testing};

use crate::registry;

/// Types checked in full here, with the settings to build them (one line per case).
/// `{STATE_DIR}` stands for a temporary directory.
const CHECKED_HERE: &[(&str, &str)] = &[
    ("aggregate_from_array", "{}"),
    ("aggregate_from_string", r#"{"separator": "\n"}"#),
    ("aggregate_to_array", "{}"),
    ("aggregate_to_string", r#"{"separator": "\n"}"#),
    ("array_join", r#"{"separator": ","}"#),
    ("array_zip", "{}"),
    (
        "enrich_kv_store_get",
        r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_item_get",
        r#"{"kv_store": {"type": "memory"}, "close_kv_store": false, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_item_get",
        r#"{"kv_store": {"type": "memory"}, "close_kv_store": true, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_item_set",
        r#"{"kv_store": {"type": "memory"}, "close_kv_store": true, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_set",
        r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_set_add",
        r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    ("format_from_base64", "{}"),
    ("format_from_gzip", "{}"),
    ("format_from_parquet", "{}"),
    ("format_from_pretty_print", "{}"),
    ("format_from_zip", "{}"),
    ("format_to_base64", "{}"),
    ("format_to_gzip", "{}"),
    (
        "hash_md5",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    (
        "hash_sha256",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    ("meta_err", r#"{"transforms": [{"type": "utility_drop"}]}"#),
    (
        "meta_for_each",
        r#"{"object": {"source_key": "a", "target_key": "b"}, "transforms": [{"type": "string_to_upper"}]}"#,
    ),
    (
        "meta_kv_store_lock",
        r#"{"kv_store": {"type": "memory"}, "transforms": [{"type": "string_to_upper"}]}"#,
    ),
    (
        "meta_metric_duration",
        r#"{"metric": {"name": "D", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}, "transforms": [{"type": "utility_drop"}]}"#,
    ),
    (
        "meta_retry",
        r#"{"transforms": [{"type": "string_to_upper"}]}"#,
    ),
    (
        "meta_switch",
        r#"{"cases": [{"transforms": [{"type": "string_to_upper"}]}]}"#,
    ),
    ("network_domain_registered_domain", "{}"),
    ("network_domain_subdomain", "{}"),
    ("network_domain_top_level_domain", "{}"),
    ("number_math_addition", "{}"),
    ("number_math_division", "{}"),
    ("number_math_multiplication", "{}"),
    ("number_math_subtraction", "{}"),
    ("number_maximum", r#"{"value": 1}"#),
    ("number_minimum", r#"{"value": 1}"#),
    (
        "object_copy",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    ("object_delete", r#"{"object": {"source_key": "a"}}"#),
    (
        "object_insert",
        r#"{"object": {"target_key": "a"}, "value": {"b": 1}}"#,
    ),
    ("object_jq", r#"{"filter": "."}"#),
    (
        "object_to_boolean",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    (
        "object_to_float",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    (
        "object_to_integer",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    (
        "object_to_string",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    (
        "object_to_unsigned_integer",
        r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
    ),
    (
        "send_file",
        r#"{"file_path": {"prefix": "{STATE_DIR}", "uuid": true}}"#,
    ),
    ("send_stdout", "{}"),
    ("string_append", r#"{"suffix": "x"}"#),
    ("string_capture", r#"{"pattern": "(\\w+)"}"#),
    ("string_capture", r#"{"pattern": "(?P<w>\\w+)"}"#),
    ("string_replace", r#"{"pattern": "a", "replacement": "b"}"#),
    ("string_split", r#"{"separator": ","}"#),
    ("string_to_lower", "{}"),
    ("string_to_snake", "{}"),
    ("string_to_upper", "{}"),
    ("string_uuid", "{}"),
    ("test_message", r#"{"value": 1}"#),
    (
        "time_from_string",
        r#"{"format": "2006-01-02T15:04:05Z07:00"}"#,
    ),
    ("time_from_unix", "{}"),
    ("time_from_unix_milli", "{}"),
    ("time_now", "{}"),
    ("time_to_string", r#"{"format": "2006-01-02"}"#),
    ("time_to_unix", "{}"),
    ("time_to_unix_milli", "{}"),
    ("utility_control", r#"{"batch": {"count": 1}}"#),
    ("utility_delay", r#"{"duration": "1ms"}"#),
    ("utility_drop", "{}"),
    ("utility_err", r#"{"message": "x"}"#),
    (
        "utility_metric_bytes",
        r#"{"metric": {"name": "B", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}}"#,
    ),
    (
        "utility_metric_count",
        r#"{"metric": {"name": "C", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}}"#,
    ),
    (
        "utility_metric_freshness",
        r#"{"threshold": "1m", "object": {"source_key": "ts"}, "metric": {"name": "F", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}}"#,
    ),
    (
        "utility_secret",
        r#"{"secret": {"type": "environment_variable", "settings": {"id": "compliance_secret", "name": "PATH"}}}"#,
    ),
];

/// Types whose data path does I/O: checked here with a lone ctrl (built with these
/// settings), and in full where the third column says.
const CHECKED_WITH_A_TEST_DOUBLE: &[(&str, &str, &str)] = &[
    (
        "enrich_aws_dynamodb_query",
        r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/events"}, "attributes": {"partition_key": "pk"}, "object": {"source_key": "k", "target_key": "v"}}"#,
        "enrich/aws_dynamodb_query.rs: a mocked DynamoDB client",
    ),
    (
        "enrich_aws_lambda",
        r#"{"aws": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "object": {"source_key": "k", "target_key": "v"}}"#,
        "enrich/aws_lambda.rs: a mocked Lambda client",
    ),
    (
        "enrich_dns_domain_lookup",
        "{}",
        "enrich/dns_domain_lookup.rs: a local DNS server",
    ),
    (
        "enrich_dns_ip_lookup",
        "{}",
        "enrich/dns_ip_lookup.rs: a local DNS server",
    ),
    (
        "enrich_dns_text_lookup",
        "{}",
        "enrich/dns_text_lookup.rs: a local DNS server",
    ),
    (
        "enrich_dns_txt_lookup",
        "{}",
        "enrich/dns_text_lookup.rs (the same transform): a local DNS server",
    ),
    (
        "enrich_http_get",
        r#"{"url": "http://127.0.0.1:9/${DATA}"}"#,
        "enrich/http_get.rs: a local HTTP server",
    ),
    (
        "enrich_http_post",
        r#"{"url": "http://127.0.0.1:9/", "object": {"body_key": "b"}}"#,
        "enrich/http_post.rs: a local HTTP server",
    ),
    (
        "send_aws_data_firehose",
        r#"{"aws": {"arn": "arn:aws:firehose:us-east-1:123456789012:deliverystream/d"}}"#,
        "send/aws_data_firehose.rs: a mocked client",
    ),
    (
        "send_aws_dynamodb_put",
        r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/events"}}"#,
        "tests/send_aws_dynamodb.rs: dynoxide",
    ),
    (
        "send_aws_eventbridge",
        "{}",
        "send/aws_eventbridge.rs: a mocked client",
    ),
    (
        "send_aws_kinesis_data_stream",
        r#"{"aws": {"arn": "arn:aws:kinesis:us-east-1:123456789012:stream/s"}}"#,
        "send/aws_kinesis_data_stream/tests.rs: a mocked client",
    ),
    (
        "send_aws_lambda",
        r#"{"aws": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}}"#,
        "send/aws_lambda.rs: a mocked client",
    ),
    (
        "send_aws_s3",
        r#"{"aws": {"arn": "arn:aws:s3:::bucket"}, "storage_class": "STANDARD", "file_path": {"uuid": true}}"#,
        "send/aws_s3.rs: a mocked client",
    ),
    (
        "send_aws_sns",
        r#"{"aws": {"arn": "arn:aws:sns:us-east-1:123456789012:topic"}}"#,
        "send/aws_sns.rs: a mocked client",
    ),
    (
        "send_aws_sqs",
        r#"{"aws": {"arn": "arn:aws:sqs:us-east-1:123456789012:queue"}}"#,
        "send/aws_sqs.rs: a mocked client",
    ),
    (
        "send_gcp_storage",
        r#"{"gcp": {"resource": "projects/_/buckets/bucket"}, "file_path": {"uuid": true}}"#,
        "send/gcp_storage/tests.rs: a local HTTP server; tests/send_gcp_storage.rs: the emulator",
    ),
    (
        "send_http_post",
        r#"{"url": "http://127.0.0.1:9/"}"#,
        "send/http_post.rs: a local HTTP server",
    ),
];

const CONDITIONS: &[(&str, &str)] = &[
    ("all", r#"{"conditions": [{"type": "format_json"}]}"#),
    ("any", r#"{"conditions": [{"type": "format_json"}]}"#),
    ("format_json", "{}"),
    ("format_mime", r#"{"type": "application/json"}"#),
    ("meta_all", r#"{"conditions": [{"type": "format_json"}]}"#),
    ("meta_any", r#"{"conditions": [{"type": "format_json"}]}"#),
    ("meta_none", r#"{"conditions": [{"type": "format_json"}]}"#),
    ("network_ip_global_unicast", "{}"),
    ("network_ip_link_local_multicast", "{}"),
    ("network_ip_link_local_unicast", "{}"),
    ("network_ip_loopback", "{}"),
    ("network_ip_multicast", "{}"),
    ("network_ip_private", "{}"),
    ("network_ip_unicast", "{}"),
    ("network_ip_unspecified", "{}"),
    ("network_ip_valid", "{}"),
    ("none", r#"{"conditions": [{"type": "format_json"}]}"#),
    ("number_bitwise_and", r#"{"value": 1}"#),
    ("number_bitwise_not", "{}"),
    ("number_bitwise_or", r#"{"value": 1}"#),
    ("number_bitwise_xor", r#"{"value": 1}"#),
    ("number_equal_to", r#"{"value": 1}"#),
    ("number_greater_than", r#"{"value": 1}"#),
    ("number_length_equal_to", r#"{"value": 1}"#),
    ("number_length_greater_than", r#"{"value": 1}"#),
    ("number_length_less_than", r#"{"value": 1}"#),
    ("number_less_than", r#"{"value": 1}"#),
    ("string_contains", r#"{"value": "a"}"#),
    ("string_ends_with", r#"{"value": "a"}"#),
    ("string_equal_to", r#"{"value": "a"}"#),
    ("string_greater_than", r#"{"value": "a"}"#),
    ("string_less_than", r#"{"value": "a"}"#),
    ("string_match", r#"{"pattern": "a"}"#),
    ("string_starts_with", r#"{"value": "a"}"#),
    ("utility_random", "{}"),
];

/// Whether this build can build `ty`: without the `aws` feature the AWS-backed types only
/// say that they are missing (`crate::without_aws` tests that they do).
fn in_this_build(ty: &str) -> bool {
    cfg!(feature = "aws") || !crate::AWS_TRANSFORMS.contains(&ty)
}

fn settings(text: &str, state_dir: &std::path::Path) -> Value {
    let text = text.replace("{STATE_DIR}", &state_dir.display().to_string());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn every_registered_transform_complies() {
    let r = registry();
    let state = tempfile::tempdir().unwrap();
    for (ty, s) in CHECKED_HERE.iter().filter(|(t, _)| in_this_build(t)) {
        let t = testing::build(
            &r,
            sluice_engine::json!({"type": *ty, "settings": settings(s, state.path())}),
        )
        .unwrap_or_else(|e| panic!("{ty} with {s}: {e}"));
        testing::check_compliance(t);
    }
    for (ty, s, _) in CHECKED_WITH_A_TEST_DOUBLE
        .iter()
        .filter(|(t, _, _)| in_this_build(t))
    {
        let t = testing::build(
            &r,
            sluice_engine::json!({"type": *ty, "settings": settings(s, state.path())}),
        )
        .unwrap_or_else(|e| panic!("{ty} with {s}: {e}"));
        testing::check_ctrl_compliance(t);
    }
}

#[test]
fn every_registered_transform_is_in_a_table() {
    let here: BTreeSet<&str> = CHECKED_HERE.iter().map(|(t, _)| *t).collect();
    let doubles: BTreeSet<&str> = CHECKED_WITH_A_TEST_DOUBLE
        .iter()
        .map(|(t, _, _)| *t)
        .collect();
    let both: Vec<&&str> = here.intersection(&doubles).collect();
    assert!(both.is_empty(), "in both tables: {both:?}");
    let registry = registry();
    let registered: BTreeSet<&str> = registry.transform_types().collect();
    let named: BTreeSet<&str> = here.union(&doubles).copied().collect();
    let missing: Vec<&&str> = registered.difference(&named).collect();
    let stale: Vec<&&str> = named.difference(&registered).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "transforms/src/compliance.rs: registered types in neither table {missing:?}; types in a table that are not registered {stale:?}"
    );
}

/// The first settings each transform type has in the tables.
fn transform_settings(state_dir: &std::path::Path) -> Vec<(&'static str, Value)> {
    let mut seen = BTreeSet::new();
    CHECKED_HERE
        .iter()
        .copied()
        .chain(CHECKED_WITH_A_TEST_DOUBLE.iter().map(|(t, s, _)| (*t, *s)))
        .filter(|(t, _)| in_this_build(t) && seen.insert(*t))
        .map(|(t, s)| (t, settings(s, state_dir)))
        .collect()
}

#[test]
fn every_registered_condition_is_in_the_table_and_builds_alone() {
    let r = registry();
    let named: BTreeSet<&str> = CONDITIONS.iter().map(|(c, _)| *c).collect();
    let registered: BTreeSet<&str> = r.condition_types().collect();
    assert_eq!(
        registered, named,
        "transforms/src/compliance.rs: CONDITIONS must name every registered condition type"
    );
    for (c, s) in CONDITIONS {
        let cfg = json!({"type": *c, "settings": settings(s, std::path::Path::new("."))});
        if let Err(e) = r.build_condition(&cfg, "probe") {
            panic!("{c} with {s} does not build: {e}");
        }
    }
}

#[test]
fn one_pipeline_of_every_registered_type_builds_without_a_warning() {
    let r = registry();
    let state = tempfile::tempdir().unwrap();
    let transforms = transform_settings(state.path());
    let mut list: Vec<Value> = transforms
        .iter()
        .map(|(t, s)| json!({"type": *t, "settings": s.clone()}))
        .collect();
    // The conditions are built inside the pipeline too: each is one case of a meta_switch.
    let cases: Vec<Value> = CONDITIONS
        .iter()
        .map(|(c, s)| {
            json!({
                "condition": {"type": *c, "settings": settings(s, state.path())},
                "transforms": [{"type": "utility_drop"}],
            })
        })
        .collect();
    list.push(
        json!({"type": "meta_switch", "settings": {"id": "every_condition", "cases": cases}}),
    );
    let built = r
        .build_pipeline(&Value::Array(list.into()), "transforms")
        .unwrap_or_else(|e| panic!("the pipeline of every type does not build: {e}"));
    assert_eq!(built.value.len(), transforms.len() + 1);
    let warnings: Vec<String> = built.warnings.iter().map(|w| w.to_string()).collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}
