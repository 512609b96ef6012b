//! Every function of the embedded library compiles to the JSON Substation's library compiles
//! it to, ids included.
//!
//! `fixtures/substation_library.json` holds, for each of the 168 function paths of
//! Substation's `substation.libsonnet` (v2.8) called with three settings objects (none,
//! abbreviated keys, and a settings object with every common field), the JSON that
//! Substation's library produced (evaluated with the reference `jsonnet` tool; see
//! `fixtures/README.md`), or `error` where Substation's library fails. Here each call is
//! evaluated with sluice's library and compared. The only differences allowed are
//! [`KNOWN`]'s, each a Substation defect that sluice corrects (listed in
//! `docs/reference/README.md#where-sluice-differs-from-substation`).

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use common::eval_ok;
use serde_json::Value;

/// Functions whose output differs on purpose: (function path, field of `settings` that
/// Substation's library adds and sluice's does not, why).
const KNOWN: &[(&str, &str, &str)] = &[(
    "transform.meta.kv_store.lock",
    "ttl_offset",
    "Substation injects ttl_offset '0s', a TTL of 0 that disables deduplication; sluice leaves \
     it unset so the 24-hour default applies",
)];

/// The calls and what Substation's library made of them.
fn fixture() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/substation_library.json"
    ))
    .expect("fixture");
    serde_json::from_str(&text).expect("fixture is JSON")
}

#[test]
fn every_function_compiles_as_substations_library_does() {
    let cases = fixture();
    assert_eq!(cases.len(), 168 * 3, "every function, three settings each");

    // One Jsonnet program that makes every call, so the library is evaluated once.
    let calls: Vec<String> = cases
        .iter()
        .map(|c| {
            format!(
                "sub.{}({})",
                c["function"].as_str().unwrap(),
                c["settings"].as_str().unwrap()
            )
        })
        .collect();
    let program = format!(
        "local sub = std.extVar('sub');\n[\n{}\n]\n",
        calls.join(",\n")
    );
    let ours = eval_ok(&program);
    let ours = ours.as_array().expect("an array");

    let mut differences = Vec::new();
    let mut compared = 0;
    for (case, got) in cases.iter().zip(ours) {
        let function = case["function"].as_str().unwrap();
        // Where Substation's library fails, sluice's may work: nothing to compare.
        let Some(want) = case.get("output") else {
            continue;
        };
        let mut want = want.clone();
        for (f, field, _) in KNOWN {
            if *f == function
                && let Some(s) = want.get_mut("settings").and_then(Value::as_object_mut)
            {
                s.remove(*field);
            }
        }
        compared += 1;
        if &want != got {
            differences.push(format!(
                "sub.{function}({}):\n  Substation: {want}\n  sluice:     {got}",
                case["settings"].as_str().unwrap()
            ));
        }
    }
    assert!(compared >= 500, "compared {compared}");
    assert!(
        differences.is_empty(),
        "{} calls differ from Substation's library:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// The known differences are still differences: when Substation's output stops having the
/// field, the entry must go.
#[test]
fn the_known_differences_are_real() {
    let cases = fixture();
    for (function, field, why) in KNOWN {
        assert!(!why.is_empty());
        let present = cases
            .iter()
            .any(|c| c["function"] == *function && c["output"]["settings"].get(*field).is_some());
        assert!(present, "{function}: Substation's output has no {field}");
    }
}

/// A setting that is not a whole number gets Substation's id: go-jsonnet writes `-1.1` as
/// `-1.1000000000000001` in the text the id hashes (ids from Substation's library). Text in
/// strings is hashed as it is.
#[test]
fn ids_hash_numbers_as_go_jsonnet_writes_them() {
    let out = eval_ok(
        "local sub = std.extVar('sub'); [
           sub.tf.test.message({ value: -1.1 }).settings.id,
           sub.tf.num.max({ value: 2.3 }).settings.id,
           sub.tf.test.message({ value: 'x1.1' }).settings.id
             == std.md5('test_message')[0:8] + '-' + std.md5(std.toString({ value: 'x1.1' }))[0:8],
         ]",
    );
    assert_eq!(
        out,
        serde_json::json!(["f0b75976-f1919a26", "319cc288-b9d5031a", true])
    );
}
