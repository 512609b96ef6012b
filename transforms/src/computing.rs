//! The transforms that say they only compute a value from what they read
//! ([`sluice_engine::MapPlan::Compute`]: `string_to_*`, `number_math_*`, `time_*` between
//! epochs and to text), checked against what they do one by one: the pipeline fuses them
//! with the copies and inserts next to them into one step, which must give the same data
//! and the same error (with the data the steps before it left) on every kind of input.

use std::sync::Arc;

use sluice_engine::{MapPlan, Message, Pipeline, Transform, json, testing};

use crate::registry;

/// `(type, source, target)` of each step of the chain, all in object mode.
const CHAIN: &[(&str, &str, &str)] = &[
    ("object_copy", "event.original.uid", "event.id"),
    ("string_to_lower", "event.original.uid", "event.hash"),
    (
        "string_to_upper",
        "event.original.proto",
        "network.transport",
    ),
    ("string_to_snake", "event.original.name", "event.snake"),
    (
        "number_math_multiplication",
        "[event.original.duration,!1000000000]",
        "event.duration",
    ),
    (
        "number_math_division",
        "[event.original.orig_bytes,event.original.resp_bytes]",
        "network.ratio",
    ),
    (
        "number_math_subtraction",
        "[event.original.orig_bytes,event.original.missing,event.original.resp_bytes]",
        "network.diff",
    ),
    ("number_math_addition", "event.original.list", "network.sum"),
    ("time_from_unix", "event.original.ts", "\\@timestamp"),
    ("time_from_unix_milli", "event.original.ms", "event.start"),
    ("time_to_unix", "event.original.ns", "event.end"),
    ("time_to_unix_milli", "event.original.ns", "event.end_ms"),
    ("time_to_string", "\\@timestamp", "\\@timestamp"),
    ("object_copy", "event.original.proto", "network.protocol"),
];

/// The chain's steps, named `t0`, `t1`, ...
fn steps() -> Vec<(Arc<str>, Transform)> {
    let r = registry();
    CHAIN
        .iter()
        .enumerate()
        .map(|(i, (ty, source, target))| {
            let object = json!({"source_key": source, "target_key": target});
            let settings = if *ty == "time_to_string" {
                json!({"object": object, "format": "2006-01-02T15:04:05.000Z"})
            } else {
                json!({"object": object})
            };
            let t = testing::build(&r, json!({"type": ty, "settings": settings}))
                .unwrap_or_else(|e| panic!("{ty}: {e}"));
            (Arc::from(format!("t{i}")), t)
        })
        .collect()
}

/// The data after `pipelines` one after another, or the first error with the data as the
/// steps before it left it.
fn through(pipelines: &[Pipeline], data: &str) -> Result<String, String> {
    let mut msg = Message::new(data.as_bytes().to_vec());
    for p in pipelines {
        let map = p.as_map().expect("map steps are a map");
        if let Err(e) = map.map(&mut msg) {
            return Err(format!("{e} | {}", String::from_utf8_lossy(msg.data())));
        }
    }
    Ok(String::from_utf8_lossy(msg.data()).into_owned())
}

#[test]
fn fused_computations_give_what_the_steps_give_one_by_one() {
    let fused = [Pipeline::new(steps())];
    let alone: Vec<Pipeline> = steps()
        .into_iter()
        .map(|s| Pipeline::new(vec![s]))
        .collect();
    let original = r#"{"ts":1591367999.430166,"uid":"C5bLoe","proto":"tcp","name":"Some Name","duration":0.25,"orig_bytes":10,"resp_bytes":20,"list":[1,2.5],"ms":1591367999430,"ns":1591367999430166000}"#;
    let inputs = [
        format!(r#"{{"event":{{"original":{original}}}}}"#),
        format!(r#"{{"event":{{"original":{original}}},"network":{{"type":"ipv4"}}}}"#),
        r#"{"event":{"original":{"uid":"X","resp_bytes":0,"orig_bytes":5}}}"#.to_string(),
        r#"{"event":{"original":{"ts":"not a time","uid":"X"}}}"#.to_string(),
        r#"{"event":{"original":{"ns":"1591367999430166000","list":"no"}}}"#.to_string(),
        r#"{"event":{"original":{"uid":"{\"a\":1}","proto":"[1]"}}}"#.to_string(),
        r#"{"event":{"original":{}},"network":[1]}"#.to_string(),
        r#"{"event":{"original":"text"}}"#.to_string(),
        format!(r#"{{"event":{{"original":{original}}}}} trailing"#),
        r#"{"event":{"original":{"uid":"X"}}"#.to_string(),
        "[1,2]".to_string(),
        "plain text".to_string(),
        String::new(),
    ];
    for data in &inputs {
        assert_eq!(through(&fused, data), through(&alone, data), "{data}");
    }
    // Each says what it computes, so the pipeline fuses the chain: the copy, the strings,
    // the numbers and the epochs as one step, the time written as text (it reads what the
    // step before wrote) and the last copy as another.
    for ((_, t), (ty, source, target)) in steps().iter().zip(CHAIN) {
        let Transform::Map(_, plan) = t else {
            panic!("{ty}: a map transform")
        };
        match &**plan {
            MapPlan::Compute { from, to, .. } => {
                assert_eq!((from.as_str(), to.as_str()), (*source, *target), "{ty}");
            }
            MapPlan::Copy { .. } => assert_eq!(*ty, "object_copy"),
            other => panic!("{ty}: {other:?}"),
        }
    }
    // In data mode they work on the whole data, which no run reads: nothing to plan.
    let lower = testing::build(&registry(), json!({"type": "string_to_lower"})).unwrap();
    assert!(matches!(&lower, Transform::Map(_, plan) if matches!(**plan, MapPlan::Opaque)));
    let ok = through(&fused, &inputs[0]).expect("the whole chain");
    assert!(
        ok.contains(r#""hash":"c5bloe""#)
            && ok.contains(r#""@timestamp":"2020-06-05T14:39:59.430Z""#),
        "{ok}"
    );
    assert!(through(&fused, &inputs[3]).is_err());
}
