//! The S3 handlers (`AWS_S3`, `AWS_S3_SNS`, `AWS_S3_SQS`) end to end: real S3 event
//! notifications, read real objects.
//!
//! moto's S3 sends its notifications to a queue (bucket A) and to a topic whose queue
//! subscription keeps the SNS envelope (bucket B), as S3 does. The test takes those
//! messages off the queues and invokes the `sluice-lambda` bootstrap (through cargo-lambda's
//! runtime API, see `lambda_e2e`) with the events Lambda would build from them: the SQS
//! messages themselves (`AWS_S3_SQS`), the S3 notification in them (`AWS_S3`), and the SNS
//! envelopes as SNS records (`AWS_S3_SNS`). The function reads each object from moto's S3
//! (a key with a space, a gzip object, S3's `s3:TestEvent`, an object deleted before it
//! could be read) and sends one record per line, with the handler's metadata, to a Kinesis
//! stream that the test reads back.

use std::collections::BTreeMap;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use serde_json::{Value, json};

use crate::common::{Dir, gzip, moto};
use crate::lambda_e2e::{Proc, bootstrap, invoke, runtime_api, try_invoke};

/// One SQS message as `ReceiveMessage` returns it.
struct Received {
    id: String,
    receipt: String,
    body: String,
    attributes: BTreeMap<String, String>,
}

/// Every message in the queue at `url`, once `want` arrived (S3 and SNS deliver through
/// moto at once, but on a loaded machine it may take a moment).
async fn take_messages(endpoint: &str, url: &str, want: usize) -> Vec<Received> {
    let c = moto::sqs(endpoint);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut out = Vec::new();
    while out.len() < want {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {want} notifications arrived",
            out.len()
        );
        let got = c
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("receiving messages");
        for m in got.messages() {
            out.push(Received {
                id: m.message_id().unwrap_or_default().to_string(),
                receipt: m.receipt_handle().unwrap_or_default().to_string(),
                body: m.body().unwrap_or_default().to_string(),
                attributes: m
                    .attributes()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                    .collect(),
            });
        }
    }
    out
}

fn md5_hex(text: &str) -> String {
    use md5::Digest;
    md5::Md5::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The SQS event Lambda's event source mapping builds from `messages` of queue `queue`.
fn sqs_event(queue: &str, messages: &[Received]) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "messageId": m.id,
                "receiptHandle": m.receipt,
                "body": m.body,
                "attributes": m.attributes,
                "messageAttributes": {},
                "md5OfBody": md5_hex(&m.body),
                "eventSource": "aws:sqs",
                "eventSourceARN": moto::queue_arn(queue),
                "awsRegion": "us-east-1",
            })
        })
        .collect();
    json!({ "Records": records })
}

/// The SNS event Lambda builds for a subscription, from the envelopes SNS put in `messages`.
fn sns_event(topic: &str, messages: &[Received]) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| {
            let e: Value = serde_json::from_str(&m.body).expect("an SNS envelope");
            json!({
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": format!("{topic}:lambda"),
                "Sns": {
                    "Type": e["Type"],
                    "MessageId": e["MessageId"],
                    "TopicArn": e["TopicArn"],
                    "Subject": e.get("Subject").cloned().unwrap_or(Value::Null),
                    "Message": e["Message"],
                    "Timestamp": e["Timestamp"],
                    "SignatureVersion": e["SignatureVersion"],
                    "Signature": e["Signature"],
                    "SigningCertUrl": e["SigningCertURL"],
                    "UnsubscribeUrl": e["UnsubscribeURL"],
                    "MessageAttributes": {},
                }
            })
        })
        .collect();
    json!({ "Records": records })
}

/// Sets bucket `bucket` to notify `target` (`Queue` or `Topic`, by ARN) of every new object.
fn notify(endpoint: &str, bucket: &str, kind: &str, arn: &str) {
    let xml = format!(
        "<NotificationConfiguration><{kind}Configuration><Id>sluice</Id>\
         <{kind}>{arn}</{kind}><Event>s3:ObjectCreated:*</Event>\
         </{kind}Configuration></NotificationConfiguration>"
    );
    let (status, _, body) = moto::http_full(
        endpoint,
        "PUT",
        &format!("/{bucket}?notification"),
        xml.as_bytes(),
    );
    assert_eq!(
        status,
        200,
        "notification of {bucket}: {}",
        String::from_utf8_lossy(&body)
    );
}

/// Writes the two objects every bucket gets: a key with a space (two JSON lines, CRLF) and a
/// gzip object (three lines).
fn put_objects(endpoint: &str, bucket: &str) {
    let lines = |key: &str, n: usize| -> String {
        (0..n)
            .map(|i| json!({"key": key, "n": i}).to_string() + "\r\n")
            .collect()
    };
    moto::put_object(
        endpoint,
        bucket,
        "dir/a%20b.jsonl",
        lines("dir/a b.jsonl", 2).as_bytes(),
    );
    moto::put_object(
        endpoint,
        bucket,
        "logs/x.jsonl.gz",
        &gzip(lines("logs/x.jsonl.gz", 3).as_bytes()),
    );
}

#[test]
fn s3_notifications_direct_via_sns_and_via_sqs_read_each_object() {
    let mt = moto::endpoint();
    let rt = crate::common::runtime();
    let name = crate::common::dynamodb::unique_table("s3ev");
    let (bucket_a, bucket_b) = (format!("{name}-a"), format!("{name}-b"));
    let (queue_a, queue_b, topic_b) = (
        format!("{name}-qa"),
        format!("{name}-qb"),
        format!("{name}-tb"),
    );
    let stream = format!("{name}-out");

    // Bucket A notifies queue A; bucket B notifies topic B, which queue B subscribes to
    // with the SNS envelope kept (no raw delivery).
    let url_a = rt.block_on(moto::create_queue(&mt, &queue_a));
    let url_b = rt.block_on(moto::create_queue(&mt, &queue_b));
    let topic_arn = rt.block_on(async {
        let c = moto::sns(&mt);
        let arn = c
            .create_topic()
            .name(&topic_b)
            .send()
            .await
            .expect("a topic")
            .topic_arn()
            .expect("its ARN")
            .to_string();
        c.subscribe()
            .topic_arn(&arn)
            .protocol("sqs")
            .endpoint(moto::queue_arn(&queue_b))
            .send()
            .await
            .expect("subscribing the queue");
        arn
    });
    rt.block_on(moto::create_stream(&mt, &stream, 1));
    moto::create_bucket(&mt, &bucket_a);
    moto::create_bucket(&mt, &bucket_b);
    notify(&mt, &bucket_a, "Queue", &moto::queue_arn(&queue_a));
    notify(&mt, &bucket_b, "Topic", &topic_arn);
    put_objects(&mt, &bucket_a);
    put_objects(&mt, &bucket_b);
    // An object that is gone by the time the function reads it.
    moto::put_object(&mt, &bucket_a, "gone.jsonl", b"{\"n\":0}\n");
    let (status, _) = moto::http(&mt, "DELETE", &format!("/{bucket_a}/gone.jsonl"));
    assert_eq!(status, 204, "deleting gone.jsonl");

    // moto (like S3) may send s3:TestEvent when the notification is set up; count what
    // carries records.
    let has_records = |body: &str| body.contains("\"Records\"") || body.contains("\\\"Records\\\"");
    let mut msgs_a = rt.block_on(take_messages(&mt, &url_a, 3));
    let mut msgs_b = rt.block_on(take_messages(&mt, &url_b, 2));
    for (msgs, url, want) in [(&mut msgs_a, &url_a, 3), (&mut msgs_b, &url_b, 2)] {
        while msgs.iter().filter(|m| has_records(&m.body)).count() < want {
            let more = rt.block_on(take_messages(&mt, url, 1));
            msgs.extend(more);
        }
    }
    let gone_id = msgs_a
        .iter()
        .find(|m| m.body.contains("gone.jsonl"))
        .expect("the notification of gone.jsonl")
        .id
        .clone();

    let d = Dir::new();
    let cfg = d.write(
        "config.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.obj.copy({{ obj: {{ src: 'meta @this', trg: 'meta' }} }}),
    sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: '{arn}' }} }}),
  ],
}}
"#,
            arn = moto::stream_arn(&stream)
        ),
    );
    let mut env = moto::process_env(&mt);
    env.push(("SLUICE_METRICS".into(), "off".into()));
    let (_api, port) = runtime_api();

    // AWS_S3_SQS: the queue's messages as they are; only gone.jsonl's message fails.
    let event = d.write("sqs.json", sqs_event(&queue_a, &msgs_a).to_string());
    let mut f = Proc(bootstrap(port, &cfg, "AWS_S3_SQS", &env));
    assert_eq!(
        invoke(port, &event, &mut f),
        json!({"batchItemFailures": [{"itemIdentifier": gone_id}]})
    );
    drop(f);

    // AWS_S3: the notifications S3 would invoke the function with. One that cannot be
    // read fails the invocation (S3 retries asynchronous invokes).
    let s3_records = |with_gone: bool| -> Value {
        let records: Vec<Value> = msgs_a
            .iter()
            .filter(|m| has_records(&m.body) && (with_gone || m.id != gone_id))
            .flat_map(|m| {
                let v: Value = serde_json::from_str(&m.body).unwrap();
                v["Records"].as_array().unwrap().clone()
            })
            .collect();
        json!({ "Records": records })
    };
    let ok = d.write("s3.json", s3_records(false).to_string());
    let bad = d.write("s3-gone.json", s3_records(true).to_string());
    let mut f = Proc(bootstrap(port, &cfg, "AWS_S3", &env));
    assert_eq!(invoke(port, &ok, &mut f), Value::Null);
    let err = try_invoke(port, &bad, &mut f).expect_err("an unreadable object fails");
    assert!(
        err.contains("gone.jsonl"),
        "the error names the object: {err}"
    );
    drop(f);

    // AWS_S3_SNS: the SNS envelopes as SNS records (S3's test event among them, if any).
    let event = d.write("sns.json", sns_event(&topic_arn, &msgs_b).to_string());
    let mut f = Proc(bootstrap(port, &cfg, "AWS_S3_SNS", &env));
    assert_eq!(invoke(port, &event, &mut f), Value::Null);
    drop(f);

    // The stream: bucket A's five lines twice (the SQS and S3 invocations; the failed S3
    // invocation sent them a third time before it failed), bucket B's once, each with the
    // metadata of its own object.
    let mut seen: BTreeMap<(String, String, i64), usize> = BTreeMap::new();
    for (_, records) in rt.block_on(moto::read_stream(&mt, &stream)) {
        for (_, data) in records {
            let v: Value = serde_json::from_slice(&data).expect("JSON");
            let meta = &v["meta"];
            let key = meta["objectKey"].as_str().unwrap().to_string();
            assert_eq!(v["key"].as_str(), Some(key.as_str()), "{v}");
            let bucket = meta["bucketName"].as_str().unwrap().to_string();
            assert_eq!(
                meta["bucketArn"].as_str(),
                Some(format!("arn:aws:s3:::{bucket}").as_str()),
                "{v}"
            );
            assert!(meta["objectSize"].as_i64().unwrap() > 0, "{v}");
            assert!(meta["eventTime"].as_str().unwrap().contains('T'), "{v}");
            *seen
                .entry((bucket, key, v["n"].as_i64().unwrap()))
                .or_default() += 1;
        }
    }
    let mut want = BTreeMap::new();
    for (bucket, times) in [(&bucket_a, 3), (&bucket_b, 1)] {
        for (key, n) in [("dir/a b.jsonl", 2), ("logs/x.jsonl.gz", 3)] {
            for i in 0..n {
                want.insert((bucket.clone(), key.to_string(), i), times);
            }
        }
    }
    assert_eq!(seen, want);
}
