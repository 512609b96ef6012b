//! Exactly once across a hop, as the examples `examples/aws/hop_producer` and
//! `examples/aws/hop_consumer` deploy it: two `sluice-lambda` functions through the Lambda
//! runtime API (cargo-lambda's emulator), Kinesis in moto, the consumer's locks in
//! dynoxide. Events are put on a source stream; the producer's function gets them as a
//! Kinesis event twice (a retry after a lost answer), so the hop stream holds each twice;
//! the consumer's function gets the hop stream's records, twice as well (its own retry).
//! The output stream holds each event once, and the lock table one committed key per event.

use base64::Engine;
use serde_json::{Value, json};

use crate::common::moto::{self, StreamRecord};
use crate::common::{Dir, dynamodb, runtime, workspace_root};
use crate::lambda_e2e::{Proc, bootstrap, invoke, runtime_api};

const EVENTS: usize = 120;

/// Example `name`'s config with resource names replaced.
fn example(name: &str, renames: &[(&str, &str)]) -> String {
    let path = workspace_root().join(format!("examples/aws/{name}/config.jsonnet"));
    let mut text = std::fs::read_to_string(&path).expect("the example");
    for (from, to) in renames {
        assert!(
            text.contains(from),
            "{} does not name {from}",
            path.display()
        );
        text = text.replace(from, to);
    }
    text
}

/// A Kinesis event of `records` read from `stream`, as an event source mapping makes it.
fn kinesis_event(stream: &str, records: &[StreamRecord]) -> Value {
    let records: Vec<Value> = records
        .iter()
        .map(|r| {
            json!({
                "kinesis": {
                    "partitionKey": r.partition_key,
                    "sequenceNumber": r.sequence_number,
                    "data": base64::engine::general_purpose::STANDARD.encode(&r.data),
                    "approximateArrivalTimestamp": 1700000000.0,
                    "kinesisSchemaVersion": "1.0",
                },
                "eventSource": "aws:kinesis",
                "eventID": format!("{}:{}", r.shard, r.sequence_number),
                "eventSourceARN": moto::stream_arn(stream),
            })
        })
        .collect();
    json!({ "Records": records })
}

/// Runs the function of `config` over `event`, `times` times, each answer without failures.
fn invoke_times(
    d: &Dir,
    name: &str,
    config: &str,
    event: &Value,
    env: &[(String, String)],
    times: usize,
) {
    let cfg = d.write(&format!("{name}.jsonnet"), config);
    let ev = d.write(&format!("{name}-event.json"), event.to_string());
    let (_api, port) = runtime_api();
    let mut f = Proc(bootstrap(port, &cfg, "AWS_KINESIS_DATA_STREAM", env));
    for round in 0..times {
        let resp = invoke(port, &ev, &mut f);
        assert_eq!(
            resp,
            json!({"batchItemFailures": []}),
            "{name}, round {round}"
        );
    }
}

fn ids(records: &[StreamRecord]) -> Vec<u64> {
    let mut ids: Vec<u64> = records
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.data).expect("a JSON record");
            v["n"].as_u64().expect("n")
        })
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn each_event_reaches_the_output_once_across_the_hop() {
    let mt = moto::endpoint();
    let ddb = dynamodb::endpoint();
    let rt = runtime();
    let tag = dynamodb::unique_table("hop");
    let (source, hop, out) = (
        format!("{tag}-src"),
        format!("{tag}-hop"),
        format!("{tag}-out"),
    );
    let locks = format!("{tag}-locks");
    rt.block_on(async {
        moto::create_stream(&mt, &source, 1).await;
        moto::create_stream(&mt, &hop, 2).await;
        moto::create_stream(&mt, &out, 1).await;
        dynamodb::create_lock_table(&ddb, &locks, "PK", None, "ttl").await;
    });
    // The events, put on the source stream by whatever writes it.
    let lines: Vec<String> = (0..EVENTS)
        .map(|i| json!({"user": format!("u{}", i % 7), "n": i}).to_string())
        .collect();
    moto::run_send(
        &mt,
        "kinesis_data_stream",
        &format!(
            "aws: {{ arn: '{}' }}, object: {{ partition_key: 'user' }}",
            moto::stream_arn(&source)
        ),
        &lines,
    )
    .assert_clean_success();
    let source_records = rt.block_on(moto::read_stream_records(&mt, &source));
    assert_eq!(source_records.len(), EVENTS);

    let mut env = moto::process_env(&mt);
    env.push(("AWS_ENDPOINT_URL_DYNAMODB".into(), ddb.clone()));
    env.push(("SLUICE_METRICS".into(), "off".into()));
    let d = Dir::new();
    let producer = example(
        "hop_producer",
        &[("stream/sluice-example-hop'", &format!("stream/{hop}'"))],
    );
    invoke_times(
        &d,
        "producer",
        &producer,
        &kinesis_event(&source, &source_records),
        &env,
        2,
    );
    let hop_records = rt.block_on(moto::read_stream_records(&mt, &hop));
    assert_eq!(
        hop_records.len(),
        2 * EVENTS,
        "the retried batch put every event twice"
    );

    let consumer = example(
        "hop_consumer",
        &[
            ("stream/sluice-example-hop-out'", &format!("stream/{out}'")),
            ("table/sluice-locks'", &format!("table/{locks}'")),
        ],
    );
    invoke_times(
        &d,
        "consumer",
        &consumer,
        &kinesis_event(&hop, &hop_records),
        &env,
        2,
    );
    let out_records = rt.block_on(moto::read_stream_records(&mt, &out));
    assert_eq!(
        ids(&out_records),
        (0..EVENTS as u64).collect::<Vec<_>>(),
        "each event once"
    );
    let held = rt.block_on(dynamodb::scan(&ddb, &locks));
    assert_eq!(held.len(), EVENTS);
    assert!(
        held.iter()
            .all(|l| l.get("lock_status").map(String::as_str) == Some("committed"))
    );
}
