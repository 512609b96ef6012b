//! A pipeline holding every registered transform and condition type, built with the least
//! settings each one needs (issue 7: "a test that builds a pipeline containing every
//! registered type with minimal valid settings").
//!
//! The list of types comes from the registry itself, so registering a type without adding
//! its minimal settings to [`MINIMAL_TRANSFORMS`] or [`MINIMAL_CONDITIONS`] fails the test,
//! which names the type. The conditions are built inside the pipeline too: each is the
//! condition of one case of a `meta_switch`.
//!
//! `library_registry.rs` checks the other direction: every type the Jsonnet library can
//! emit is registered (or pending), and every registered type is one the library emits (or
//! a documented alias).

use serde_json::{Value, json};

/// Every registered transform type and the least settings it builds with. Keep it sorted;
/// a type registered later gets its line here.
const MINIMAL_TRANSFORMS: &[(&str, &str)] = &[
    ("aggregate_from_array", "{}"),
    ("aggregate_from_string", r#"{"separator": "\n"}"#),
    ("aggregate_to_array", "{}"),
    ("aggregate_to_string", r#"{"separator": "\n"}"#),
    ("array_join", "{}"),
    ("array_zip", "{}"),
    (
        "enrich_aws_dynamodb_query",
        r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/events"}, "attributes": {"partition_key": "pk"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_aws_lambda",
        r#"{"aws": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    ("enrich_dns_domain_lookup", "{}"),
    ("enrich_dns_ip_lookup", "{}"),
    ("enrich_dns_text_lookup", "{}"),
    ("enrich_dns_txt_lookup", "{}"),
    (
        "enrich_http_get",
        r#"{"url": "http://127.0.0.1:9/${DATA}"}"#,
    ),
    (
        "enrich_http_post",
        r#"{"url": "http://127.0.0.1:9/", "object": {"body_key": "b"}}"#,
    ),
    (
        "enrich_kv_store_get",
        r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_item_get",
        r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
    ),
    (
        "enrich_kv_store_item_set",
        r#"{"kv_store": {"type": "memory"}, "object": {"source_key": "k", "target_key": "v"}}"#,
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
    ("hash_md5", "{}"),
    ("hash_sha256", "{}"),
    ("meta_err", r#"{"transforms": [{"type": "utility_drop"}]}"#),
    (
        "meta_for_each",
        r#"{"object": {"source_key": "a", "target_key": "b"}, "transforms": [{"type": "utility_drop"}]}"#,
    ),
    (
        "meta_kv_store_lock",
        r#"{"kv_store": {"type": "memory"}, "transforms": [{"type": "utility_drop"}]}"#,
    ),
    (
        "meta_metric_duration",
        r#"{"metric": {"name": "D", "destination": {"type": "aws_cloudwatch_embedded_metrics"}}, "transforms": [{"type": "utility_drop"}]}"#,
    ),
    (
        "meta_retry",
        r#"{"transforms": [{"type": "utility_drop"}]}"#,
    ),
    (
        "meta_switch",
        r#"{"cases": [{"transforms": [{"type": "utility_drop"}]}]}"#,
    ),
    ("network_domain_registered_domain", "{}"),
    ("network_domain_subdomain", "{}"),
    ("network_domain_top_level_domain", "{}"),
    ("number_math_addition", "{}"),
    ("number_math_division", "{}"),
    ("number_math_multiplication", "{}"),
    ("number_math_subtraction", "{}"),
    ("number_maximum", "{}"),
    ("number_minimum", "{}"),
    ("object_copy", "{}"),
    ("object_delete", r#"{"object": {"source_key": "a"}}"#),
    (
        "object_insert",
        r#"{"object": {"target_key": "a"}, "value": 1}"#,
    ),
    ("object_jq", r#"{"filter": "."}"#),
    ("object_to_boolean", "{}"),
    ("object_to_float", "{}"),
    ("object_to_integer", "{}"),
    ("object_to_string", "{}"),
    ("object_to_unsigned_integer", "{}"),
    (
        "send_aws_data_firehose",
        r#"{"aws": {"arn": "arn:aws:firehose:us-east-1:123456789012:deliverystream/d"}}"#,
    ),
    (
        "send_aws_dynamodb_put",
        r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/events"}}"#,
    ),
    ("send_aws_eventbridge", "{}"),
    (
        "send_aws_kinesis_data_stream",
        r#"{"aws": {"arn": "arn:aws:kinesis:us-east-1:123456789012:stream/s"}}"#,
    ),
    (
        "send_aws_lambda",
        r#"{"aws": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}}"#,
    ),
    (
        "send_aws_s3",
        r#"{"aws": {"arn": "arn:aws:s3:::bucket"}, "storage_class": "STANDARD", "file_path": {"uuid": true}}"#,
    ),
    (
        "send_aws_sns",
        r#"{"aws": {"arn": "arn:aws:sns:us-east-1:123456789012:topic"}}"#,
    ),
    (
        "send_aws_sqs",
        r#"{"aws": {"arn": "arn:aws:sqs:us-east-1:123456789012:queue"}}"#,
    ),
    (
        "send_file",
        r#"{"file_path": {"prefix": "out", "uuid": true}}"#,
    ),
    ("send_http_post", r#"{"url": "http://127.0.0.1:9/"}"#),
    ("send_stdout", "{}"),
    ("string_append", r#"{"suffix": "x"}"#),
    ("string_capture", r#"{"pattern": "(.)"}"#),
    ("string_replace", r#"{"pattern": "a", "replacement": "b"}"#),
    ("string_split", r#"{"separator": ","}"#),
    ("string_to_lower", "{}"),
    ("string_to_snake", "{}"),
    ("string_to_upper", "{}"),
    ("string_uuid", "{}"),
    ("test_message", r#"{"value": 1}"#),
    ("time_from_string", r#"{"format": "2006-01-02"}"#),
    ("time_from_unix", "{}"),
    ("time_from_unix_milli", "{}"),
    ("time_now", "{}"),
    ("time_to_string", r#"{"format": "2006-01-02"}"#),
    ("time_to_unix", "{}"),
    ("time_to_unix_milli", "{}"),
    ("utility_control", "{}"),
    ("utility_delay", r#"{"duration": "1ms"}"#),
    ("utility_drop", "{}"),
    ("utility_err", r#"{"message": "x"}"#),
    (
        "utility_metric_bytes",
        r#"{"metric": {"name": "B", "destination": {"type": "aws_cloudwatch_embedded_metrics"}}}"#,
    ),
    (
        "utility_metric_count",
        r#"{"metric": {"name": "C", "destination": {"type": "aws_cloudwatch_embedded_metrics"}}}"#,
    ),
    (
        "utility_metric_freshness",
        r#"{"threshold": "1m", "object": {"source_key": "ts"}, "metric": {"name": "F", "destination": {"type": "aws_cloudwatch_embedded_metrics"}}}"#,
    ),
    (
        "utility_secret",
        r#"{"secret": {"type": "environment_variable", "settings": {"id": "all_types_secret", "name": "PATH"}}}"#,
    ),
];

/// Every registered condition type and the least settings it builds with.
const MINIMAL_CONDITIONS: &[(&str, &str)] = &[
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

fn settings_of(table: &[(&str, &str)], name: &str) -> Option<Value> {
    table.iter().find(|(t, _)| *t == name).map(|(t, s)| {
        serde_json::from_str(s).unwrap_or_else(|e| panic!("the settings of {t} are not JSON: {e}"))
    })
}

/// The types a registry lists that `table` has no settings for, and the table's entries
/// that are not registered (stale lines).
fn gaps<'a>(
    registered: &[&'a str],
    table: &'a [(&'a str, &'a str)],
) -> (Vec<&'a str>, Vec<&'a str>) {
    let missing = registered
        .iter()
        .copied()
        .filter(|t| settings_of(table, t).is_none())
        .collect();
    let stale = table
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| !registered.contains(t))
        .collect();
    (missing, stale)
}

/// The pipeline: every transform type once, then a `meta_switch` with one case per
/// condition type.
fn everything(transforms: &[&str], conditions: &[&str]) -> Value {
    let mut list: Vec<Value> = transforms
        .iter()
        .map(|t| json!({"type": t, "settings": settings_of(MINIMAL_TRANSFORMS, t).unwrap()}))
        .collect();
    let cases: Vec<Value> = conditions
        .iter()
        .map(|c| {
            json!({
                "condition": {"type": c, "settings": settings_of(MINIMAL_CONDITIONS, c).unwrap()},
                "transforms": [{"type": "utility_drop"}],
            })
        })
        .collect();
    list.push(
        json!({"type": "meta_switch", "settings": {"id": "every_condition", "cases": cases}}),
    );
    Value::Array(list)
}

#[test]
fn every_registered_type_has_minimal_settings() {
    let registry = sluice_transforms::registry();
    let transforms: Vec<&str> = registry.transform_types().collect();
    let conditions: Vec<&str> = registry.condition_types().collect();
    let (missing_t, stale_t) = gaps(&transforms, MINIMAL_TRANSFORMS);
    let (missing_c, stale_c) = gaps(&conditions, MINIMAL_CONDITIONS);
    assert!(
        missing_t.is_empty() && missing_c.is_empty(),
        "registered types without minimal settings in tests/all_types.rs: transforms \
         {missing_t:?}, conditions {missing_c:?}; add a line to MINIMAL_TRANSFORMS / \
         MINIMAL_CONDITIONS"
    );
    assert!(
        stale_t.is_empty() && stale_c.is_empty(),
        "tests/all_types.rs has settings for types that are not registered: transforms \
         {stale_t:?}, conditions {stale_c:?}"
    );
    for table in [MINIMAL_TRANSFORMS, MINIMAL_CONDITIONS] {
        let names: Vec<&str> = table.iter().map(|(t, _)| *t).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "keep the table sorted, one line per type");
    }
}

#[test]
fn a_pipeline_of_every_registered_type_builds() {
    let registry = sluice_transforms::registry();
    let transforms: Vec<&str> = registry
        .transform_types()
        .filter(|t| settings_of(MINIMAL_TRANSFORMS, t).is_some())
        .collect();
    let conditions: Vec<&str> = registry
        .condition_types()
        .filter(|c| settings_of(MINIMAL_CONDITIONS, c).is_some())
        .collect();
    let built = registry
        .build_pipeline(&everything(&transforms, &conditions), "transforms")
        .unwrap_or_else(|e| panic!("the pipeline of every type does not build: {e}"));
    assert_eq!(built.value.len(), transforms.len() + 1);
    // Minimal means nothing unknown either: every setting in the table is one the type reads.
    let warnings: Vec<String> = built.warnings.iter().map(|w| w.to_string()).collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[test]
fn each_type_builds_alone() {
    // The same, one type at a time, so that a failure names the type and its settings.
    let registry = sluice_transforms::registry();
    for t in registry.transform_types() {
        let Some(settings) = settings_of(MINIMAL_TRANSFORMS, t) else {
            continue;
        };
        if let Err(e) = registry.build_transform(&json!({"type": t, "settings": settings}), "probe")
        {
            panic!("{t} with {settings} does not build: {e}");
        }
    }
    for c in registry.condition_types() {
        let Some(settings) = settings_of(MINIMAL_CONDITIONS, c) else {
            continue;
        };
        if let Err(e) = registry.build_condition(&json!({"type": c, "settings": settings}), "probe")
        {
            panic!("{c} with {settings} does not build: {e}");
        }
    }
}
