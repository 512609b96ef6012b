//! `send_aws_dynamodb_put` through the real `sluice` binary against dynoxide: items written
//! with `BatchWriteItem`, and the transactional mode inside `meta_kv_store_lock`, where each
//! message's items and the record of their delivery in its lock are one transaction (the
//! lock is committed once every send of the message delivered it). The sink table is
//! scanned back and the lock table read, so every assertion is about what DynamoDB holds.

use std::collections::BTreeMap;

use crate::common::{Dir, Output, dynamodb, runtime};

/// A sink table `name` keyed by `pk` and a lock table `locks` keyed by `PK`.
fn tables(endpoint: &str, sink: &str, locks: &str) {
    runtime().block_on(async {
        dynamodb::create_lock_table(endpoint, sink, "pk", None, "ttl").await;
        dynamodb::create_lock_table(endpoint, locks, "PK", None, "ttl").await;
    });
}

/// The sink's items as `pk → n`.
fn sink(endpoint: &str, table: &str) -> BTreeMap<String, String> {
    runtime()
        .block_on(dynamodb::scan(endpoint, table))
        .into_iter()
        .map(|i| (i["pk"].clone(), i.get("n").cloned().unwrap_or_default()))
        .collect()
}

fn run(d: &Dir, endpoint: &str, config: String, input: &str) -> Output {
    d.write("cfg.jsonnet", config);
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        input.as_bytes().to_vec(),
        &dynamodb::process_env(endpoint),
    )
}

fn lines(ids: impl Iterator<Item = u32>) -> String {
    ids.map(|i| format!("{{\"pk\":\"id-{i}\",\"n\":{i}}}\n"))
        .collect()
}

#[test]
fn batch_write_puts_every_item_and_the_last_write_of_a_key_wins() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("sluice-put");
    runtime().block_on(dynamodb::create_lock_table(
        &endpoint, &table, "pk", None, "ttl",
    ));
    let mut input = lines(0..1000);
    // id-7 again, later, with another value: one BatchWriteItem may not hold both.
    input.push_str("{\"pk\":\"id-7\",\"n\":70}\n");
    let d = Dir::new();
    let config = format!(
        r#"
local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.send.aws.dynamodb.put({{ aws: {{ arn: 'arn:aws:dynamodb:us-east-1:123456789012:table/{table}' }} }}),
  sub.tf.util.drop(),
] }}
"#
    );
    let out = run(&d, &endpoint, config, &input);
    out.assert_clean_success();
    let got = sink(&endpoint, &table);
    assert_eq!(got.len(), 1000);
    assert_eq!(got["id-7"], "70");
    assert_eq!(got["id-999"], "999");
}

#[test]
fn a_bad_item_is_an_error_naming_the_rule() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("sluice-put-bad");
    runtime().block_on(dynamodb::create_lock_table(
        &endpoint, &table, "pk", None, "ttl",
    ));
    let d = Dir::new();
    let config = format!(
        r#"
local sub = std.extVar('sub');
{{ transforms: [ sub.tf.send.aws.dynamodb.put({{ aws: {{ arn: '{table}' }} }}) ] }}
"#
    );
    let out = run(&d, &endpoint, config, "[1,2]\n");
    out.assert_code(1);
    let err = &out.stderr;
    assert!(err.contains("an item must be a JSON object"), "{err}");
    assert!(
        err.contains("<stdin>:1: not delivered: transforms[0] (send_aws_dynamodb_put, id "),
        "{err}"
    );
}

fn transactional_config(sink: &str, locks: &str) -> String {
    format!(
        r#"
local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.meta.kv_store.lock({{
    kv_store: sub.kv_store.aws.dynamodb({{
      aws: {{ arn: '{locks}' }},
      attributes: {{ partition_key: 'PK', ttl: 'ttl' }},
    }}),
    prefix: 'put',
    object: {{ source_key: 'pk' }},
    duplicates: 'drop',
    transforms: [
      sub.tf.send.aws.dynamodb.put({{ aws: {{ arn: '{sink}' }}, transactional: true }}),
    ],
  }}),
  sub.tf.send.stdout(),
] }}
"#
    )
}

#[test]
fn transactional_puts_write_each_item_once_and_redeliveries_are_dropped() {
    let endpoint = dynamodb::endpoint();
    let sink_table = dynamodb::unique_table("sluice-put-tx");
    let locks = dynamodb::unique_table("sluice-put-tx-locks");
    tables(&endpoint, &sink_table, &locks);
    let d = Dir::new();
    // 300 messages, 20 of them delivered twice in the same run.
    let mut input = lines(0..300);
    input.push_str(&lines(100..120));
    let out = run(
        &d,
        &endpoint,
        transactional_config(&sink_table, &locks),
        &input,
    );
    out.assert_clean_success();
    assert_eq!(sink(&endpoint, &sink_table).len(), 300);
    // Every lock committed, once its items were written.
    let lock_items = runtime().block_on(dynamodb::scan(&endpoint, &locks));
    assert_eq!(lock_items.len(), 300);
    assert!(
        lock_items.iter().all(|i| i["lock_status"] == "committed"),
        "{:?}",
        lock_items.iter().find(|i| i["lock_status"] != "committed")
    );
    // The redelivery of the whole input (a source retrying) writes nothing and passes nothing.
    let again = run(
        &d,
        &endpoint,
        transactional_config(&sink_table, &locks),
        &input,
    );
    again.assert_clean_success();
    assert_eq!(again.stdout_str(), "");
    assert_eq!(sink(&endpoint, &sink_table).len(), 300);
}

#[test]
fn a_failed_transaction_leaves_no_key_locked_so_a_redelivery_writes_the_items() {
    let endpoint = dynamodb::endpoint();
    let sink_table = dynamodb::unique_table("sluice-put-txfail");
    let locks = dynamodb::unique_table("sluice-put-txfail-locks");
    // Only the lock table exists: every transaction fails.
    runtime().block_on(dynamodb::create_lock_table(
        &endpoint, &locks, "PK", None, "ttl",
    ));
    let d = Dir::new();
    let input = lines(0..50);
    let out = run(
        &d,
        &endpoint,
        transactional_config(&sink_table, &locks),
        &input,
    );
    out.assert_code(1);
    let err = &out.stderr;
    assert!(err.contains(&sink_table), "{err}");
    // Nothing is left locked: every key was given back or left with its lease ended (a
    // copy the send held is kept in its progress, for the next attempt to check), so the
    // redelivery takes each at once.
    let left = runtime().block_on(dynamodb::scan(&endpoint, &locks));
    assert!(
        left.iter()
            .all(|i| i.get("lock_lease_until").map(String::as_str) == Some("0")),
        "{:?}\n{err}",
        left.first()
    );
    // The source redelivers once the table exists: everything is written.
    runtime().block_on(dynamodb::create_lock_table(
        &endpoint,
        &sink_table,
        "pk",
        None,
        "ttl",
    ));
    let out = run(
        &d,
        &endpoint,
        transactional_config(&sink_table, &locks),
        &input,
    );
    out.assert_clean_success();
    assert_eq!(sink(&endpoint, &sink_table).len(), 50);
}

/// Issue 50, finding 2: a transactional put and another send in one lock. The other send
/// failed, but the transaction had committed the key already: the redelivery was a
/// duplicate and the other sink never got the message. Now the transaction records that the
/// put delivered (the lock's progress); the redelivery skips the put (the items keep what
/// the first run wrote) and delivers to the other sink.
#[test]
fn a_transactional_put_and_a_failed_send_beside_it_each_deliver_once() {
    let endpoint = dynamodb::endpoint();
    let sink_table = dynamodb::unique_table("sluice-put-both");
    let locks = dynamodb::unique_table("sluice-put-both-locks");
    tables(&endpoint, &sink_table, &locks);
    let d = Dir::new();
    let config = |run: u32| {
        format!(
            r#"
local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.meta.kv_store.lock({{
    kv_store: sub.kv_store.aws.dynamodb({{
      aws: {{ arn: '{locks}' }},
      attributes: {{ partition_key: 'PK', ttl: 'ttl' }},
    }}),
    prefix: 'both',
    object: {{ source_key: 'pk' }},
    duplicates: 'drop',
    transforms: [
      sub.tf.obj.insert({{ obj: {{ trg: 'run' }}, value: {run} }}),
      sub.tf.send.aws.dynamodb.put({{ aws: {{ arn: '{sink_table}' }}, transactional: true }}),
      sub.tf.send.file({{ file_path: {{ prefix: 'out', uuid: true, suffix: '.jsonl' }}, separator: '\n' }}),
    ],
  }}),
  sub.tf.util.drop(),
] }}
"#
        )
    };
    // `out` is a file, not a directory: the file send fails, after the put delivered.
    d.write("out", "in the way");
    let input = lines(0..5);
    let out = run(&d, &endpoint, config(1), &input);
    out.assert_code(1);
    let runs = || -> BTreeMap<String, String> {
        runtime()
            .block_on(dynamodb::scan(&endpoint, &sink_table))
            .into_iter()
            .map(|i| (i["pk"].clone(), i.get("run").cloned().unwrap_or_default()))
            .collect()
    };
    assert_eq!(runs().len(), 5, "the put delivered");
    let pending = runtime().block_on(dynamodb::scan(&endpoint, &locks));
    assert_eq!(pending.len(), 5);
    assert!(
        pending
            .iter()
            .all(|i| i["lock_status"] == "pending" && i.contains_key("lock_progress")),
        "kept with what was delivered: {pending:?}"
    );
    // The source redelivers once the file send can write.
    std::fs::remove_file(d.path().join("out")).unwrap();
    run(&d, &endpoint, config(2), &input).assert_clean_success();
    assert!(
        runs().values().all(|r| r == "1"),
        "the items were not written again: {:?}",
        runs()
    );
    let mut written: Vec<String> = Vec::new();
    let mut dirs = vec![d.path().join("out")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let text = std::fs::read_to_string(p).unwrap();
                written.extend(text.lines().map(str::to_string));
            }
        }
    }
    written.sort();
    assert_eq!(
        written.len(),
        5,
        "each message once in the files: {written:?}"
    );
    let committed = runtime().block_on(dynamodb::scan(&endpoint, &locks));
    assert!(committed.iter().all(|i| i["lock_status"] == "committed"));
}
