//! Exactly-once in the Lambda function, held to its deadline: the real `sluice-lambda`
//! process, served by the test's own runtime API (`tests/common/runtime_api.rs`), which
//! gives each invocation the deadline the test chooses and records when the answer came.
//! The lock's store is DynamoDB (dynoxide), the sinks moto's Kinesis or a stub HTTP
//! endpoint that holds the calls the test tells it to stall. The test plays AWS's part: at
//! a deadline passed without an answer it kills the function (Lambda does) and sends the
//! whole batch again; after an answer a stream source resumes from the lowest sequence
//! number in `batchItemFailures`; Firehose sends an invocation whose answer was lost again,
//! the same records with the same ids.
//!
//! Each test is the regression test of one finding of the review of the Lambda function
//! (issue 50, findings 10 to 13): a Firehose lock that answers a retried record otherwise
//! than the first time, records delivered early in an invocation left uncommitted until it
//! ends, work not bounded by the deadline, `pending_wait` not capped by it, and the order of
//! a partition key across a partial failure.
//!
//! `SLUICE_TEST_LAMBDA_BIN` runs them against another build of the bootstrap (an older
//! commit's, to see them fail).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{Value, json};

use crate::common::runtime_api::{KinesisStub, RuntimeApi, Sink};
use crate::common::{Dir, dynamodb, moto};

/// The bootstrap under test.
fn bootstrap_bin() -> PathBuf {
    std::env::var_os("SLUICE_TEST_LAMBDA_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sluice-lambda")))
}

/// A running `sluice-lambda`, its output collected as it comes; killed when dropped.
struct Function {
    child: Child,
    logs: Arc<Mutex<String>>,
}

impl Function {
    /// Starts `handler` over `config` against `api`, with `env`.
    fn start(api: &RuntimeApi, config: &Path, handler: &str, env: &[(String, String)]) -> Self {
        let mut child = Command::new(bootstrap_bin())
            .env_remove("SLUICE_LOG")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("AWS_LAMBDA_FUNCTION_NAME", "_")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("SLUICE_LAMBDA_HANDLER", handler)
            .env("SLUICE_CONFIG", config)
            .env("SLUICE_REPORT_BATCH_ITEM_FAILURES", "true")
            .env("SLUICE_METRICS", "off")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sluice-lambda");
        let logs = Arc::new(Mutex::new(String::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let logs = logs.clone();
            std::thread::spawn(move || {
                let mut r = std::io::BufReader::new(pipe);
                let mut line = String::new();
                while std::io::BufRead::read_line(&mut r, &mut line).unwrap_or(0) > 0 {
                    logs.lock().unwrap().push_str(&line);
                    line.clear();
                }
            });
        }
        Function { child, logs }
    }

    fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// Waits up to `within` for the init's outcome: `Some(status)` when the process
    /// exited, `None` once it logged `init done`.
    fn init(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the readers take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return Some(status);
            }
            if self.logs().contains("init done") {
                return None;
            }
            assert!(
                Instant::now() < until,
                "no init outcome in {within:?}: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What Lambda does to an invocation that reached its deadline: SIGKILL.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        self.kill();
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A Kinesis record: data `{"id": id, ...extra}`, partition key `pk`, sequence number `seq`.
fn kinesis_record(id: &str, pk: &str, seq: u64) -> Value {
    let data = json!({"id": id}).to_string();
    json!({
        "kinesis": {
            "partitionKey": pk,
            "sequenceNumber": seq.to_string(),
            "data": base64::engine::general_purpose::STANDARD.encode(data),
            "approximateArrivalTimestamp": 1700000000.0,
            "kinesisSchemaVersion": "1.0",
        },
        "eventSource": "aws:kinesis",
        "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/in",
    })
}

/// A Kinesis event of records `(id, partition key)`, sequence numbers 1000, 1001, ...
fn kinesis_batch(records: &[(&str, &str)]) -> Vec<Value> {
    records
        .iter()
        .enumerate()
        .map(|(i, (id, pk))| kinesis_record(id, pk, 1000 + i as u64))
        .collect()
}

/// What an event source mapping sends again after `answer`: the records from the lowest
/// sequence number in `batchItemFailures` on (none when there are none).
fn resume_from(batch: &[Value], answer: &Value) -> Vec<Value> {
    let failures = answer["batchItemFailures"]
        .as_array()
        .unwrap_or_else(|| panic!("no batchItemFailures: {answer}"));
    let Some(lowest) = failures
        .iter()
        .filter_map(|f| f["itemIdentifier"].as_str()?.parse::<u64>().ok())
        .min()
    else {
        return Vec::new();
    };
    batch
        .iter()
        .filter(|r| {
            r["kinesis"]["sequenceNumber"]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|s| s >= lowest)
        })
        .cloned()
        .collect()
}

/// The sequence numbers in `batchItemFailures`.
fn failed_seqs(answer: &Value) -> Vec<String> {
    answer["batchItemFailures"]
        .as_array()
        .unwrap_or_else(|| panic!("no batchItemFailures: {answer}"))
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap().to_string())
        .collect()
}

/// The ids of the JSON bodies in `bodies`, in order.
fn ids(bodies: &[Vec<u8>]) -> Vec<String> {
    bodies
        .iter()
        .map(|b| {
            let v: Value = serde_json::from_slice(b)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(b)));
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A lock over DynamoDB table `table` keyed on `id` with `prefix`, `extra` settings
/// (Jsonnet fields) and the inner list `inner` (Jsonnet).
fn lock(table: &str, prefix: &str, extra: &str, inner: &str) -> String {
    format!(
        r#"sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.aws.dynamodb({{ aws: {{ arn: 'arn:aws:dynamodb:us-east-1:000000000000:table/{table}' }}, attributes: {{ partition_key: 'PK', ttl: 'ttl' }} }}),
      prefix: '{prefix}',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      {extra}
      transforms: [ {inner} ],
    }})"#
    )
}

/// A config of `transforms` (Jsonnet), one worker.
fn config(d: &Dir, transforms: &str) -> PathBuf {
    d.write(
        "config.jsonnet",
        format!(
            "local sub = std.extVar('sub');\n{{\n  concurrency: 1,\n  transforms: [\n    {transforms}\n  ],\n}}\n"
        ),
    )
}

/// The environment for a function using DynamoDB at `ddb` (and moto at `mt`, if given).
fn aws_env(ddb: &str, mt: Option<&str>) -> Vec<(String, String)> {
    let mut env = dynamodb::process_env(ddb);
    if let Some(mt) = mt {
        env.push(("AWS_ENDPOINT_URL_KINESIS".into(), mt.to_string()));
    }
    env
}

/// The lock items of `table` by key: (status, owner).
fn lock_items(rt: &tokio::runtime::Runtime, ddb: &str, table: &str) -> Vec<(String, String)> {
    let mut items: Vec<(String, String)> = rt
        .block_on(dynamodb::scan(ddb, table))
        .into_iter()
        .map(|i| {
            (
                i["PK"].clone(),
                i.get("lock_status").cloned().unwrap_or_default(),
            )
        })
        .collect();
    items.sort();
    items
}

/// A Firehose transformation event of `(recordId, data)`.
fn firehose_event(records: &[(&str, Value)]) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    json!({
        "invocationId": "inv-1",
        "deliveryStreamArn": "arn:aws:firehose:us-east-1:123456789012:deliverystream/d",
        "region": "us-east-1",
        "records": records.iter().map(|(id, data)| json!({
            "recordId": id,
            "approximateArrivalTimestamp": 1700000000000i64,
            "data": b64.encode(data.to_string()),
        })).collect::<Vec<_>>(),
    })
}

/// Finding 10: Firehose takes the answer as the effect and retries an invocation whose
/// answer was lost. A lock that drops duplicates answers the retried records `Dropped`
/// (Firehose discards them), and one whose inner list changes the message answers them
/// unchanged: such a config fails the init, naming the lock and why.
#[test]
fn firehose_refuses_at_init_a_lock_that_would_answer_a_retried_record_otherwise() {
    let ddb = dynamodb::endpoint();
    let table = dynamodb::unique_table("once-fh-refused");
    let rt = crate::common::runtime();
    rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
    let sink = Sink::start(&[]);
    let send = format!("sub.tf.send.http.post({{ url: '{}' }})", sink.url());
    let insert = "sub.tf.object.insert({ object: { target_key: 'seen' }, value: true })";
    // (the lock's settings and inner list, what the error says)
    let cases = [
        (
            "duplicates: 'drop',",
            send.clone(),
            "with duplicates: 'drop' it would answer a retried record as dropped",
        ),
        (
            "",
            format!("{insert}, {send}"),
            "its inner list changes the message (transforms[0].settings.transforms[0] (object_insert)), so it would answer a retried record unchanged",
        ),
    ];
    for (extra, inner, why) in cases {
        let d = Dir::new();
        let cfg = config(&d, &lock(&table, "fh", extra, &inner));
        let api = RuntimeApi::start();
        let mut f = Function::start(&api, &cfg, "AWS_DATA_FIREHOSE", &aws_env(&ddb, None));
        let Some(status) = f.init(Duration::from_secs(30)) else {
            // The init went through: show what the lock does to a retried call.
            let event = firehose_event(&[("a", json!({"id": "a"}))]);
            let first = api.invoke(&event, Duration::from_secs(10));
            let first = api.wait_answer(&first, Duration::from_secs(20));
            let again = api.invoke(&event, Duration::from_secs(10));
            let again = api.wait_answer(&again, Duration::from_secs(20));
            panic!(
                "the init did not refuse the lock ({extra} {inner}); the first answer: {:?}, the retried call's: {:?}",
                first.map(|a| a.outcome),
                again.map(|a| a.outcome)
            );
        };
        assert!(!status.success(), "{}", f.logs());
        let logs = f.logs();
        let line = logs
            .lines()
            .find(|l| l.contains("init failed"))
            .unwrap_or_else(|| panic!("no init failure line: {logs}"));
        let v: Value = serde_json::from_str(line).expect("a JSON log line");
        let err = v["fields"]["error"].as_str().unwrap();
        assert!(
            err.contains("transforms[0]: meta_kv_store_lock cannot guard what AWS_DATA_FIREHOSE answers: Firehose retries a call whose answer was lost") && err.contains(why),
            "{err}"
        );
        assert!(sink.accepted().is_empty());
    }
}

/// Finding 10, the lock Firehose may have: duplicates continue and only sends inside it,
/// the answer made by the transforms after it. An invocation sent again after its answer
/// was lost is answered with exactly the same records, results and data, and the sink inside
/// the lock got each record once.
#[test]
fn firehose_answers_a_call_retried_after_a_lost_answer_as_the_first_time() {
    let ddb = dynamodb::endpoint();
    let table = dynamodb::unique_table("once-fh-same");
    let rt = crate::common::runtime();
    rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
    let sink = Sink::start(&[]);
    let d = Dir::new();
    let send = format!("sub.tf.send.http.post({{ url: '{}' }})", sink.url());
    let cfg = config(
        &d,
        &format!(
            "{},\n    sub.tf.object.insert({{ object: {{ target_key: 'seen' }}, value: true }})",
            lock(&table, "fh", "", &send)
        ),
    );
    let api = RuntimeApi::start();
    let mut f = Function::start(&api, &cfg, "AWS_DATA_FIREHOSE", &aws_env(&ddb, None));
    assert_eq!(f.init(Duration::from_secs(30)), None, "{}", f.logs());
    let event = firehose_event(&[
        ("r1", json!({"id": "a"})),
        ("r2", json!({"id": "b"})),
        ("r3", json!({"id": "c"})),
    ]);
    let mut answers = Vec::new();
    for _ in 0..2 {
        let id = api.invoke(&event, Duration::from_secs(10));
        let a = api
            .wait_answer(&id, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
        assert!(a.margin_ms() > 0, "answered after the deadline: {a:?}");
        answers.push(a.response().clone());
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let results: Vec<(String, String, Value)> = answers[0]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let data = b64.decode(r["data"].as_str().unwrap()).unwrap();
            (
                r["recordId"].as_str().unwrap().to_string(),
                r["result"].as_str().unwrap().to_string(),
                serde_json::from_slice(&data).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results,
        vec![
            ("r1".into(), "Ok".into(), json!({"id": "a", "seen": true})),
            ("r2".into(), "Ok".into(), json!({"id": "b", "seen": true})),
            ("r3".into(), "Ok".into(), json!({"id": "c", "seen": true})),
        ]
    );
    assert_eq!(answers[1], answers[0], "the retried call's answer");
    assert_eq!(
        ids(&sink.accepted()),
        ["a", "b", "c"],
        "each record sent once"
    );
    assert_eq!(
        lock_items(&rt, &ddb, &table),
        [
            ("fh:a".to_string(), "committed".to_string()),
            ("fh:b".into(), "committed".into()),
            ("fh:c".into(), "committed".into()),
        ]
    );
}

/// Finding 11: the sink accepts records 1 and 2 and stalls on record 3 (its call held
/// without an answer). While 3 is held, the keys of 1 and 2 are already committed (a
/// redelivery after a kill must not send them again), and the function answers before
/// the deadline the runtime gave it, with 3 (and 4, behind it) in `batchItemFailures`.
/// The source then resumes from 3: each record reaches the sink once.
#[test]
fn kinesis_commits_what_the_sink_accepted_while_a_later_record_stalls_and_answers_in_time() {
    let ddb = dynamodb::endpoint();
    let table = dynamodb::unique_table("once-stall");
    let rt = crate::common::runtime();
    rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
    // The first attempt at r3 is held; the redelivery's goes through.
    let sink = Sink::start(&["\"r3\""]);
    let d = Dir::new();
    let send = format!(
        "sub.tf.send.http.post({{ url: '{}', batch: {{ count: 1 }} }})",
        sink.url()
    );
    let cfg = config(&d, &lock(&table, "k", "", &send));
    let api = RuntimeApi::start();
    let env = aws_env(&ddb, None);
    let mut f = Function::start(&api, &cfg, "AWS_KINESIS_DATA_STREAM", &env);
    assert_eq!(f.init(Duration::from_secs(30)), None, "{}", f.logs());
    let batch = kinesis_batch(&[("r1", "p1"), ("r2", "p2"), ("r3", "p3"), ("r4", "p4")]);
    let timeout = Duration::from_secs(5);
    let id = api.invoke(&json!({ "Records": batch }), timeout);
    api.wait_started(&id, Duration::from_secs(10))
        .expect("the function picks the invocation up");

    // Once r3's call is held, r1's and r2's keys are committed within a store round trip.
    let held = Instant::now() + Duration::from_secs(10);
    while sink.stalled().is_empty() {
        assert!(
            Instant::now() < held,
            "r3 never reached the sink: {}",
            f.logs()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(ids(&sink.accepted()), ["r1", "r2"]);
    let committed_by = Instant::now() + Duration::from_millis(1000);
    let items = loop {
        let items = lock_items(&rt, &ddb, &table);
        let done = items
            .iter()
            .filter(|(k, s)| (k == "k:r1" || k == "k:r2") && s == "committed")
            .count();
        if done == 2 || Instant::now() > committed_by {
            break items;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        !api.answered(&id),
        "the invocation was still running (r3 held)"
    );
    assert_eq!(
        items,
        [
            ("k:r1".to_string(), "committed".to_string()),
            ("k:r2".into(), "committed".into()),
            ("k:r3".into(), "pending".into()),
            ("k:r4".into(), "pending".into()),
        ],
        "1 s after r3 was held, while the invocation runs (the piece's keys are taken together)"
    );

    // The answer comes before the deadline, naming r3 and what is behind it.
    let answer = api.wait_answer(&id, timeout + Duration::from_secs(1));
    if answer.as_ref().is_none_or(|a| a.margin_ms() <= 0) {
        // Lambda kills an invocation at its deadline and the source sends the whole batch
        // again: show what that does.
        let late = answer.map(|a| -a.margin_ms());
        f.kill();
        let logs = f.logs();
        let mut f = Function::start(&api, &cfg, "AWS_KINESIS_DATA_STREAM", &env);
        f.init(Duration::from_secs(30));
        let again = api.invoke(&json!({ "Records": batch }), Duration::from_secs(30));
        let again = api.wait_answer(&again, Duration::from_secs(40));
        panic!(
            "no answer before the deadline (answered {late:?} ms after it, or never); after the kill the whole batch again was answered {:?} and the sink got {:?}. The first invocation's logs: {logs}",
            again.map(|a| a.outcome),
            ids(&sink.accepted()),
        );
    }
    let a = api.wait_answer(&id, Duration::ZERO).unwrap();
    eprintln!("answered {} ms before the deadline", a.margin_ms());
    assert_eq!(failed_seqs(a.response()), ["1002", "1003"], "{}", f.logs());
    let redelivery = resume_from(&batch, a.response());
    assert!(
        a.margin_ms() >= 300,
        "answered {} ms before the deadline: {}",
        a.margin_ms(),
        f.logs()
    );
    assert_eq!(
        lock_items(&rt, &ddb, &table)
            .iter()
            .filter(|(_, s)| s == "committed")
            .count(),
        2,
        "r3 not committed"
    );

    // The source resumes from r3: r3 and r4 are delivered, r1 and r2 are not sent again.
    let again = api.invoke(&json!({ "Records": redelivery }), Duration::from_secs(10));
    let a = api
        .wait_answer(&again, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no answer to the redelivery: {}", f.logs()));
    assert_eq!(
        a.response(),
        &json!({"batchItemFailures": []}),
        "{}",
        f.logs()
    );
    assert_eq!(ids(&sink.accepted()), ["r1", "r2", "r3", "r4"], "each once");
}

/// Finding 12: a key pending under another owner, `pending_wait: '10s'`, and Lambda's
/// default timeout of 3 s. The function answers before the deadline, with that record alone
/// in `batchItemFailures`; the others are delivered (a held key delays only its message).
#[test]
fn a_key_pending_elsewhere_fails_alone_before_a_short_deadline() {
    use sluice_transforms::kv_store::aws_dynamodb::DynamoDbStore;
    use sluice_transforms::kv_store::{AcquireRequest, LockStore};
    let ddb = dynamodb::endpoint();
    let mt = moto::endpoint();
    let table = dynamodb::unique_table("once-held");
    let stream = dynamodb::unique_table("once-held-out");
    let rt = crate::common::runtime();
    rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
    rt.block_on(moto::create_stream(&mt, &stream, 1));
    // Another invocation holds r2's key, for a minute.
    let store = DynamoDbStore::from_settings(
        &serde_json::from_value(json!({
            "aws": {"arn": format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}")},
            "attributes": {"partition_key": "PK", "ttl": "ttl"},
        }))
        .unwrap(),
    )
    .expect("valid settings")
    .with_local_endpoint(&ddb);
    let now = now_ms();
    let held = rt.block_on(store.acquire(
        "another-invocation",
        now,
        &[AcquireRequest {
            key: "h:r2".into(),
            ttl: now / 1000 + 3600,
            lease_until_ms: now + 60_000,
            skew_ms: 0,
            fresh_before_ms: None,
        }],
        1,
    ));
    assert!(held[0].is_ok(), "{:?}", held[0]);

    let d = Dir::new();
    let send = format!(
        "sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: '{}' }} }})",
        moto::stream_arn(&stream)
    );
    let cfg = config(&d, &lock(&table, "h", "pending_wait: '10s',", &send));
    let api = RuntimeApi::start();
    let mut f = Function::start(
        &api,
        &cfg,
        "AWS_KINESIS_DATA_STREAM",
        &aws_env(&ddb, Some(&mt)),
    );
    assert_eq!(f.init(Duration::from_secs(30)), None, "{}", f.logs());
    let batch = kinesis_batch(&[("r1", "p1"), ("r2", "p2"), ("r3", "p3")]);
    let id = api.invoke(&json!({ "Records": batch }), Duration::from_secs(3));
    let a = api
        .wait_answer(&id, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no answer in 15 s: {}", f.logs()));
    eprintln!("answered {} ms before the deadline", a.margin_ms());
    assert!(
        a.margin_ms() > 0,
        "answered {} ms after the 3 s deadline: {}",
        -a.margin_ms(),
        f.logs()
    );
    assert_eq!(failed_seqs(a.response()), ["1001"], "{}", f.logs());
    let mut sent: Vec<String> = rt
        .block_on(moto::read_stream(&mt, &stream))
        .into_iter()
        .flat_map(|(_, records)| records)
        .map(|(_, data)| {
            let v: Value = serde_json::from_slice(&data).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect();
    sent.sort();
    assert_eq!(sent, ["r1", "r3"], "the others delivered");
    assert_eq!(
        lock_items(&rt, &ddb, &table),
        [
            ("h:r1".to_string(), "committed".to_string()),
            ("h:r2".into(), "pending".into()),
            ("h:r3".into(), "committed".into()),
        ]
    );
}

/// Finding 13, what holds for the order of a partition key across a partial failure.
/// Records a1 and a2 share partition key `p`, b1 has `q`; the sink (Kinesis `PutRecords`)
/// refuses a1 (throttled) until the test lets it through.
///
/// - With the send's batching (one call for the three), a2 is accepted with the call and a1
///   is not: the source resumes from a1, the lock skips b1 and a2 (delivered), and the
///   sink holds a2 before a1. Order per partition key is not kept at the sink.
/// - With `batch: { count: 1 }` the send makes one call per record, in order, and a call
///   that fails stops the invocation's later records (they are failed, not sent): the
///   source resumes from a1 and the sink holds a1, b1, a2. Order is kept, at one call per
///   record.
#[test]
fn order_per_partition_key_across_a_partial_failure_is_what_the_docs_say() {
    let ddb = dynamodb::endpoint();
    let rt = crate::common::runtime();
    // (the send's settings, the records failed in the first answer, the sink's order)
    let cases: [(&str, &[&str], &[&str]); 2] = [
        ("", &["1000"], &["b1", "a2", "a1"]),
        (
            "batch: { count: 1 },",
            &["1000", "1001", "1002"],
            &["a1", "b1", "a2"],
        ),
    ];
    for (batch, failed, order) in cases {
        let table = dynamodb::unique_table("once-order");
        rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
        let sink = KinesisStub::start(&[("\"a1\"", usize::MAX)]);
        let d = Dir::new();
        let send = format!(
            "sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: 'arn:aws:kinesis:us-east-1:123456789012:stream/out' }}, {batch} }})"
        );
        let cfg = config(&d, &lock(&table, "o", "", &send));
        let mut env = dynamodb::process_env(&ddb);
        env.push(("AWS_ENDPOINT_URL_KINESIS".into(), sink.endpoint()));
        let api = RuntimeApi::start();
        let mut f = Function::start(&api, &cfg, "AWS_KINESIS_DATA_STREAM", &env);
        assert_eq!(f.init(Duration::from_secs(30)), None, "{}", f.logs());
        let batch_records = kinesis_batch(&[("a1", "p"), ("b1", "q"), ("a2", "p")]);
        let id = api.invoke(
            &json!({ "Records": batch_records }),
            Duration::from_secs(10),
        );
        let a = api
            .wait_answer(&id, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
        assert!(a.margin_ms() > 0, "{a:?}");
        assert_eq!(failed_seqs(a.response()), failed, "{batch}: {}", f.logs());
        // The source resumes from the lowest failure; the sink takes a1 now.
        sink.stop_throttling();
        let again = api.invoke(
            &json!({ "Records": resume_from(&batch_records, a.response()) }),
            Duration::from_secs(10),
        );
        let a = api
            .wait_answer(&again, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
        assert_eq!(
            a.response(),
            &json!({"batchItemFailures": []}),
            "{}",
            f.logs()
        );
        assert_eq!(ids(&sink.accepted()), order, "{batch}");
    }
}

/// Finding 14, what a retried batch sends again when the send is after the lock (Substation's
/// consumer pattern without its filter): records a1, b1, c1, the sink refusing a1 at first.
/// The source resumes from a1; b1 and c1, delivered, are duplicates by then. With
/// `duplicates: 'continue'` (the default) they go on past the lock, unchanged, and the send
/// after it sends them again (the function's init warns about that config); with
/// `duplicates: 'drop'` each record reaches the sink once.
#[test]
fn a_retried_batch_sends_again_what_continues_past_the_lock_into_a_send() {
    let ddb = dynamodb::endpoint();
    let rt = crate::common::runtime();
    let warning = "meta_kv_store_lock lets duplicates continue (duplicates: 'continue', the default) and transforms[1] (send_aws_kinesis_data_stream) after it sends them";
    // (the lock's duplicates, what the sink holds in the end, whether the init warned)
    let cases: [(&str, &[&str], bool); 2] = [
        ("", &["b1", "c1", "a1", "b1", "c1"], true),
        ("duplicates: 'drop',", &["b1", "c1", "a1"], false),
    ];
    for (duplicates, sunk, warned) in cases {
        let table = dynamodb::unique_table("once-after");
        rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
        let sink = KinesisStub::start(&[("\"a1\"", usize::MAX)]);
        let d = Dir::new();
        let mark = "sub.tf.obj.insert({ obj: { trg: 'meta locked' }, value: true })";
        let cfg = config(
            &d,
            &format!(
                "{},\n    sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: 'arn:aws:kinesis:us-east-1:123456789012:stream/out' }} }})",
                lock(&table, "a", duplicates, mark)
            ),
        );
        let mut env = dynamodb::process_env(&ddb);
        env.push(("AWS_ENDPOINT_URL_KINESIS".into(), sink.endpoint()));
        let api = RuntimeApi::start();
        let mut f = Function::start(&api, &cfg, "AWS_KINESIS_DATA_STREAM", &env);
        assert_eq!(f.init(Duration::from_secs(30)), None, "{}", f.logs());
        assert_eq!(f.logs().contains(warning), warned, "{}", f.logs());
        let records = kinesis_batch(&[("a1", "p1"), ("b1", "p2"), ("c1", "p3")]);
        let id = api.invoke(&json!({ "Records": records }), Duration::from_secs(10));
        let a = api
            .wait_answer(&id, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
        assert_eq!(failed_seqs(a.response()), ["1000"], "{}", f.logs());
        sink.stop_throttling();
        let again = api.invoke(
            &json!({ "Records": resume_from(&records, a.response()) }),
            Duration::from_secs(10),
        );
        let a = api
            .wait_answer(&again, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
        assert_eq!(
            a.response(),
            &json!({"batchItemFailures": []}),
            "{}",
            f.logs()
        );
        assert_eq!(ids(&sink.accepted()), sunk, "{duplicates}");
    }
}

/// Lambda's shortest timeout, 1 s: the work keeps half of it (not the 1.5 s kept by longer
/// invocations, which would leave none) and a quarter to settle and answer, so a batch is
/// delivered and answered in time.
#[test]
fn a_one_second_invocation_still_does_its_work() {
    let ddb = dynamodb::endpoint();
    let table = dynamodb::unique_table("once-short");
    let rt = crate::common::runtime();
    rt.block_on(dynamodb::create_lock_table(&ddb, &table, "PK", None, "ttl"));
    let sink = Sink::start(&[]);
    let d = Dir::new();
    let send = format!("sub.tf.send.http.post({{ url: '{}' }})", sink.url());
    let cfg = config(&d, &lock(&table, "s", "", &send));
    let api = RuntimeApi::start();
    let mut f = Function::start(&api, &cfg, "AWS_KINESIS_DATA_STREAM", &aws_env(&ddb, None));
    assert_eq!(f.init(Duration::from_secs(30)), None, "{}", f.logs());
    // A first invocation warms the clients (and measures the clock) as a live function's
    // earlier invocations would.
    let warm = api.invoke(
        &json!({ "Records": kinesis_batch(&[("w", "w")]) }),
        Duration::from_secs(10),
    );
    api.wait_answer(&warm, Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
    let id = api.invoke(
        &json!({ "Records": kinesis_batch(&[("s1", "p1"), ("s2", "p2"), ("s3", "p3")]) }),
        Duration::from_secs(1),
    );
    let a = api
        .wait_answer(&id, Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no answer: {}", f.logs()));
    assert!(a.margin_ms() > 0, "{a:?}");
    assert_eq!(
        a.response(),
        &json!({"batchItemFailures": []}),
        "{}",
        f.logs()
    );
    assert_eq!(ids(&sink.accepted()), ["w", "s1", "s2", "s3"]);
}
