//! A Kinesis / Firehose / S3 endpoint for integration tests: moto's server (installed by
//! `scripts/emulators.sh install` into `.emulators/venv`) started once per test binary on a
//! free loopback port, or the endpoint in `SLUICE_TEST_MOTO_ENDPOINT` when that is set. A
//! missing emulator fails the test with instructions; it is never skipped.
//!
//! Tests share the one server and keep apart by stream and bucket names
//! ([`super::dynamodb::unique_table`] makes them). Clients are built with the endpoint,
//! region and placeholder credentials given explicitly, so nothing depends on (or changes)
//! the process environment. S3 is reached with plain HTTP requests (moto does not check
//! signatures), so what sluice wrote with the S3 SDK is read back by other means.
//!
//! Quirks (`reference/toolchain.md` §2): a delivery stream must be created with
//! `CompressionFormat` set, and its bucket must exist before the first `PutRecordBatch`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aws_sdk_firehose::types::{CompressionFormat, ExtendedS3DestinationConfiguration};
use aws_sdk_kinesis::types::{ShardIteratorType, StreamStatus};

use super::emulator::{self, Emulator, Spec};

/// The environment variable that names an already running endpoint to use instead.
pub const ENDPOINT_ENV: &str = "SLUICE_TEST_MOTO_ENDPOINT";
/// moto's account id.
pub const ACCOUNT: &str = "123456789012";

/// Where moto's server lives once `scripts/emulators.sh install` ran.
pub fn emulator_binary() -> PathBuf {
    super::workspace_root().join(".emulators/venv/bin/moto_server")
}

/// The endpoint URL (`http://127.0.0.1:PORT`) of a running moto: the one in
/// `SLUICE_TEST_MOTO_ENDPOINT`, else this test binary's server, started on first use and
/// killed when the binary exits.
pub fn endpoint() -> String {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    emulator::endpoint(&EMULATOR, || Spec {
        what: "moto",
        env: ENDPOINT_ENV,
        running: "moto server",
        bin: emulator_binary(),
        flags: ["-H", "-p"],
        timeout: Duration::from_secs(30),
        poll: Duration::from_millis(50),
    })
}

/// `pub fn NAME(endpoint) -> SDK::Client` for each `NAME: SDK`: an SDK client for moto at
/// `endpoint`.
macro_rules! clients {
    ($($name:ident: $sdk:ident),* $(,)?) => {$(
        #[doc = concat!("A `", stringify!($sdk), "` client for `endpoint`.")]
        pub fn $name(endpoint: &str) -> $sdk::Client {
            super::emulator_client!($sdk, endpoint)
        }
    )*};
}

clients! {
    kinesis: aws_sdk_kinesis,
    firehose: aws_sdk_firehose,
    sqs: aws_sdk_sqs,
    sns: aws_sdk_sns,
    eventbridge: aws_sdk_eventbridge,
}

/// The ARN of stream `name`.
pub fn stream_arn(name: &str) -> String {
    format!("arn:aws:kinesis:us-east-1:{ACCOUNT}:stream/{name}")
}

/// Creates stream `name` with `shards` shards and waits until it is active.
pub async fn create_stream(endpoint: &str, name: &str, shards: i32) {
    let c = kinesis(endpoint);
    c.create_stream()
        .stream_name(name)
        .shard_count(shards)
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating stream {name}: {e:?}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = c
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await
            .expect("describing the stream");
        if d.stream_description_summary().map(|s| s.stream_status()) == Some(&StreamStatus::Active)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "stream {name} not active in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A record as a consumer reads it.
#[derive(Debug, Clone)]
pub struct StreamRecord {
    /// Its shard.
    pub shard: String,
    /// Its partition key.
    pub partition_key: String,
    /// Its sequence number.
    pub sequence_number: String,
    /// Its data.
    pub data: Vec<u8>,
}

/// Every record of stream `name`, shard by shard, each in order.
pub async fn read_stream_records(endpoint: &str, name: &str) -> Vec<StreamRecord> {
    let c = kinesis(endpoint);
    let shards = c
        .list_shards()
        .stream_name(name)
        .send()
        .await
        .expect("listing shards");
    let mut out = Vec::new();
    for shard in shards.shards() {
        let mut iter = c
            .get_shard_iterator()
            .stream_name(name)
            .shard_id(shard.shard_id())
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("a shard iterator")
            .shard_iterator()
            .map(String::from);
        while let Some(it) = iter {
            let got = c
                .get_records()
                .shard_iterator(it)
                .limit(10_000)
                .send()
                .await
                .expect("reading records");
            if got.records().is_empty() {
                break;
            }
            for r in got.records() {
                out.push(StreamRecord {
                    shard: shard.shard_id().to_string(),
                    partition_key: r.partition_key().unwrap_or_default().to_string(),
                    sequence_number: r.sequence_number().to_string(),
                    data: r.data().as_ref().to_vec(),
                });
            }
            iter = got.next_shard_iterator().map(String::from);
        }
    }
    out
}

/// One shard's records: (shard id, [(partition key, data)]).
pub type ShardRecords = (String, Vec<(String, Vec<u8>)>);

/// Every record of stream `name`, per shard, shards without records included.
pub async fn read_stream(endpoint: &str, name: &str) -> Vec<ShardRecords> {
    let shards = kinesis(endpoint)
        .list_shards()
        .stream_name(name)
        .send()
        .await
        .expect("listing shards");
    let mut out: Vec<ShardRecords> = shards
        .shards()
        .iter()
        .map(|s| (s.shard_id().to_string(), Vec::new()))
        .collect();
    for r in read_stream_records(endpoint, name).await {
        if let Some((_, records)) = out.iter_mut().find(|(id, _)| *id == r.shard) {
            records.push((r.partition_key, r.data));
        }
    }
    out
}

/// One plain HTTP/1.0 request to `endpoint` (S3 path style): (status, body).
pub fn http(endpoint: &str, method: &str, path: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = http_full(endpoint, method, path, b"");
    (status, body)
}

/// Creates bucket `name`.
pub fn create_bucket(endpoint: &str, name: &str) {
    let (status, body) = http(endpoint, "PUT", &format!("/{name}"));
    assert_eq!(
        status,
        200,
        "creating bucket {name}: {}",
        String::from_utf8_lossy(&body)
    );
}

/// The contents of every object in bucket `name` (at most 1000), in key order.
pub fn bucket_objects(endpoint: &str, name: &str) -> Vec<Vec<u8>> {
    bucket_objects_full(endpoint, name)
        .into_iter()
        .map(|o| o.body)
        .collect()
}

/// Creates a direct-put delivery stream `name` that delivers to bucket `bucket` (which it
/// creates), uncompressed.
pub async fn create_delivery_stream(endpoint: &str, name: &str, bucket: &str) {
    create_bucket(endpoint, bucket);
    firehose(endpoint)
        .create_delivery_stream()
        .delivery_stream_name(name)
        .extended_s3_destination_configuration(
            ExtendedS3DestinationConfiguration::builder()
                .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/firehose"))
                .bucket_arn(format!("arn:aws:s3:::{bucket}"))
                // Without it the SDK cannot read moto's DescribeDeliveryStream answer.
                .compression_format(CompressionFormat::Uncompressed)
                .build()
                .expect("a destination"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating delivery stream {name}: {e:?}"));
}

/// The environment that points a `sluice` process at `endpoint` for every service
/// (placeholder credentials, region `us-east-1`, no instance metadata lookups).
pub fn process_env(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Runs `input` (lines) through `sub.tf.send.aws.<send>` with `settings` (Jsonnet, inside
/// the function's braces), its outputs dropped, with `sluice` pointed at `endpoint`.
pub fn run_send(endpoint: &str, send: &str, settings: &str, input: &[String]) -> super::Output {
    let d = super::Dir::new();
    d.write(
        "cfg.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.send.aws.{send}({{ {settings} }}),
    sub.tf.util.drop(),
  ],
}}
"#
        ),
    );
    let stdin: String = input.iter().map(|l| format!("{l}\n")).collect();
    d.sluice_env(&["run", "-c", "cfg.jsonnet"], stdin, &process_env(endpoint))
}

/// The ARN of queue `name`.
pub fn queue_arn(name: &str) -> String {
    format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}")
}

/// Creates queue `name` (a FIFO queue when it ends in `.fifo`, without content-based
/// deduplication) and returns its URL.
pub async fn create_queue(endpoint: &str, name: &str) -> String {
    let mut req = sqs(endpoint).create_queue().queue_name(name);
    if name.ends_with(".fifo") {
        req = req.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    req.send()
        .await
        .unwrap_or_else(|e| panic!("creating queue {name}: {e:?}"))
        .queue_url()
        .expect("a queue URL")
        .to_string()
}

/// Receives from the queue at `url` until `want` messages arrived (or 60 s passed: on a
/// loaded machine moto takes tens of ms per call; each 10 messages cost one receive and one
/// batched delete), then once more to see that nothing else is there; answers the bodies in
/// the order received. Received messages are deleted (a FIFO queue holds back a message
/// group while some of its messages are received and not deleted); moto then no longer
/// deduplicates against them.
pub async fn receive(endpoint: &str, url: &str, want: usize) -> Vec<String> {
    let c = sqs(endpoint);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut bodies = Vec::new();
    loop {
        let got = c
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("receiving messages");
        let empty = got.messages().is_empty();
        if !empty {
            let entries = got.messages().iter().enumerate().map(|(i, m)| {
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .expect("a delete entry")
            });
            let deleted = c
                .delete_message_batch()
                .queue_url(url)
                .set_entries(Some(entries.collect()))
                .send()
                .await
                .expect("deleting messages");
            assert!(
                deleted.failed().is_empty(),
                "deleting messages: {:?}",
                deleted.failed()
            );
        }
        bodies.extend(
            got.messages()
                .iter()
                .map(|m| m.body().unwrap_or_default().to_string()),
        );
        if (bodies.len() >= want && empty) || Instant::now() > deadline {
            return bodies;
        }
        if empty {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Creates topic `name` (FIFO when it ends in `.fifo`) and a queue `queue` subscribed to it
/// with raw message delivery; answers the topic's ARN and the queue's URL.
pub async fn create_topic_to_queue(endpoint: &str, name: &str, queue: &str) -> (String, String) {
    let c = sns(endpoint);
    let mut req = c.create_topic().name(name);
    if name.ends_with(".fifo") {
        req = req.attributes("FifoTopic", "true");
    }
    let topic = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating topic {name}: {e:?}"))
        .topic_arn()
        .expect("a topic ARN")
        .to_string();
    let url = create_queue(endpoint, queue).await;
    c.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn(queue))
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap_or_else(|e| panic!("subscribing {queue} to {name}: {e:?}"));
    (topic, url)
}

/// Creates event bus `name` with a rule that sends every event from `source` to a queue
/// `queue`; answers the bus's ARN and the queue's URL.
pub async fn create_bus_to_queue(
    endpoint: &str,
    name: &str,
    source: &str,
    queue: &str,
) -> (String, String) {
    let c = eventbridge(endpoint);
    let bus = c
        .create_event_bus()
        .name(name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating event bus {name}: {e:?}"))
        .event_bus_arn()
        .expect("a bus ARN")
        .to_string();
    let url = create_queue(endpoint, queue).await;
    let rule = format!("{name}-to-{queue}");
    c.put_rule()
        .name(&rule)
        .event_bus_name(name)
        .event_pattern(serde_json::json!({ "source": [source] }).to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating rule {rule}: {e:?}"));
    c.put_targets()
        .rule(&rule)
        .event_bus_name(name)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("queue")
                .arn(queue_arn(queue))
                .build()
                .expect("a target"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("targeting {queue} from {rule}: {e:?}"));
    (bus, url)
}

/// One plain HTTP/1.0 request with `body` to `endpoint` (S3 path style): (status, the
/// response's header lines, body).
pub fn http_full(
    endpoint: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, Vec<String>, Vec<u8>) {
    // moto checks no signature, but refuses anonymous reads of private objects: any
    // Authorization header makes the request the account's.
    let auth = "AWS4-HMAC-SHA256 Credential=test/20250101/us-east-1/s3/aws4_request, \
                SignedHeaders=host, Signature=0";
    http_request(endpoint, method, path, &[("Authorization", auth)], body)
}

/// One plain HTTP/1.0 request with `headers` and `body` to `endpoint`: (status, the
/// response's header lines, body). moto tells the service from the Authorization header's
/// credential scope.
pub fn http_request(
    endpoint: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<String>, Vec<u8>) {
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(host).unwrap_or_else(|e| panic!("connecting to {host}: {e}"));
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("writing the request");
    s.write_all(body).expect("writing the body");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("reading the response");
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response");
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (
        status,
        lines.map(String::from).collect(),
        buf[split + 4..].to_vec(),
    )
}

/// Writes object `key` of bucket `bucket`.
pub fn put_object(endpoint: &str, bucket: &str, key: &str, body: &[u8]) {
    let (status, _, answer) = http_full(endpoint, "PUT", &format!("/{bucket}/{key}"), body);
    assert_eq!(
        status,
        200,
        "writing {bucket}/{key}: {}",
        String::from_utf8_lossy(&answer)
    );
}

/// One object as read back: its key, its response headers (lower-case names) and contents.
#[derive(Debug)]
pub struct Object {
    pub key: String,
    pub headers: std::collections::HashMap<String, String>,
    pub body: Vec<u8>,
}

/// Every object in bucket `name` (at most 1000), in key order, with headers.
pub fn bucket_objects_full(endpoint: &str, name: &str) -> Vec<Object> {
    let (status, body) = http(
        endpoint,
        "GET",
        &format!("/{name}?list-type=2&max-keys=1000"),
    );
    let xml = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(status, 200, "listing {name}: {xml}");
    assert!(!xml.contains("<IsTruncated>true"), "more than 1000 objects");
    let mut keys: Vec<String> = xml
        .split("<Key>")
        .skip(1)
        .map(|s| s.split("</Key>").next().unwrap_or("").to_string())
        .collect();
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let (status, head, body) = http_full(endpoint, "GET", &format!("/{name}/{key}"), b"");
            assert_eq!(status, 200, "reading {name}/{key}");
            let headers = head
                .iter()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            Object { key, headers, body }
        })
        .collect()
}
