//! The embedded library: every function, the abbreviations, the defaults, the ids, and the
//! places where it corrects Substation's library.

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::collections::BTreeSet;

use common::{auto_id, eval_err, eval_ok};
use serde_json::{Value, json};
use sluice_config::LIBRARY_SECRET_TYPES;

/// Walks a subtree of the library and calls every function: `all`/`any`/`none` of the
/// condition tree with a condition, everything else with `{}`. Each result must be exactly
/// `{type: string, settings: object}`; the walk returns `[{path, out}]`.
const WALK: &str = r#"
local sub = std.extVar('sub');
local combinators = ['all', 'any', 'none'];
local call(path, f) =
  local name = path[std.length(path) - 1];
  if std.member(combinators, name) && path[0] == 'condition' && std.length(path) == 2
  then f({ type: 'format_json', settings: {} })
  else f({});
local check(path, out) =
  assert std.isObject(out) : std.join('.', path) + ': not an object';
  // `{type}` alone for the conditions without settings (format_json, utility_random), as
  // Substation's library returns them.
  assert std.objectFields(out) == ['settings', 'type'] || std.objectFields(out) == ['type'] : std.join('.', path) + ': fields ' + std.toString(std.objectFields(out));
  assert std.isString(out.type) : std.join('.', path) + ': type is not a string';
  local settings = if std.objectHas(out, 'settings') then out.settings else {};
  assert std.isObject(settings) : std.join('.', path) + ': settings is not an object';
  { path: std.join('.', path), type: out.type, settings: settings };
local walk(x, path) =
  if std.isFunction(x) then [check(path, call(path, x))]
  else if std.isObject(x) then std.flattenArrays([walk(x[k], path + [k]) for k in std.objectFields(x)])
  else [];
{
  transform: walk(sub.transform, ['transform']),
  tf: walk(sub.tf, ['tf']),
  condition: walk(sub.condition, ['condition']),
  cnd: walk(sub.cnd, ['cnd']),
  kv_store: walk(sub.kv_store, ['kv_store']),
  secrets: walk(sub.secrets, ['secrets']),
  top: std.objectFields(sub),
}
"#;

fn types_of(walked: &Value) -> BTreeSet<String> {
    walked
        .as_array()
        .expect("array")
        .iter()
        .map(|e| e["type"].as_str().expect("type").to_string())
        .collect()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_function_compiles_and_returns_type_and_settings() {
    let out = eval_ok(WALK);
    for tree in ["transform", "condition", "kv_store", "secrets"] {
        assert!(
            !out[tree].as_array().unwrap().is_empty(),
            "{tree} has no functions"
        );
    }
    // The aliases reach the same functions.
    assert_eq!(types_of(&out["transform"]), types_of(&out["tf"]));
    assert_eq!(types_of(&out["condition"]), types_of(&out["cnd"]));
    assert_eq!(
        out["top"],
        json!([
            "cnd",
            "condition",
            "config",
            "file_path",
            "kv_store",
            "secrets",
            "tf",
            "transform"
        ])
    );
    // Many functions: the full names and the abbreviations.
    assert!(out["transform"].as_array().unwrap().len() >= 120);
    assert!(out["condition"].as_array().unwrap().len() >= 50);
}

/// The secret providers; the transform, condition and kv store types are checked against
/// the descriptors (`tests/library_registry.rs`).
#[test]
fn library_emits_exactly_these_types() {
    let out = eval_ok(WALK);
    assert_eq!(types_of(&out["secrets"]), set(LIBRARY_SECRET_TYPES));
    // The list is sorted and has no duplicates.
    assert!(
        LIBRARY_SECRET_TYPES.windows(2).all(|w| w[0] < w[1]),
        "{LIBRARY_SECRET_TYPES:?}"
    );
}

#[test]
fn every_transform_gets_an_automatic_id_and_nothing_else_does() {
    let out = eval_ok(WALK);
    for e in out["transform"].as_array().unwrap() {
        let id = e["settings"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{e}"));
        let ty = e["type"].as_str().unwrap();
        assert_eq!(id, auto_id(ty, "{ }"), "{}", e["path"]);
    }
    for tree in ["condition", "kv_store", "secrets"] {
        for e in out[tree].as_array().unwrap() {
            assert!(e["settings"].get("id").is_none(), "{e}");
        }
    }
}

/// Function paths with the type they must emit: abbreviations and full names, beside the
/// path each type's descriptor names (checked in `tests/library_registry.rs`).
#[test]
fn function_paths_emit_their_types() {
    let cases: &[(&str, &str)] = &[
        ("sub.tf.aggregate.from.array", "aggregate_from_array"),
        ("sub.tf.agg.from.arr", "aggregate_from_array"),
        ("sub.tf.agg.from.str", "aggregate_from_string"),
        ("sub.tf.agg.to.arr", "aggregate_to_array"),
        ("sub.tf.agg.to.str", "aggregate_to_string"),
        ("sub.tf.arr.join", "array_join"),
        ("sub.tf.array.zip", "array_zip"),
        (
            "sub.tf.enrich.aws.dynamodb.query",
            "enrich_aws_dynamodb_query",
        ),
        ("sub.tf.enrich.aws.lambda", "enrich_aws_lambda"),
        (
            "sub.tf.enrich.dns.domain_lookup",
            "enrich_dns_domain_lookup",
        ),
        ("sub.tf.enrich.dns.ip_lookup", "enrich_dns_ip_lookup"),
        ("sub.tf.enrich.dns.txt_lookup", "enrich_dns_txt_lookup"),
        ("sub.tf.enrich.http.get", "enrich_http_get"),
        ("sub.tf.enrich.http.post", "enrich_http_post"),
        ("sub.tf.enrich.kv_store.item.get", "enrich_kv_store_get"),
        ("sub.tf.enrich.kv_store.iget", "enrich_kv_store_get"),
        ("sub.tf.enrich.kv_store.item.set", "enrich_kv_store_set"),
        ("sub.tf.enrich.kv_store.iset", "enrich_kv_store_set"),
        ("sub.tf.enrich.kv_store.set.add", "enrich_kv_store_set_add"),
        ("sub.tf.enrich.kv_store.sadd", "enrich_kv_store_set_add"),
        ("sub.tf.fmt.from.b64", "format_from_base64"),
        ("sub.tf.format.to.base64", "format_to_base64"),
        ("sub.tf.fmt.from.gz", "format_from_gzip"),
        ("sub.tf.fmt.to.gz", "format_to_gzip"),
        ("sub.tf.fmt.from.parquet", "format_from_parquet"),
        ("sub.tf.fmt.from.pretty_print", "format_from_pretty_print"),
        ("sub.tf.fmt.from.zip", "format_from_zip"),
        ("sub.tf.hash.md5", "hash_md5"),
        ("sub.tf.hash.sha256", "hash_sha256"),
        ("sub.tf.meta.err", "meta_err"),
        ("sub.tf.meta.for_each", "meta_for_each"),
        ("sub.tf.meta.kv_store.lock", "meta_kv_store_lock"),
        ("sub.tf.meta.metric.duration", "meta_metric_duration"),
        ("sub.tf.meta.retry", "meta_retry"),
        ("sub.tf.meta.switch", "meta_switch"),
        (
            "sub.tf.net.domain.registered_domain",
            "network_domain_registered_domain",
        ),
        (
            "sub.tf.network.domain.subdomain",
            "network_domain_subdomain",
        ),
        ("sub.tf.net.domain.tld", "network_domain_top_level_domain"),
        ("sub.tf.num.max", "number_maximum"),
        ("sub.tf.number.minimum", "number_minimum"),
        ("sub.tf.num.min", "number_minimum"),
        ("sub.tf.num.math.add", "number_math_addition"),
        ("sub.tf.num.math.sub", "number_math_subtraction"),
        ("sub.tf.num.math.mul", "number_math_multiplication"),
        ("sub.tf.num.math.div", "number_math_division"),
        ("sub.tf.obj.cp", "object_copy"),
        ("sub.tf.object.copy", "object_copy"),
        ("sub.tf.obj.del", "object_delete"),
        ("sub.tf.obj.insert", "object_insert"),
        ("sub.tf.obj.jq", "object_jq"),
        ("sub.tf.obj.to.bool", "object_to_boolean"),
        ("sub.tf.obj.to.float", "object_to_float"),
        ("sub.tf.obj.to.int", "object_to_integer"),
        ("sub.tf.obj.to.str", "object_to_string"),
        ("sub.tf.obj.to.uint", "object_to_unsigned_integer"),
        ("sub.tf.send.aws.firehose", "send_aws_data_firehose"),
        ("sub.tf.send.aws.data_firehose", "send_aws_data_firehose"),
        ("sub.tf.send.aws.dynamodb.put", "send_aws_dynamodb_put"),
        ("sub.tf.send.aws.eventbridge", "send_aws_eventbridge"),
        (
            "sub.tf.send.aws.kinesis_data_stream",
            "send_aws_kinesis_data_stream",
        ),
        ("sub.tf.send.aws.lambda", "send_aws_lambda"),
        ("sub.tf.send.aws.s3", "send_aws_s3"),
        ("sub.tf.send.aws.sns", "send_aws_sns"),
        ("sub.tf.send.aws.sqs", "send_aws_sqs"),
        ("sub.tf.send.file", "send_file"),
        ("sub.tf.send.gcp.storage", "send_gcp_storage"),
        ("sub.tf.send.http.post", "send_http_post"),
        ("sub.tf.send.stdout", "send_stdout"),
        ("sub.tf.str.append", "string_append"),
        ("sub.tf.str.capture", "string_capture"),
        ("sub.tf.str.replace", "string_replace"),
        ("sub.tf.str.repl", "string_replace"),
        ("sub.tf.str.split", "string_split"),
        ("sub.tf.str.to.lower", "string_to_lower"),
        ("sub.tf.string.to.upper", "string_to_upper"),
        ("sub.tf.str.to.snake", "string_to_snake"),
        ("sub.tf.str.uuid", "string_uuid"),
        ("sub.tf.test.message", "test_message"),
        ("sub.tf.time.from.str", "time_from_string"),
        ("sub.tf.time.from.unix", "time_from_unix"),
        ("sub.tf.time.from.unix_milli", "time_from_unix_milli"),
        ("sub.tf.time.now", "time_now"),
        ("sub.tf.time.to.str", "time_to_string"),
        ("sub.tf.time.unix", "time_to_unix"),
        ("sub.tf.time.to.unix", "time_to_unix"),
        ("sub.tf.time.unix_milli", "time_to_unix_milli"),
        ("sub.tf.util.control", "utility_control"),
        ("sub.tf.utility.delay", "utility_delay"),
        ("sub.tf.util.drop", "utility_drop"),
        ("sub.tf.util.err", "utility_err"),
        ("sub.tf.util.metric.bytes", "utility_metric_bytes"),
        ("sub.tf.util.metric.count", "utility_metric_count"),
        ("sub.tf.util.metric.freshness", "utility_metric_freshness"),
        ("sub.tf.util.secret", "utility_secret"),
        ("sub.cnd.meta.all", "meta_all"),
        ("sub.cnd.meta.any", "meta_any"),
        ("sub.cnd.meta.none", "meta_none"),
        ("sub.cnd.fmt.json", "format_json"),
        ("sub.cnd.format.mime", "format_mime"),
        ("sub.cnd.net.ip.global_unicast", "network_ip_global_unicast"),
        (
            "sub.cnd.net.ip.link_local_multicast",
            "network_ip_link_local_multicast",
        ),
        (
            "sub.cnd.net.ip.link_local_unicast",
            "network_ip_link_local_unicast",
        ),
        ("sub.cnd.net.ip.loopback", "network_ip_loopback"),
        ("sub.cnd.net.ip.multicast", "network_ip_multicast"),
        ("sub.cnd.network.ip.private", "network_ip_private"),
        ("sub.cnd.net.ip.unicast", "network_ip_unicast"),
        ("sub.cnd.net.ip.unspecified", "network_ip_unspecified"),
        ("sub.cnd.net.ip.valid", "network_ip_valid"),
        ("sub.cnd.num.eq", "number_equal_to"),
        ("sub.cnd.number.equal_to", "number_equal_to"),
        ("sub.cnd.num.gt", "number_greater_than"),
        ("sub.cnd.num.lt", "number_less_than"),
        ("sub.cnd.num.bitwise.and", "number_bitwise_and"),
        ("sub.cnd.num.bitwise.or", "number_bitwise_or"),
        ("sub.cnd.num.bitwise.xor", "number_bitwise_xor"),
        ("sub.cnd.num.bitwise.not", "number_bitwise_not"),
        ("sub.cnd.num.len.eq", "number_length_equal_to"),
        (
            "sub.cnd.num.length.greater_than",
            "number_length_greater_than",
        ),
        ("sub.cnd.num.len.gt", "number_length_greater_than"),
        ("sub.cnd.num.len.lt", "number_length_less_than"),
        ("sub.cnd.str.has", "string_contains"),
        ("sub.cnd.string.contains", "string_contains"),
        ("sub.cnd.str.suffix", "string_ends_with"),
        ("sub.cnd.str.ends_with", "string_ends_with"),
        ("sub.cnd.str.eq", "string_equal_to"),
        ("sub.cnd.str.gt", "string_greater_than"),
        ("sub.cnd.str.lt", "string_less_than"),
        ("sub.cnd.str.prefix", "string_starts_with"),
        ("sub.cnd.str.starts_with", "string_starts_with"),
        ("sub.cnd.str.match", "string_match"),
        ("sub.cnd.util.random", "utility_random"),
        ("sub.condition.utility.random", "utility_random"),
        ("sub.secrets.aws.secrets_manager", "aws_secrets_manager"),
        ("sub.secrets.environment_variable", "environment_variable"),
    ];
    let code = format!(
        "local sub = std.extVar('sub');\n[\n{}\n]",
        cases
            .iter()
            .map(|(path, _)| format!("  {path}().type,"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let out = eval_ok(&code);
    for ((path, want), got) in cases.iter().zip(out.as_array().unwrap()) {
        assert_eq!(got, want, "{path}");
    }
}

/// Runs `expr` (with `sub` bound) and returns the `settings` of its result.
fn settings(expr: &str) -> Value {
    let mut out = eval_ok(&format!("local sub = std.extVar('sub'); {expr}"));
    out["settings"].take()
}

/// Like [`settings`] without the automatic id.
fn settings_without_id(expr: &str) -> Value {
    let mut s = settings(expr);
    s.as_object_mut().unwrap().remove("id");
    s
}

#[test]
fn abbreviations_expand() {
    let cases: &[(&str, Value)] = &[
        (
            "sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } })",
            json!({"object": {"source_key": "a", "target_key": "b"}}),
        ),
        (
            "sub.tf.obj.cp({ object: { source_key: 'a', target_key: 'b' } })",
            json!({"object": {"source_key": "a", "target_key": "b"}}),
        ),
        (
            "sub.tf.agg.to.arr({ obj: { btch: 'k', trg: 't' } })",
            json!({
                "object": {"batch_key": "k", "target_key": "t"},
                "batch": {"count": 1000, "size": 1000000, "duration": "1m"}
            }),
        ),
        (
            "sub.tf.send.stdout({ aux_tforms: [{ type: 'utility_drop', settings: {} }] })",
            json!({
                "auxiliary_transforms": [{"type": "utility_drop"}],
                "batch": {"count": 1000, "size": 1000000, "duration": "1m"}
            }),
        ),
        (
            "sub.tf.send.aws.lambda({ aws: { arn: 'arn:x' }, aux_tforms: [sub.tf.util.drop()] })",
            json!({
                "aws": {"arn": "arn:x", "assume_role_arn": null},
                "auxiliary_transforms": [
                    {"type": "utility_drop", "settings": {"id": auto_id("utility_drop", "{ }")}}
                ],
                "batch": {"count": 1000, "size": 1000000, "duration": "1m"}
            }),
        ),
        (
            "sub.tf.send.http.post({ url: 'https://x', hdr: [{ key: 'A', value: 'b' }] })",
            json!({
                "url": "https://x",
                "headers": [{"key": "A", "value": "b"}],
                "batch": {"count": 1000, "size": 1000000, "duration": "1m"}
            }),
        ),
        (
            "sub.tf.str.replace({ pattern: 'a', repl: 'b' })",
            json!({"pattern": "a", "replacement": "b"}),
        ),
        ("sub.tf.str.split({ sep: ',' })", json!({"separator": ","})),
        (
            "sub.tf.agg.from.str({ sep: '\\n' })",
            json!({"separator": "\n"}),
        ),
        (
            "sub.cnd.str.eq({ obj: { src: 'a', trg: 'b' }, value: 'x' })",
            json!({"object": {"source_key": "a", "target_key": "b"}, "value": "x"}),
        ),
        (
            "sub.tf.meta.kv_store.lock({ obj: { src: 'k', ttl_key: 't' }, kv_store: sub.kv_store.memory() })",
            json!({
                "object": {"source_key": "k", "ttl_key": "t"},
                "kv_store": {"type": "memory", "settings": {"capacity": 1024}}
            }),
        ),
        (
            "sub.tf.obj.cp({ obj: { src: 'a', source_key: 'a' } })",
            json!({"object": {"source_key": "a"}}),
        ),
    ];
    for (expr, want) in cases {
        assert_eq!(&settings_without_id(expr), want, "{expr}");
    }
}

#[test]
fn conflicting_abbreviations_are_reported() {
    let e = eval_err(
        "local sub = std.extVar('sub'); sub.tf.obj.cp({ obj: { src: 'a', source_key: 'b' } })",
    );
    assert!(e.contains("object_copy"), "{e}");
    assert!(e.contains("both `src` and `source_key`"), "{e}");
    let e =
        eval_err("local sub = std.extVar('sub'); sub.tf.str.split({ sep: ',', separator: ';' })");
    assert!(e.contains("both `sep` and `separator`"), "{e}");
    let e = eval_err("local sub = std.extVar('sub'); sub.tf.obj.cp('a')");
    assert!(
        e.contains("object_copy: settings must be an object, not string"),
        "{e}"
    );
}

#[test]
fn library_defaults() {
    let batch = json!({"count": 1000, "size": 1000000, "duration": "1m"});
    let cases: &[(&str, Value)] = &[
        ("sub.tf.send.stdout()", json!({"batch": batch})),
        ("sub.tf.send.aws.sqs()", json!({"batch": batch})),
        ("sub.tf.util.control()", json!({"batch": batch})),
        ("sub.tf.agg.to.str()", json!({"batch": batch})),
        (
            "sub.tf.send.aws.kinesis_data_stream()",
            json!({
                "batch": batch,
                "use_batch_key_as_partition_key": false,
                "enable_record_aggregation": false
            }),
        ),
        (
            "sub.tf.send.aws.s3()",
            json!({
                "batch": batch,
                "file_path": {"time_format": "2006/01/02", "uuid": true},
                "storage_class": "STANDARD"
            }),
        ),
        (
            "sub.tf.send.file({ file_path: { prefix: 'out', suffix: '.json' } })",
            json!({
                "batch": batch,
                "file_path": {"prefix": "out", "time_format": "2006/01/02", "uuid": true, "suffix": ".json"}
            }),
        ),
        ("sub.tf.meta.err()", json!({"error_messages": [".*"]})),
        (
            "sub.tf.meta.retry()",
            json!({"error_messages": [".*"], "retry": {"count": 3, "delay": "1s"}}),
        ),
        (
            "sub.tf.meta.retry({ retry: { count: 5 } })",
            json!({"error_messages": [".*"], "retry": {"count": 5, "delay": "1s"}}),
        ),
        (
            "sub.tf.time.from.str({ format: 'x' })",
            json!({"format": "x", "location": "UTC"}),
        ),
        ("sub.tf.time.to.string()", json!({"location": "UTC"})),
        (
            "sub.tf.enrich.aws.dynamodb.query()",
            json!({"limit": 1, "scan_index_forward": false}),
        ),
        (
            "sub.tf.enrich.dns.ip_lookup()",
            json!({"request": {"timeout": "1s"}}),
        ),
        (
            "sub.tf.enrich.kv_store.iget()",
            json!({"close_kv_store": false}),
        ),
        (
            "sub.tf.enrich.kv_store.iset()",
            json!({"close_kv_store": false, "ttl_offset": "0s"}),
        ),
        (
            "sub.tf.enrich.kv_store.sadd()",
            json!({"close_kv_store": false, "ttl_offset": "0s"}),
        ),
        ("sub.tf.meta.kv_store.lock()", json!({})),
        ("sub.tf.str.capture()", json!({"count": 0})),
        (
            "sub.cnd.num.len.eq({ value: 3 })",
            json!({"measurement": "byte", "value": 3}),
        ),
        ("sub.cnd.num.len.gt()", json!({"measurement": "byte"})),
        ("sub.kv_store.memory()", json!({"capacity": 1024})),
        (
            "sub.kv_store.csv_file({ file: 'a.csv' })",
            json!({"file": "a.csv", "delimiter": ","}),
        ),
        ("sub.kv_store.json_file()", json!({"is_lines": false})),
        (
            "sub.kv_store.aws.dynamodb()",
            json!({"consistent_read": false}),
        ),
        (
            "sub.kv_store.memory({ capacity: 10 })",
            json!({"capacity": 10}),
        ),
        // Nulls and empty values vanish so that the engine's defaults apply.
        (
            "sub.tf.send.stdout({ batch: { count: null }, aux_tforms: [] })",
            json!({"batch": {"size": 1000000, "duration": "1m"}}),
        ),
    ];
    for (expr, want) in cases {
        assert_eq!(&settings_without_id(expr), want, "{expr}");
    }
    // A secret's `id` is its cache key, given by the user, not an automatic one.
    assert_eq!(
        settings("sub.secrets.environment_variable({ id: 'k', name: 'E' })"),
        json!({"id": "k", "name": "E"})
    );
    assert_eq!(
        settings("sub.secrets.aws.secrets_manager({ id: 'k', aws: { arn: 'a' } })"),
        json!({"id": "k", "aws": {"arn": "a"}})
    );
    assert_eq!(
        eval_ok("std.extVar('sub').config"),
        json!({
            "aws": {"arn": null, "assume_role_arn": null},
            "gcp": {"resource": null},
            "batch": batch,
            "metric": {"name": null, "attributes": null, "destination": null},
            "object": {"source_key": null, "target_key": null, "batch_key": null},
            "request": {"timeout": "1s"},
            "retry": {"count": 3, "delay": "1s"}
        })
    );
    assert_eq!(
        eval_ok("std.extVar('sub').file_path"),
        json!({"prefix": null, "time_format": "2006/01/02", "uuid": true, "suffix": null})
    );
}

#[test]
fn overriding_the_shared_defaults_changes_every_function() {
    let s = settings("(sub + { config+: { batch+: { count: 10 } } }).tf.send.stdout()");
    assert_eq!(
        s["batch"],
        json!({"count": 10, "size": 1000000, "duration": "1m"})
    );
}

#[test]
fn automatic_ids_follow_substation_and_user_ids_are_kept() {
    // std.toString, as go-jsonnet prints it: the id matches Substation's for the same call.
    assert_eq!(
        eval_ok("[std.toString({ b: [1, 2], a: 'x' }), std.toString({}), std.toString([])]"),
        json!([r#"{"a": "x", "b": [1, 2]}"#, "{ }", "[ ]"])
    );
    let s = settings("sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } })");
    assert_eq!(
        s["id"],
        auto_id("object_copy", r#"{"obj": {"src": "a", "trg": "b"}}"#)
    );
    assert_eq!(
        settings("sub.tf.send.stdout()")["id"],
        auto_id("send_stdout", "{ }")
    );

    // Stable across calls and evaluations, different for different settings.
    let out = eval_ok(
        "local sub = std.extVar('sub'); [
           sub.tf.obj.cp({ obj: { src: 'a' } }).settings.id,
           sub.tf.obj.cp({ obj: { src: 'a' } }).settings.id,
           sub.tf.obj.cp({ obj: { src: 'b' } }).settings.id,
           sub.tf.obj.del({ obj: { src: 'a' } }).settings.id,
         ]",
    );
    assert_eq!(out[0], out[1]);
    assert_ne!(out[0], out[2]);
    assert_ne!(out[0], out[3]);
    assert_eq!(
        settings("sub.tf.obj.cp({ obj: { src: 'a' } })")["id"],
        out[0]
    );
    let id = out[0].as_str().unwrap();
    assert_eq!(id.len(), 17);
    assert!(id.chars().enumerate().all(|(i, c)| if i == 8 {
        c == '-'
    } else {
        c.is_ascii_hexdigit()
    }));

    assert_eq!(
        settings("sub.tf.obj.cp({ id: 'my-copy', obj: { src: 'a' } })")["id"],
        json!("my-copy")
    );
}

#[test]
fn btch_works() {
    assert_eq!(
        settings("sub.tf.send.aws.kinesis_data_stream({ obj: { btch: 'meta shard' } })")["object"],
        json!({"batch_key": "meta shard"})
    );
}

#[test]
fn condition_combinators_wrap_one_or_many() {
    let out = eval_ok(
        "local sub = std.extVar('sub');
         local a = sub.cnd.str.eq({ obj: { src: 'a' }, value: 'x' });
         local b = sub.cnd.num.gt({ value: 1 });
         [sub.cnd.all(a), sub.cnd.any([a, b]), sub.cnd.none([a])]",
    );
    let a = json!({"type": "string_equal_to", "settings": {"object": {"source_key": "a"}, "value": "x"}});
    let b = json!({"type": "number_greater_than", "settings": {"value": 1}});
    assert_eq!(
        out,
        json!([
            {"type": "meta_all", "settings": {"conditions": [a]}},
            {"type": "meta_any", "settings": {"conditions": [a, b]}},
            {"type": "meta_none", "settings": {"conditions": [a]}},
        ])
    );
}

#[test]
fn values_are_kept_exactly() {
    assert_eq!(
        settings_without_id("sub.tf.obj.insert({ obj: { trg: 'a' }, value: {} })"),
        json!({"object": {"target_key": "a"}, "value": {}})
    );
    assert_eq!(
        settings_without_id("sub.tf.obj.insert({ obj: { trg: 'a' }, value: [] })")["value"],
        json!([])
    );
    assert_eq!(
        settings_without_id("sub.tf.test.message({ value: { a: null, b: [], c: { d: {} } } })"),
        json!({"value": {"a": null, "b": [], "c": {"d": {}}}})
    );
    assert_eq!(
        settings_without_id("sub.tf.obj.insert({ obj: { trg: 'a' }, value: false })")["value"],
        json!(false)
    );
    // Inside inner transform lists too.
    let s = settings(
        "sub.tf.meta.switch({ cases: [{ transforms: [sub.tf.test.message({ value: { e: [] } })] }] })",
    );
    assert_eq!(
        s["cases"][0]["transforms"][0]["settings"]["value"],
        json!({"e": []})
    );
}

#[test]
fn substation_library_defects_are_corrected() {
    // txt_lookup and the kv store items emit Substation's type names (the engine builds
    // both spellings).
    assert_eq!(
        eval_ok(
            "local sub = std.extVar('sub'); [sub.tf.enrich.dns.txt_lookup().type, sub.tf.enrich.kv_store.item.get().type, sub.tf.enrich.kv_store.item.set().type]"
        ),
        json!([
            "enrich_dns_txt_lookup",
            "enrich_kv_store_get",
            "enrich_kv_store_set"
        ])
    );
    // json_file works without an argument.
    assert_eq!(
        eval_ok("std.extVar('sub').kv_store.json_file()"),
        json!({"type": "json_file", "settings": {"is_lines": false}})
    );
    // format.json and utility.random have no settings: `{type}` alone, as Substation's.
    assert_eq!(
        eval_ok("std.extVar('sub').cnd.fmt.json({ obj: { src: 'a' } })"),
        json!({"type": "format_json"})
    );
    assert_eq!(
        eval_ok("std.extVar('sub').cnd.util.random()"),
        json!({"type": "utility_random"})
    );
    let e = eval_err("std.extVar('sub').cnd.util.random('x')");
    assert!(
        e.contains("utility_random: settings must be an object"),
        "{e}"
    );
    // send.aws.lambda keeps Substation's nulls.
    assert_eq!(
        settings_without_id("sub.tf.send.aws.lambda({ aws: { arn: 'a' } })"),
        json!({"aws": {"arn": "a", "assume_role_arn": null}, "auxiliary_transforms": null, "batch": {"count": 1000, "size": 1000000, "duration": "1m"}})
    );
    // enrich.http.post reads body_key inside object.
    assert_eq!(
        settings_without_id(
            "sub.tf.enrich.http.post({ url: 'u', body_key: 'b', obj: { trg: 't' } })"
        ),
        json!({"url": "u", "object": {"body_key": "b", "target_key": "t"}, "request": {"timeout": "1s"}})
    );
    assert_eq!(
        settings_without_id("sub.tf.enrich.http.post({ url: 'u', obj: { body_key: 'b' } })"),
        json!({"url": "u", "object": {"body_key": "b"}, "request": {"timeout": "1s"}})
    );
    let e = eval_err(
        "std.extVar('sub').tf.enrich.http.post({ body_key: 'a', obj: { body_key: 'b' } })",
    );
    assert!(e.contains("both `body_key` and `object.body_key`"), "{e}");
    assert_eq!(
        settings_without_id("sub.tf.enrich.http.get({ url: 'u' })"),
        json!({"url": "u", "request": {"timeout": "1s"}})
    );
}

#[test]
fn a_substation_style_config_compiles() {
    let out = eval_ok(
        r#"
local sub = std.extVar('sub');
local is_err = sub.cnd.any(sub.cnd.str.eq({ obj: { src: 'errorCode' }, value: 'AccessDenied' }));
{
  concurrency: 2,
  tests: [{
    name: 'copies',
    transforms: [sub.tf.test.message({ value: { a: 1 } })],
    condition: sub.cnd.num.len.gt({ value: 0 }),
  }],
  transforms: [
    sub.tf.obj.cp({ obj: { src: 'a', trg: 'b' } }),
    sub.tf.meta.switch({ cases: [
      { condition: is_err, transforms: [sub.tf.obj.insert({ obj: { trg: 'outcome' }, value: 'failure' })] },
      { transforms: [sub.tf.obj.insert({ obj: { trg: 'outcome' }, value: 'success' })] },
    ] }),
    sub.tf.meta.err({ transforms: [sub.tf.send.aws.sqs({ aws: { arn: 'arn:aws:sqs:us-east-1:1:q' } })] }),
    sub.tf.send.stdout(),
  ],
}
"#,
    );
    let t = out["transforms"].as_array().unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(
        t[1]["settings"]["cases"][0]["condition"]["type"],
        "meta_any"
    );
    assert_eq!(
        t[1]["settings"]["cases"][1]["transforms"][0]["settings"]["value"],
        "success"
    );
    assert_eq!(t[2]["settings"]["transforms"][0]["type"], "send_aws_sqs");
    assert_eq!(
        out["tests"][0]["condition"]["type"],
        "number_length_greater_than"
    );
}
