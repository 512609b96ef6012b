//! `enrich_aws_dynamodb_query` through the real `sluice` binary against the DynamoDB
//! emulator (`tests/common/dynamodb.rs`): a table with a partition and a sort key, items of
//! every attribute type, and configs that query it by partition key and by `[pk, sk]`,
//! with the library's defaults (`limit: 1`, descending) and with other `limit` and
//! `scan_index_forward` values. The process reaches the emulator only through the standard
//! AWS environment variables, as in production.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::common::{Dir, dynamodb};

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn n(v: &str) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A fresh table `pk` + `sk` holding user `u1`'s three items (one with every attribute
/// type), user `u2`'s one, and user `big`'s three items of 400 KB (more than one 1 MB page
/// of a query); its name and the emulator's endpoint.
fn table() -> (String, String) {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("enrich-query");
    let rt = runtime();
    rt.block_on(dynamodb::create_table(&endpoint, &table, "pk", Some("sk")));
    let item = |pairs: Vec<(&str, AttributeValue)>| -> HashMap<String, AttributeValue> {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    let items = vec![
        item(vec![
            ("pk", s("u1")),
            ("sk", s("2024-01")),
            ("plan", s("free")),
        ]),
        item(vec![
            ("pk", s("u1")),
            ("sk", s("2024-03")),
            ("id", n("30400402455622563")),
            ("ratio", n("0.25")),
            ("raw", AttributeValue::B(Blob::new(b"hi".to_vec()))),
            ("ok", AttributeValue::Bool(true)),
            ("none", AttributeValue::Null(true)),
            (
                "tags",
                AttributeValue::L(vec![s("a"), n("2"), AttributeValue::Bool(false)]),
            ),
            (
                "owner",
                AttributeValue::M(HashMap::from([
                    ("name".to_string(), s("ann")),
                    ("age".to_string(), n("41")),
                ])),
            ),
            ("roles", AttributeValue::Ss(vec!["admin".into()])),
            ("scores", AttributeValue::Ns(vec!["7".into()])),
            ("keys", AttributeValue::Bs(vec![Blob::new(b"k".to_vec())])),
        ]),
        item(vec![
            ("pk", s("u1")),
            ("sk", s("2024-06")),
            ("plan", s("pro")),
        ]),
        item(vec![
            ("pk", s("u2")),
            ("sk", s("2023-12")),
            ("plan", s("team")),
        ]),
    ];
    for it in items {
        rt.block_on(dynamodb::put_item(&endpoint, &table, it));
    }
    for i in 0..3 {
        let it = item(vec![
            ("pk", s("big")),
            ("sk", s(&i.to_string())),
            ("blob", s(&"x".repeat(400_000))),
        ]);
        rt.block_on(dynamodb::put_item(&endpoint, &table, it));
    }
    (endpoint, table)
}

/// Runs `inputs` (one per line) through the enrichment with `extra` settings (Jsonnet,
/// merged into the library call) and `send_stdout`; the output lines.
fn run(endpoint: &str, table: &str, extra: &str, inputs: &[&str]) -> Vec<String> {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.enrich.aws.dynamodb.query({{
      aws: {{ arn: 'arn:aws:dynamodb:us-east-1:000000000000:table/{table}' }},
      attributes: {{ partition_key: 'pk', sort_key: 'sk' }},
      obj: {{ src: 'user', trg: 'found' }},
    }} + {extra}),
    sub.tf.send.stdout({{ batch: {{ size: 100000000 }} }}),
  ],
}}
"#
        ),
    );
    let stdin = inputs.iter().map(|i| format!("{i}\n")).collect::<String>();
    let out = d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        stdin,
        &dynamodb::process_env(endpoint),
    );
    out.assert_clean_success();
    out.stdout_str().lines().map(str::to_string).collect()
}

const LATEST: &str = r#"{"pk":"u1","plan":"pro","sk":"2024-06"}"#;
const MIDDLE: &str = r#"{"id":30400402455622563,"keys":["aw=="],"none":null,"ok":true,"owner":{"age":41,"name":"ann"},"pk":"u1","ratio":0.25,"raw":"aGk=","roles":["admin"],"scores":[7],"sk":"2024-03","tags":["a",2,false]}"#;
const FIRST: &str = r#"{"pk":"u1","plan":"free","sk":"2024-01"}"#;

#[test]
fn library_defaults_give_the_latest_item_and_pass_the_rest() {
    let (endpoint, table) = table();
    let out = run(
        &endpoint,
        &table,
        "{}",
        &[
            r#"{"user":"u1"}"#,
            r#"{"user":"nobody"}"#,
            r#"{"other":1}"#,
            r#"{"user":"u2","n":2}"#,
            "not json",
        ],
    );
    assert_eq!(
        out,
        vec![
            format!(r#"{{"user":"u1","found":[{LATEST}]}}"#),
            r#"{"user":"nobody"}"#.to_string(),
            r#"{"other":1}"#.to_string(),
            r#"{"user":"u2","n":2,"found":[{"pk":"u2","plan":"team","sk":"2023-12"}]}"#.to_string(),
            "not json".to_string(),
        ],
        "one output per input, in input order"
    );
}

#[test]
fn limit_and_order() {
    let (endpoint, table) = table();
    // Every item, ascending: every attribute type converted.
    let out = run(
        &endpoint,
        &table,
        "{ limit: 0, scan_index_forward: true }",
        &[r#"{"user":"u1"}"#],
    );
    assert_eq!(
        out,
        vec![format!(
            r#"{{"user":"u1","found":[{FIRST},{MIDDLE},{LATEST}]}}"#
        )]
    );
    // The two latest, descending.
    let out = run(&endpoint, &table, "{ limit: 2 }", &[r#"{"user":"u1"}"#]);
    assert_eq!(
        out,
        vec![format!(r#"{{"user":"u1","found":[{LATEST},{MIDDLE}]}}"#)]
    );
    // The oldest.
    let out = run(
        &endpoint,
        &table,
        "{ scan_index_forward: true }",
        &[r#"{"user":"u1"}"#],
    );
    assert_eq!(out, vec![format!(r#"{{"user":"u1","found":[{FIRST}]}}"#)]);
}

#[test]
fn a_pk_sk_pair_matches_one_item() {
    let (endpoint, table) = table();
    let out = run(
        &endpoint,
        &table,
        "{ limit: 0 }",
        &[
            r#"{"user":["u1","2024-03"]}"#,
            r#"{"user":["u1","1999-01"]}"#,
            r#"{"user":["u1"]}"#,
        ],
    );
    assert_eq!(
        out,
        vec![
            format!(r#"{{"user":["u1","2024-03"],"found":[{MIDDLE}]}}"#),
            r#"{"user":["u1","1999-01"]}"#.to_string(),
            r#"{"user":["u1"]}"#.to_string(),
        ]
    );
}

#[test]
fn pages_are_followed_for_every_item() {
    // 1.2 MB of items under one key: more than one 1 MB page of a query.
    let (endpoint, table) = table();
    let first_page = runtime()
        .block_on(
            dynamodb::client(&endpoint)
                .query()
                .table_name(&table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s("big"))
                .send(),
        )
        .expect("a query");
    assert!(
        first_page.last_evaluated_key().is_some() && first_page.items().len() < 3,
        "the premise: the items do not fit one page"
    );
    let out = run(
        &endpoint,
        &table,
        "{ limit: 0, scan_index_forward: true }",
        &[r#"{"user":"big"}"#],
    );
    let v: serde_json::Value = serde_json::from_str(&out[0]).expect("JSON output");
    let sks: Vec<&str> = v["found"]
        .as_array()
        .expect("an array of items")
        .iter()
        .map(|i| i["sk"].as_str().expect("a sort key"))
        .collect();
    assert_eq!(sks, ["0", "1", "2"]);
}

#[test]
fn a_missing_table_is_an_error_naming_it() {
    let endpoint = dynamodb::endpoint();
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.enrich.aws.dynamodb.query({
      aws: { arn: 'no-such-table' },
      attributes: { partition_key: 'pk' },
      obj: { src: 'user', trg: 'found' },
    }),
  ],
}
"#,
    );
    let out = d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        "{\"user\":\"u1\"}\n",
        &dynamodb::process_env(&endpoint),
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("dynamodb table no-such-table: Query failed: "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("ResourceNotFoundException"),
        "{}",
        out.stderr
    );
}
