//! Every registered type, built from its descriptor's example ([`sluice_engine::TypeInfo`]):
//! each transform and condition builds alone with it, one pipeline of all of them builds
//! without a warning, and every transform complies: a ctrl message comes out exactly once
//! and last, a stateless transform holds no batch, and data that is not JSON, empty or not
//! UTF-8 does not panic ([`sluice_engine::testing::check_compliance`]).
//!
//! A transform whose data path reaches the network (its descriptor's `reach`: an AWS call, a
//! DNS or HTTP request) is checked here with a lone ctrl, which makes no call, and in full
//! in its own file against a test double (a mocked SDK client, a local server); the table
//! below says where, and a test fails when it does not name exactly those types. A new
//! type needs nothing here otherwise. (`tests/library_registry.rs` checks each
//! descriptor's library function against the Jsonnet library.)

use std::collections::BTreeSet;

use sluice_engine::{Reach, TypeInfo, Value, json, testing};

use crate::registry;

/// Types whose example would write outside a temporary directory, with settings that
/// write into one (`{STATE_DIR}`).
const SETTINGS_HERE: &[(&str, &str)] = &[(
    "send_file",
    r#"{"file_path": {"prefix": "{STATE_DIR}", "uuid": true}}"#,
)];

/// Settings checked beside a type's example, where its settings choose another path
/// through its code.
const MORE_CASES: &[(&str, &str)] = &[
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
    ("string_capture", r#"{"pattern": "(?P<w>\\w+)"}"#),
];

/// The types whose data path reaches the network, each checked in full where it says.
const CHECKED_WITH_A_TEST_DOUBLE: &[(&str, &str)] = &[
    (
        "enrich_aws_dynamodb_query",
        "enrich/aws_dynamodb_query.rs: a mocked DynamoDB client",
    ),
    (
        "enrich_aws_lambda",
        "enrich/aws_lambda.rs: a mocked Lambda client",
    ),
    (
        "enrich_dns_domain_lookup",
        "enrich/dns_domain_lookup.rs: a local DNS server",
    ),
    (
        "enrich_dns_ip_lookup",
        "enrich/dns_ip_lookup.rs: a local DNS server",
    ),
    (
        "enrich_dns_text_lookup",
        "enrich/dns_text_lookup.rs: a local DNS server",
    ),
    ("enrich_http_get", "enrich/http_get.rs: a local HTTP server"),
    (
        "enrich_http_post",
        "enrich/http_post.rs: a local HTTP server",
    ),
    (
        "send_aws_data_firehose",
        "send/aws_data_firehose.rs: a mocked client",
    ),
    (
        "send_aws_dynamodb_put",
        "tests/send_aws_dynamodb.rs: dynoxide",
    ),
    (
        "send_aws_eventbridge",
        "send/aws_eventbridge.rs: a mocked client",
    ),
    (
        "send_aws_kinesis_data_stream",
        "send/aws_kinesis_data_stream/tests.rs: a mocked client",
    ),
    ("send_aws_lambda", "send/aws_lambda.rs: a mocked client"),
    ("send_aws_s3", "send/aws_s3.rs: a mocked client"),
    ("send_aws_sns", "send/aws_sns.rs: a mocked client"),
    ("send_aws_sqs", "send/aws_sqs.rs: a mocked client"),
    (
        "send_gcp_storage",
        "send/gcp_storage/tests.rs: a local HTTP server; tests/send_gcp_storage.rs: the emulator",
    ),
    ("send_http_post", "send/http_post.rs: a local HTTP server"),
];

/// Whether this build can build `info`'s type: without the `aws` feature the AWS-backed
/// types only say that they are missing (`crate::without_aws` tests that they do).
fn in_this_build(info: &TypeInfo) -> bool {
    cfg!(feature = "aws") || !info.calls_aws()
}

fn settings(text: &str, state_dir: &std::path::Path) -> Value {
    let text = text.replace("{STATE_DIR}", &state_dir.display().to_string());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Every registered transform type name (aliases too) with the settings it is checked
/// with: its descriptor's example (or [`SETTINGS_HERE`]), then its [`MORE_CASES`].
fn transform_cases() -> Vec<(&'static str, &'static TypeInfo, &'static str)> {
    let r = registry();
    let mut cases = Vec::new();
    for name in r.transform_types() {
        let info = r.transform_info(name).expect("registered");
        let name = info.names().find(|n| *n == name).expect("a name of it");
        let example = SETTINGS_HERE
            .iter()
            .find(|(t, _)| *t == info.name)
            .map_or(info.example, |(_, s)| *s);
        cases.push((name, info, example));
        for (_, s) in MORE_CASES.iter().filter(|(t, _)| *t == name) {
            cases.push((name, info, *s));
        }
    }
    cases
}

#[test]
fn every_registered_transform_complies() {
    let r = registry();
    let state = tempfile::tempdir().unwrap();
    let cases = transform_cases();
    assert!(cases.len() > 88, "{} cases", cases.len());
    for (ty, info, s) in cases.into_iter().filter(|(_, i, _)| in_this_build(i)) {
        let t = testing::build(
            &r,
            sluice_engine::json!({"type": ty, "settings": settings(s, state.path())}),
        )
        .unwrap_or_else(|e| panic!("{ty} with {s} (its example, or a case here): {e}"));
        if info.reaches_network() {
            testing::check_ctrl_compliance(t);
        } else {
            testing::check_compliance(t);
        }
    }
}

#[test]
fn the_tables_here_name_registered_types_and_every_network_one() {
    let r = registry();
    let doubles: BTreeSet<&str> = CHECKED_WITH_A_TEST_DOUBLE.iter().map(|(t, _)| *t).collect();
    let network: BTreeSet<&str> = r
        .transform_infos()
        .filter(|i| i.reaches_network())
        .map(|i| i.name)
        .collect();
    assert_eq!(
        doubles, network,
        "transforms/src/compliance.rs: CHECKED_WITH_A_TEST_DOUBLE must name every type whose \
         descriptor says it reaches the network (Reach::Network or Reach::Aws), and only those"
    );
    for (t, _) in SETTINGS_HERE.iter().chain(MORE_CASES) {
        assert!(r.transform_info(t).is_some(), "{t} is not registered");
    }
    assert_eq!(
        r.transform_info("send_file").map(|i| i.reach),
        Some(Reach::Files)
    );
}

#[test]
fn every_registered_condition_builds_alone_from_its_example() {
    let r = registry();
    let names: Vec<&str> = r.condition_types().collect();
    assert!(names.len() >= 35, "{names:?}");
    for c in names {
        let s = r.condition_info(c).expect("registered").example;
        let cfg = json!({"type": c, "settings": settings(s, std::path::Path::new("."))});
        if let Err(e) = r.build_condition(&cfg, "probe") {
            panic!("{c} with {s} (its example) does not build: {e}");
        }
    }
}

#[test]
fn one_pipeline_of_every_registered_type_builds_without_a_warning() {
    let r = registry();
    let state = tempfile::tempdir().unwrap();
    let mut seen = BTreeSet::new();
    let transforms: Vec<(&str, Value)> = transform_cases()
        .into_iter()
        .filter(|(t, i, _)| in_this_build(i) && seen.insert(*t))
        .map(|(t, _, s)| (t, settings(s, state.path())))
        .collect();
    let mut list: Vec<Value> = transforms
        .iter()
        .map(|(t, s)| json!({"type": *t, "settings": s.clone()}))
        .collect();
    // The conditions are built inside the pipeline too: each is one case of a meta_switch.
    let cases: Vec<Value> = r
        .condition_types()
        .map(|c| {
            let s = r.condition_info(c).expect("registered").example;
            json!({
                "condition": {"type": c, "settings": settings(s, state.path())},
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
