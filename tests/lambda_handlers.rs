//! The Lambda handlers in process: `LambdaEvent`s built from the fixture events in
//! tests/fixtures/lambda/ go through `sluice_lambda::Function` with real transforms.
//!
//! A record whose delivery fails is made by `FlakySink`, a stateful sink that holds what it
//! gets until the ctrl and then resolves each message as a send does: delivered, or failed
//! when its data contains `"fail"` (as PutRecords answers a throttled record). The KPL
//! fixture comes from the `aws-kinesis-agg` encoder; a test regenerates it and compares.

use std::sync::{Arc, Mutex};

use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use sluice_engine::{Message, Pipeline, StatefulTransform, Transform, TransformError, async_trait};
use sluice_lambda::telemetry::MetricsSink;
use sluice_lambda::{Function, HandlerKind, Options};

use crate::common::workspace_root;

/// Holds messages until the ctrl, then delivers them, failing those whose data contains
/// `"fail"`; passes every message through, like a send.
#[derive(Default)]
struct FlakySink {
    held: Mutex<Vec<Message>>,
    delivered: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl StatefulTransform for FlakySink {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            let held = std::mem::take(&mut *self.held.lock().unwrap());
            for m in held {
                let text = String::from_utf8_lossy(m.data()).into_owned();
                if text.contains("\"fail\"") {
                    m.fail_acks("ProvisionedThroughputExceededException");
                } else {
                    self.delivered.lock().unwrap().push(text);
                }
            }
        } else {
            self.held.lock().unwrap().push(msg.clone());
        }
        out.push(msg);
        Ok(())
    }
}

struct Harness {
    function: Function,
    delivered: Arc<Mutex<Vec<String>>>,
    metrics: Arc<Mutex<Vec<String>>>,
}

/// A function of `kind` running `transforms` (a JSON list) and then a `FlakySink`.
fn harness(kind: HandlerKind, transforms: Value, report: bool) -> Harness {
    let registry = sluice_transforms::registry();
    let mut steps: Vec<(Arc<str>, Transform)> = Vec::new();
    for (i, t) in transforms.as_array().unwrap().iter().enumerate() {
        let built = sluice_engine::testing::build(&registry, t.clone()).expect("a transform");
        steps.push((Arc::from(format!("t{i}")), built));
    }
    let sink = FlakySink::default();
    let delivered = sink.delivered.clone();
    steps.push((Arc::from("sink"), Transform::stateful(sink)));
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let mut opts = Options::new(kind);
    opts.report_batch_item_failures = report;
    opts.metrics = Some(MetricsSink::Buffer(metrics.clone()));
    opts.function_name = "sluice-test".into();
    Harness {
        function: Function::new(Pipeline::new(steps).with_workers(2), opts),
        delivered,
        metrics,
    }
}

fn fixture(name: &str) -> Value {
    let p = workspace_root().join("tests/fixtures/lambda").join(name);
    serde_json::from_slice(&std::fs::read(&p).expect("the fixture")).expect("JSON")
}

fn invoke(h: &Harness, payload: Value) -> Result<Value, String> {
    let mut ctx = Context::default();
    ctx.request_id = "req-1".into();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(h.function.handle(LambdaEvent::new(payload, ctx)))
        .map_err(|e| e.to_string())
}

fn meta_copy() -> Value {
    // The record's metadata into the data, so the tests can see it.
    json!([{"type": "object_copy", "settings": {"object": {"source_key": "meta @this", "target_key": "meta"}}}])
}

fn delivered_json(h: &Harness) -> Vec<Value> {
    h.delivered
        .lock()
        .unwrap()
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect()
}

#[test]
fn kinesis_kpl_records_are_deaggregated_with_each_records_metadata() {
    let h = harness(HandlerKind::KinesisDataStream, meta_copy(), true);
    let resp = invoke(&h, fixture("kinesis_kpl.json")).unwrap();
    assert_eq!(resp, json!({"batchItemFailures": []}));
    let got = delivered_json(&h);
    let ns: Vec<u64> = got.iter().map(|v| v["n"].as_u64().unwrap()).collect();
    assert_eq!(ns, vec![1, 2, 3, 4, 5], "order is kept");
    let pks: Vec<&str> = got
        .iter()
        .map(|v| v["meta"]["partitionKey"].as_str().unwrap())
        .collect();
    assert_eq!(pks, vec!["user-a", "user-b", "user-a", "plain", "user-c"]);
    assert_eq!(got[1]["meta"]["subSequenceNumber"], 1);
    assert_eq!(
        got[3]["meta"]["sequenceNumber"],
        "49590338271490256608559692538361571095921575989136588802"
    );
    assert!(got[3]["meta"].get("subSequenceNumber").is_none());
    assert_eq!(
        got[4]["meta"]["stream"],
        "arn:aws:kinesis:us-east-1:123456789012:stream/sluice-kpl"
    );
    assert_eq!(
        got[0]["meta"]["approximateArrivalTimestamp"],
        "2023-11-14T22:13:20.500+00:00"
    );
    let m: Value = serde_json::from_str(&h.metrics.lock().unwrap()[0]).unwrap();
    assert_eq!(
        (m["RecordsIn"].as_u64(), m["MessagesIn"].as_u64()),
        (Some(3), Some(5))
    );
}

#[test]
fn the_kpl_fixture_is_what_aws_kinesis_agg_encodes() {
    let root = workspace_root();
    let python = root.join(".emulators/venv/bin/python");
    let out = std::process::Command::new(&python)
        .arg(root.join("tests/fixtures/lambda/make_kinesis_kpl.py"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run scripts/emulators.sh install)",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let regenerated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(regenerated, fixture("kinesis_kpl.json"));
    // And our encoder (used by the benchmark) makes what the real one makes.
    let first = &regenerated["Records"][2]["kinesis"]["data"];
    let ours = sluice_lambda::kpl::aggregate(&[("user-c", br#"{"n":5,"user":"c"}"#)]);
    use base64::Engine;
    assert_eq!(
        first.as_str().unwrap(),
        base64::engine::general_purpose::STANDARD.encode(ours)
    );
}

/// A Kinesis event of plain records with these data, sequence numbers 9, 10, 11, ...
fn kinesis_event(data: &[&str]) -> Value {
    use base64::Engine;
    let records: Vec<Value> = data
        .iter()
        .enumerate()
        .map(|(i, d)| {
            json!({
                "kinesis": {
                    "partitionKey": format!("pk{i}"),
                    "sequenceNumber": format!("{}", 9 + i),
                    "data": base64::engine::general_purpose::STANDARD.encode(d),
                    "approximateArrivalTimestamp": 1700000000.0,
                    "kinesisSchemaVersion": "1.0",
                },
                "eventSource": "aws:kinesis",
                "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/s",
            })
        })
        .collect();
    json!({ "Records": records })
}

#[test]
fn kinesis_reports_exactly_the_undelivered_records_lowest_sequence_number_first() {
    let h = harness(HandlerKind::KinesisDataStream, json!([]), true);
    let event = kinesis_event(&[
        r#"{"n":0}"#,
        r#"{"n":1,"fail":1}"#,
        r#"{"n":2}"#,
        r#"{"n":3,"fail":1}"#,
    ]);
    let resp = invoke(&h, event.clone()).unwrap();
    // Sequence numbers 10 and 12: compared as numbers, not text ("10" < "9" as text).
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "10"}, {"itemIdentifier": "12"}]})
    );
    assert_eq!(h.delivered.lock().unwrap().len(), 2);
    let m: Value = serde_json::from_str(&h.metrics.lock().unwrap()[0]).unwrap();
    assert_eq!(m["RecordsFailed"], 2);

    // Without ReportBatchItemFailures, the invocation fails (the whole batch is retried).
    let h = harness(HandlerKind::KinesisDataStream, json!([]), false);
    let e = invoke(&h, event).unwrap_err();
    assert!(e.contains("2 of 4 records were not delivered"), "{e}");
    assert!(e.contains("ProvisionedThroughputExceededException"), "{e}");
}

#[test]
fn a_pipeline_error_fails_every_record_it_did_not_deliver() {
    let h = harness(
        HandlerKind::KinesisDataStream,
        json!([
            {"type": "meta_switch", "settings": {"cases": [
                {"condition": {"type": "string_contains", "settings": {"value": "not json"}},
                 "transforms": [{"type": "utility_err", "settings": {"message": "bad record"}}]},
            ]}},
        ]),
        true,
    );
    let resp = invoke(&h, kinesis_event(&[r#"{"n":0}"#, "not json", r#"{"n":2}"#])).unwrap();
    let ids: Vec<&str> = resp["batchItemFailures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"10"), "{resp}");
    assert!(
        h.delivered.lock().unwrap().is_empty(),
        "nothing was flushed"
    );
    // A corrupt KPL record (good checksum, bad protobuf) is reported, the others are not.
    let mut corrupt = vec![0xF3, 0x89, 0x9A, 0xC2, 0x1a, 0x05, 0x08];
    use md5::Digest;
    corrupt.extend_from_slice(&md5::Md5::digest([0x1a, 0x05, 0x08]));
    let mut event = kinesis_event(&[r#"{"n":0}"#, "x"]);
    use base64::Engine;
    event["Records"][1]["kinesis"]["data"] =
        json!(base64::engine::general_purpose::STANDARD.encode(&corrupt));
    let h = harness(HandlerKind::KinesisDataStream, json!([]), true);
    let resp = invoke(&h, event).unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "10"}]})
    );
    assert_eq!(h.delivered.lock().unwrap().as_slice(), [r#"{"n":0}"#]);
}

/// A record whose data is not base64 (or not a string) fails alone: it is listed in
/// `batchItemFailures`, and the records around it are delivered.
#[test]
fn kinesis_a_record_that_is_not_base64_fails_alone() {
    let mut event = kinesis_event(&[r#"{"n":0}"#, "x", r#"{"n":2}"#, "y"]);
    event["Records"][1]["kinesis"]["data"] = json!("this is not base64!");
    event["Records"][3]["kinesis"]["data"] = json!(12);
    let h = harness(HandlerKind::KinesisDataStream, json!([]), true);
    let resp = invoke(&h, event).unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "10"}, {"itemIdentifier": "12"}]})
    );
    assert_eq!(
        h.delivered.lock().unwrap().as_slice(),
        [r#"{"n":0}"#, r#"{"n":2}"#]
    );
    // They count as failed records in the invocation's metrics.
    let m: Value = serde_json::from_str(&h.metrics.lock().unwrap()[0]).unwrap();
    assert_eq!(m["RecordsFailed"], 2);
    // An event that is not a Kinesis event at all still fails the invocation.
    let h = harness(HandlerKind::KinesisDataStream, json!([]), true);
    assert!(invoke(&h, json!({"Records": [{"kinesis": {"data": "aGk="}}]})).is_err());
}

/// A Firehose record whose data is not base64 is answered `ProcessingFailed` alone.
#[test]
fn firehose_a_record_that_is_not_base64_fails_alone() {
    let h = harness(HandlerKind::DataFirehose, json!([]), true);
    let mut event = fixture("firehose.json");
    event["records"][1]["data"] = json!("not base64 at all!");
    event["records"][2]["data"] = json!(null);
    let resp = invoke(&h, event.clone()).unwrap();
    let results: Vec<&str> = resp["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["result"].as_str().unwrap())
        .collect();
    // The fourth fails at the sink (its data holds "fail"), the first is delivered.
    assert_eq!(
        results,
        [
            "Ok",
            "ProcessingFailed",
            "ProcessingFailed",
            "ProcessingFailed"
        ]
    );
    assert_eq!(
        resp["records"][1]["recordId"],
        event["records"][1]["recordId"]
    );
    assert_eq!(h.delivered.lock().unwrap().as_slice(), [r#"{"n":1}"#]);
    // An event that is not a Firehose event at all fails the invocation.
    let h = harness(HandlerKind::DataFirehose, json!([]), true);
    assert!(invoke(&h, json!({"records": [{"data": "aGk="}]})).is_err());
}

#[test]
fn firehose_answers_one_result_per_record_id() {
    let h = harness(
        HandlerKind::DataFirehose,
        json!([
            {"type": "meta_switch", "settings": {"cases": [
                {"condition": {"type": "string_contains", "settings": {"value": "not json"}},
                 "transforms": [{"type": "utility_err", "settings": {"message": "bad record"}}]},
                {"condition": {"type": "string_contains", "settings": {"value": "\"drop\""}},
                 "transforms": [{"type": "utility_drop", "settings": {}}]},
                {"transforms": [{"type": "object_insert", "settings": {"object": {"target_key": "seen"}, "value": true}}]},
            ]}},
        ]),
        true,
    );
    let event = fixture("firehose.json");
    let resp = invoke(&h, event.clone()).unwrap();
    let recs = resp["records"].as_array().unwrap();
    assert_eq!(recs.len(), 4);
    for (r, e) in recs.iter().zip(event["records"].as_array().unwrap()) {
        assert_eq!(r["recordId"], e["recordId"]);
    }
    let results: Vec<&str> = recs.iter().map(|r| r["result"].as_str().unwrap()).collect();
    assert_eq!(
        results,
        ["Ok", "ProcessingFailed", "Dropped", "ProcessingFailed"]
    );
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(recs[0]["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&data).unwrap(),
        json!({"n": 1, "seen": true})
    );
    // The ctrl flushed the sink: the good record was delivered once.
    assert_eq!(
        h.delivered.lock().unwrap().as_slice(),
        [r#"{"n":1,"seen":true}"#]
    );
}

#[test]
fn sqs_and_dynamodb_report_by_their_identifiers() {
    let h = harness(HandlerKind::Sqs, meta_copy(), true);
    let resp = invoke(&h, fixture("sqs.json")).unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "2e1424d4-f796-459a-8184-9c92662be6da"}]})
    );
    let got = delivered_json(&h);
    assert_eq!(got.len(), 2);
    // Each message's own metadata, not the first record's.
    assert_eq!(
        got[1]["meta"]["messageId"],
        "9d3c1c4e-7a8b-4c2e-9a41-5b0a1f3f2e10"
    );
    assert_eq!(
        got[1]["meta"]["bodyMd5"],
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
    );
    assert_eq!(
        got[0]["meta"]["attributes"]["SentTimestamp"],
        "1545082649183"
    );

    let h = harness(HandlerKind::DynamodbStream, meta_copy(), true);
    let resp = invoke(&h, fixture("dynamodb.json")).unwrap();
    assert_eq!(resp, json!({"batchItemFailures": []}));
    let got = delivered_json(&h);
    assert_eq!(got.len(), 3, "KEYS_ONLY is skipped");
    assert_eq!(got[0]["op"], "c");
    assert_eq!(got[0]["after"], json!({"pk": "a", "n": 1, "tags": ["x"]}));
    assert_eq!(got[0]["before"], Value::Null);
    assert_eq!(got[1]["op"], "u");
    assert_eq!(
        got[1]["source"]["table"], "invoices",
        "from each record's ARN"
    );
    assert_eq!(got[1]["before"]["n"], 2);
    assert_eq!(got[2]["op"], "d");
    assert_eq!(got[2]["source"]["ts_ms"], 1700000002000i64);
    assert_eq!(got[2]["meta"]["sequenceNumber"], "333");
    assert_eq!(got[2]["meta"]["streamViewType"], "NEW_AND_OLD_IMAGES");
}

/// A DynamoDB stream record that cannot be read (an unknown eventName, an attribute value of
/// an unknown type) fails alone, by its sequence number; the others are delivered.
#[test]
fn dynamodb_a_record_that_cannot_be_read_fails_alone() {
    let h = harness(HandlerKind::DynamodbStream, json!([]), true);
    let mut event = fixture("dynamodb.json");
    event["Records"][0]["eventName"] = json!("TRUNCATE");
    event["Records"][1]["dynamodb"]["NewImage"] = json!({"pk": {"ZZ": "no such type"}});
    let resp = invoke(&h, event).unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "111"}, {"itemIdentifier": "222"}]})
    );
    assert_eq!(delivered_json(&h).len(), 1, "the REMOVE record");
    let m: Value = serde_json::from_str(&h.metrics.lock().unwrap()[0]).unwrap();
    assert_eq!(m["RecordsFailed"], 2);
    // Without a sequence number a record cannot be reported: the event fails.
    let h = harness(HandlerKind::DynamodbStream, json!([]), true);
    let mut event = fixture("dynamodb.json");
    event["Records"][0]["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("SequenceNumber");
    assert!(invoke(&h, event).is_err());
}

/// With `AWS_S3_SQS`, an SQS message whose body is not an S3 notification fails alone.
#[test]
fn s3_sqs_a_body_that_is_not_a_notification_fails_alone() {
    let h = harness(HandlerKind::S3Sqs, json!([]), true);
    let mut event = fixture("sqs.json");
    let records = event["Records"].as_array_mut().unwrap();
    records.truncate(2);
    records[0]["body"] = json!("this is not JSON");
    records[1]["body"] = json!(r#"{"Event":"s3:TestEvent"}"#);
    let bad_id = records[0]["messageId"].clone();
    let resp = invoke(&h, event).unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": bad_id}]})
    );
}

#[test]
fn sns_uses_each_records_metadata_and_fails_on_undelivered() {
    let h = harness(HandlerKind::Sns, meta_copy(), true);
    assert_eq!(invoke(&h, fixture("sns.json")).unwrap(), Value::Null);
    let got = delivered_json(&h);
    assert_eq!(
        got[1]["meta"]["messageId"],
        "aaaa01b4-ee98-5cb9-9903-4c221d41eb5e"
    );
    assert_eq!(
        got[1]["meta"]["eventSubscriptionArn"],
        "arn:aws:sns:us-east-1:123456789012:topic:sub-2"
    );
    assert_eq!(got[0]["meta"]["subject"], "first");
    let mut event = fixture("sns.json");
    event["Records"][1]["Sns"]["Message"] = json!(r#"{"fail":1}"#);
    let h = harness(HandlerKind::Sns, json!([]), true);
    let e = invoke(&h, event).unwrap_err();
    assert!(e.contains("1 of 2 records were not delivered"), "{e}");
}

#[test]
fn api_gateway_and_invoke_return_outputs_or_an_error_response() {
    let h = harness(HandlerKind::ApiGateway, meta_copy(), true);
    let resp = invoke(&h, fixture("apigw.json")).unwrap();
    assert_eq!(resp["statusCode"], 200);
    let body: Value = serde_json::from_str(resp["body"].as_str().unwrap()).unwrap();
    assert_eq!(body[0]["n"], 1);
    assert_eq!(body[0]["meta"]["path"], "/ingest");
    assert_eq!(body[0]["meta"]["headers"]["x-trace"], "t-1");

    let mut bad = fixture("apigw.json");
    bad["body"] = json!("not json");
    let resp = invoke(&h, bad).unwrap();
    assert_eq!(resp["statusCode"], 500);
    assert!(
        resp["body"].as_str().unwrap().contains("t0"),
        "the transform: {resp}"
    );
    let resp = invoke(&h, json!({"httpMethod": 7})).unwrap();
    assert_eq!(resp["statusCode"], 400, "{resp}");

    let h = harness(
        HandlerKind::Lambda,
        json!([{"type": "object_insert", "settings": {"object": {"target_key": "ok"}, "value": true}}]),
        true,
    );
    assert_eq!(
        invoke(&h, json!({"a": 1})).unwrap(),
        json!([{"a": 1, "ok": true}])
    );
    let resp = invoke(&h, json!({"fail": 1})).unwrap();
    assert_eq!(resp["statusCode"], 500, "{resp}");
    assert!(
        resp["error"].as_str().unwrap().contains("Throughput"),
        "{resp}"
    );
    let h = harness(
        HandlerKind::Lambda,
        json!([{"type": "string_to_upper", "settings": {}}, {"type": "string_append", "settings": {"suffix": "!"}}]),
        true,
    );
    let resp = invoke(&h, json!("x")).unwrap();
    assert_eq!(
        resp,
        json!({"statusCode": 500, "error": "transformed data is invalid JSON and cannot be returned"})
    );
}

#[test]
fn handler_names_table() {
    for (name, want) in [
        (
            "AWS_KINESIS_DATA_STREAM",
            Ok(HandlerKind::KinesisDataStream),
        ),
        ("AWS_KINESIS", Ok(HandlerKind::KinesisDataStream)),
        ("AWS_DATA_FIREHOSE", Ok(HandlerKind::DataFirehose)),
        ("AWS_S3_SQS", Ok(HandlerKind::S3Sqs)),
        ("AWS_DYNAMODB", Ok(HandlerKind::DynamodbStream)),
        ("AWS_LAMBDA", Ok(HandlerKind::Lambda)),
        ("AWS_KINESIS_AUTOSCALE", Ok(HandlerKind::KinesisAutoscale)),
        ("aws_sqs", Err("unknown handler \"aws_sqs\"")),
    ] {
        match (HandlerKind::parse(name), want) {
            (Ok(k), Ok(w)) => assert_eq!(k, w, "{name}"),
            (Err(e), Err(w)) => assert!(e.contains(w) && e.contains("AWS_SNS"), "{e}"),
            (got, _) => panic!("{name}: {got:?}"),
        }
    }
}

#[test]
fn a_bad_event_is_a_function_error_naming_the_handler() {
    let h = harness(HandlerKind::Sqs, json!([]), true);
    let e = invoke(&h, json!({"Records": "nope"})).unwrap_err();
    assert!(e.contains("not a valid AWS_SQS event"), "{e}");
}

/// Lock keys in an SQLite lock store: (key, committed).
fn lock_rows(db: &std::path::Path) -> Vec<(String, bool)> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut st = c
        .prepare("SELECT key, committed FROM sluice_locks ORDER BY key")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn the_locks_commits_agree_with_batch_item_failures() {
    // Substation's consumer pattern: the lock, then the send after it (the FlakySink). A
    // record the send fails is reported and its key given back; a record without a key
    // fails alone; every other record is delivered and its key committed.
    let d = crate::common::Dir::new();
    let db = d.path().join("locks.sqlite");
    let lock = json!([{"type": "meta_kv_store_lock", "settings": {
        "kv_store": {"type": "sqlite", "settings": {"file": db.to_str().unwrap()}},
        "prefix": "l", "ttl_offset": "1h", "object": {"source_key": "id"}, "duplicates": "drop",
        "transforms": [{"type": "object_insert", "settings": {"object": {"target_key": "locked"}, "value": true}}],
    }}]);
    let h = harness(HandlerKind::KinesisDataStream, lock, true);
    let event = kinesis_event(&[
        r#"{"id":"a"}"#,
        r#"{"id":"b","fail":1}"#,
        r#"{"id":""}"#,
        r#"{"id":"d"}"#,
    ]);
    let mut ctx = Context::default();
    ctx.request_id = "req-agree".into();
    ctx.deadline = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 30_000) as u64;
    let resp = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(h.function.handle(LambdaEvent::new(event.clone(), ctx)))
        .unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "10"}, {"itemIdentifier": "11"}]})
    );
    assert_eq!(
        lock_rows(&db),
        vec![("l:a".to_string(), true), ("l:d".to_string(), true)],
        "committed exactly for the delivered records; b given back; no key, no lock"
    );
    // The redelivery from the first failed record: b is processed now, d is a duplicate.
    let retry = kinesis_event(&[r#"{"id":"b"}"#, r#"{"id":""}"#, r#"{"id":"d"}"#]);
    let resp = invoke(&h, retry).unwrap();
    assert_eq!(
        resp,
        json!({"batchItemFailures": [{"itemIdentifier": "10"}]})
    );
    let sent: Vec<Value> = delivered_json(&h);
    let ids: Vec<&str> = sent.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["a", "d", "b"], "each once");
    assert_eq!(lock_rows(&db).len(), 3);
}
