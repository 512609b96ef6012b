//! The Lambda function's errors: each failure a handler returns carries a short, stable
//! `errorType` (`sluice_lambda::HandlerError::kind`) and a one-line `errorMessage`.
//!
//! In process, a table of events per handler checks which failure gets which name. Through
//! the runtime API (cargo-lambda's emulator, as in lambda_e2e.rs), the bootstrap answers an
//! event that is not the handler's (not JSON at all, which lambda_runtime would otherwise
//! answer itself) with `InvalidEvent`, and a batch with an undelivered record and no
//! `SLUICE_REPORT_BATCH_ITEM_FAILURES` with `DeliveryFailed`: as `cargo lambda invoke`
//! prints them, and as the emulator's Invoke endpoint returns them, byte for byte. Each of
//! those failed invocations is one line of the function's log, `invocation failed`; a
//! Firehose record the pipeline fails is one line too, naming its recordId.

use std::sync::Arc;

use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Value, json};
use sluice_engine::{Pipeline, Transform};
use sluice_lambda::{Function, HandlerError, HandlerKind, Options};

use crate::common::{Dir, workspace_root};
use crate::lambda_e2e::{
    Proc, bootstrap_command, function_error, invoke, invoke_raw, kinesis_event, runtime_api,
    try_invoke,
};

/// Fails every message whose data contains `bad` (a pipeline error), as JSON transforms.
fn failing_on_bad() -> Value {
    json!([{"type": "meta_switch", "settings": {"cases": [
        {"condition": {"type": "string_contains", "settings": {"value": "bad"}},
         "transforms": [{"type": "utility_err", "settings": {"message": "bad record"}}]},
    ]}}])
}

/// The function with `handler` and a pipeline failing on data "bad" (its config in `d`),
/// against a fresh runtime API: (the API, its port, the function). Batch item failures are
/// not reported, so a failed Kinesis record fails the invocation.
fn failing_function(d: &Dir, handler: &str) -> (Proc, u16, Proc) {
    let cfg = d.write(
        "config.json",
        json!({"transforms": failing_on_bad()}).to_string(),
    );
    let (api, port) = runtime_api();
    let env = [
        ("SLUICE_CONFIG".to_string(), cfg.display().to_string()),
        ("SLUICE_METRICS".to_string(), "off".to_string()),
    ];
    let f = Proc(
        bootstrap_command(port, handler, &env)
            .env_remove("SLUICE_REPORT_BATCH_ITEM_FAILURES")
            .spawn()
            .expect("sluice-lambda"),
    );
    (api, port, f)
}

/// A function of `kind` over `transforms` (a JSON list), without partial batch responses.
fn function(kind: HandlerKind, transforms: &Value) -> Function {
    let registry = sluice_transforms::registry();
    let steps: Vec<(Arc<str>, Transform)> = transforms
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let built = sluice_engine::testing::build(&registry, t.clone()).expect("a transform");
            (Arc::from(format!("t{i}")), built)
        })
        .collect();
    let mut opts = Options::new(kind);
    opts.metrics = None;
    Function::new(Pipeline::new(steps), opts)
}

fn fixture(name: &str) -> Value {
    let p = workspace_root().join("tests/fixtures/lambda").join(name);
    serde_json::from_slice(&std::fs::read(&p).expect("the fixture")).expect("JSON")
}

fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f.handle(LambdaEvent::new(payload, Context::default())))
}

#[test]
fn each_handler_failure_has_its_error_type() {
    let none = json!([]);
    let bad = failing_on_bad();
    let sqs_message = |body: &str| {
        json!({"Records": [{"messageId": "m-1", "body": body,
                            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q"}]})
    };
    // The fixture's SNS records, the second carrying `bad`.
    let sns_message = |message: &str| {
        let mut e = fixture("sns.json");
        e["Records"][1]["Sns"]["Message"] = json!(message);
        e
    };
    // (handler, transforms, event, errorType, words the message holds)
    let cases: Vec<(HandlerKind, &Value, Value, &str, &str)> = vec![
        (
            HandlerKind::Sqs,
            &none,
            json!({"Records": "nope"}),
            "InvalidEvent",
            "the event is not a valid AWS_SQS event: invalid type: string \"nope\"",
        ),
        (
            HandlerKind::Sqs,
            &none,
            json!({"Records": [{"body": "x"}]}),
            "InvalidEvent",
            "the event's record 0 has no messageId",
        ),
        (
            HandlerKind::DataFirehose,
            &none,
            json!({"records": [{"data": "aGk="}]}),
            "InvalidEvent",
            "the event's record 0 has no recordId",
        ),
        (
            HandlerKind::DynamodbStream,
            &none,
            json!({"Records": [{"eventName": "INSERT"}]}),
            "InvalidEvent",
            "the event's record 0 has no SequenceNumber",
        ),
        (
            HandlerKind::KinesisDataStream,
            &none,
            json!({"Records": [{"kinesis": {"data": "aGk="}}]}),
            "InvalidEvent",
            "the event is not a valid AWS_KINESIS_DATA_STREAM event: missing field `sequenceNumber`",
        ),
        (
            HandlerKind::Sns,
            &none,
            json!({}),
            "InvalidEvent",
            "the event is not a valid AWS_SNS event",
        ),
        (
            HandlerKind::S3,
            &none,
            json!([]),
            "InvalidEvent",
            "the event is not a valid AWS_S3 event",
        ),
        (
            HandlerKind::S3Sns,
            &none,
            json!({"Records": 1}),
            "InvalidEvent",
            "the event is not a valid AWS_S3_SNS event",
        ),
        (
            HandlerKind::S3Sqs,
            &none,
            json!(null),
            "InvalidEvent",
            "the event is not a valid AWS_S3_SQS event",
        ),
        (
            HandlerKind::KinesisAutoscale,
            &none,
            json!({"Records": []}),
            "ConfigError",
            "AWS_KINESIS_AUTOSCALE runs no pipeline",
        ),
        (
            HandlerKind::Sqs,
            &bad,
            sqs_message("bad"),
            "DeliveryFailed",
            "1 of 1 records were not delivered (first: transforms[0].settings.cases[0].transforms[0] \
             (utility_err): bad record); the batch will be retried",
        ),
        (
            HandlerKind::KinesisDataStream,
            &none,
            json!({"Records": [{"kinesis": {"data": 7, "sequenceNumber": "1"}}]}),
            "DeliveryFailed",
            "1 of 1 records were not delivered (first: record 1: data is a number, not a \
             base64 string); the batch will be retried",
        ),
        (
            HandlerKind::Sns,
            &bad,
            sns_message("bad"),
            "DeliveryFailed",
            "2 of 2 records were not delivered (first: transforms[0].settings.cases[0].transforms[0] \
             (utility_err): bad record)",
        ),
        // An S3 notification through SQS that carries no S3 event fails its message alone.
        (
            HandlerKind::S3Sqs,
            &none,
            sqs_message("not json"),
            "DeliveryFailed",
            "1 of 1 records were not delivered (first: SQS message m-1: the body is not JSON",
        ),
    ];
    for (kind, transforms, event, want_type, words) in cases {
        let f = function(kind, transforms);
        let e = handle(&f, event.clone())
            .expect_err(&format!("{} {event}: a function error", kind.name()));
        assert_eq!(e.kind(), want_type, "{} {event}: {e}", kind.name());
        let message = e.to_string();
        assert!(
            message.contains(words),
            "{} {event}: {message}",
            kind.name()
        );
        assert!(!message.contains('\n'), "one line: {message:?}");
    }

    // API Gateway and plain invokes answer their failures; they are not function errors.
    for (kind, event) in [
        (HandlerKind::ApiGateway, json!({"body": 7})),
        (HandlerKind::ApiGateway, json!({"body": "bad"})),
        (HandlerKind::Lambda, json!("bad")),
    ] {
        let f = function(kind, &bad);
        let answer =
            handle(&f, event.clone()).unwrap_or_else(|e| panic!("{} {event}: {e:?}", kind.name()));
        assert!(
            answer["statusCode"] == 400 || answer["statusCode"] == 500,
            "{answer}"
        );
    }
}

#[test]
fn function_errors_reach_the_runtime_api_with_their_error_type() {
    let d = Dir::new();
    let (_api, port, mut f) = failing_function(&d, "AWS_KINESIS_DATA_STREAM");

    // A batch that is delivered still answers.
    let good = d.write("good.json", kinesis_event(&["a", "b"]).to_string());
    assert_eq!(
        invoke(port, &good, &mut f),
        json!({"batchItemFailures": []})
    );

    // An event that is not a Kinesis event: `cargo lambda invoke` exits 1 and prints
    // `Error: <errorType>` and the message.
    let not_kinesis = d.write("not-kinesis.json", r#"{"nope": 1}"#);
    let printed = try_invoke(port, &not_kinesis, &mut f).expect_err("a function error");
    let (error_type, message) = function_error(&printed);
    assert_eq!(error_type, "InvalidEvent", "{printed}");
    assert!(
        message.starts_with(
            "the event is not a valid AWS_KINESIS_DATA_STREAM event: missing field `Records`"
        ),
        "{printed}"
    );

    // A body that is not JSON at all: the handler answers it, not lambda_runtime (whose
    // errorType would be `&lambda_runtime::deserializer::DeserializeError`).
    let (status, body) = invoke_raw(port, b"{\"Records\": [");
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("JSON"),
        json!({
            "errorType": "InvalidEvent",
            "errorMessage": "the event is not a valid AWS_KINESIS_DATA_STREAM event: \
                             EOF while parsing a list at line 1 column 13",
        }),
    );

    // A batch with an undelivered record and no ReportBatchItemFailures: the whole batch
    // fails, so that the mapping retries it. The pipeline error fails both records.
    let batch = kinesis_event(&["a", "bad"]);
    let want_message = "2 of 2 records were not delivered (first: \
                        transforms[0].settings.cases[0].transforms[0] (utility_err): bad record); \
                        the batch will be retried";
    let event = d.write("bad.json", batch.to_string());
    let printed = try_invoke(port, &event, &mut f).expect_err("a function error");
    assert_eq!(
        function_error(&printed),
        ("DeliveryFailed".to_string(), want_message.to_string()),
        "{printed}"
    );
    let (status, body) = invoke_raw(port, batch.to_string().as_bytes());
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).expect("JSON"),
        json!({"errorType": "DeliveryFailed", "errorMessage": want_message}),
    );

    // Each failed invocation is logged once: one ERROR line, the function's own
    // `invocation failed` in the invocation's span, whose fields carry the errorType and
    // the whole message. lambda_runtime's copy (`errorType: message`) is not written.
    let _ = f.0.kill();
    let _ = f.0.wait();
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut f.0.stdout.take().unwrap(), &mut logs).unwrap();
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let errors: Vec<&Value> = lines.iter().filter(|v| v["level"] == "ERROR").collect();
    let got: Vec<(&str, &str, &str)> = errors
        .iter()
        .map(|v| {
            let field = |k: &str| v["fields"][k].as_str().unwrap_or("-");
            (field("message"), field("error_type"), field("error"))
        })
        .collect();
    let not_kinesis = "the event is not a valid AWS_KINESIS_DATA_STREAM event: missing field \
                       `Records` at line 1 column 11";
    let not_json = "the event is not a valid AWS_KINESIS_DATA_STREAM event: EOF while parsing \
                    a list at line 1 column 13";
    assert_eq!(
        got,
        vec![
            ("invocation failed", "InvalidEvent", not_kinesis),
            ("invocation failed", "InvalidEvent", not_json),
            ("invocation failed", "DeliveryFailed", want_message),
            ("invocation failed", "DeliveryFailed", want_message),
        ],
        "one ERROR line per failed invocation (the bad batch was invoked twice): {logs}"
    );
    let mut request_ids: Vec<&str> = errors
        .iter()
        .map(|v| v["span"]["request_id"].as_str().expect("a request_id"))
        .collect();
    request_ids.dedup();
    assert_eq!(request_ids.len(), 4, "{logs}");
    // No other line says it again, at any level.
    for (reason, times) in [
        (not_kinesis, 1),
        (not_json, 1),
        ("transforms[0] (utility_err): bad record", 2),
    ] {
        assert_eq!(
            logs.lines().filter(|l| l.contains(reason)).count(),
            times,
            "{reason}: {logs}"
        );
    }
    assert!(
        !logs.contains("DeserializeError") && !logs.contains("Box<dyn"),
        "{logs}"
    );
}

/// A Firehose record the pipeline fails is answered `ProcessingFailed` and logged once,
/// with its recordId; the invocation itself succeeds.
#[test]
fn a_failed_firehose_record_is_logged_once_with_its_record_id() {
    use base64::Engine;
    let d = Dir::new();
    let (_api, port, mut f) = failing_function(&d, "AWS_DATA_FIREHOSE");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let event = d.write(
        "firehose.json",
        json!({"invocationId": "i", "records": [
            {"recordId": "r-0", "approximateArrivalTimestamp": 1700000000000_i64, "data": b64("a")},
            {"recordId": "r-1", "approximateArrivalTimestamp": 1700000000000_i64, "data": b64("bad")},
        ]})
        .to_string(),
    );
    let answer = invoke(port, &event, &mut f);
    let results: Vec<&str> = answer["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["Ok", "ProcessingFailed"], "{answer}");

    let _ = f.0.kill();
    let _ = f.0.wait();
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut f.0.stdout.take().unwrap(), &mut logs).unwrap();
    let failed: Vec<Value> = logs
        .lines()
        .filter(|l| l.contains("bad record"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(failed.len(), 1, "{logs}");
    assert_eq!(failed[0]["fields"]["message"], "record ProcessingFailed");
    assert_eq!(failed[0]["fields"]["record_id"], "r-1");
    assert!(!logs.contains("\"ERROR\""), "{logs}");
}

/// docs/lambda.md's "Function errors" table names every errorType.
#[test]
fn the_docs_list_every_error_type() {
    let doc = std::fs::read_to_string(workspace_root().join("docs/lambda.md")).unwrap();
    let table = doc
        .split("## Function errors")
        .nth(1)
        .expect("a \"Function errors\" section in docs/lambda.md");
    let table = table.split("\n## ").next().unwrap();
    for kind in HandlerError::KINDS {
        assert!(
            table.contains(&format!("| `{kind}` |")),
            "docs/lambda.md's Function errors table lacks {kind}"
        );
    }
}
