//! Tests of `aws_s3`.

use super::*;
use crate::registry;
use crate::send::aws_destination::AwsSend;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::operation::abort_multipart_upload::AbortMultipartUploadOutput;
use aws_sdk_s3::operation::complete_multipart_upload::CompleteMultipartUploadOutput;
use aws_sdk_s3::operation::create_multipart_upload::CreateMultipartUploadOutput;
use aws_sdk_s3::operation::put_object::{PutObjectInput, PutObjectOutput};
use aws_sdk_s3::operation::upload_part::{UploadPartInput, UploadPartOutput};
use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
use sluice_engine::StatefulTransform;
use sluice_engine::ack::{AckStatus, AckTracker};
use sluice_engine::batch::BatchLimits;
use sluice_engine::{Message, Transform, json, testing};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ARN: &str = "arn:aws:s3:::logs-bucket";

fn s3(rules: &[&Rule], part_size: usize) -> S3 {
    let client = mock_client!(aws_sdk_s3, RuleMode::MatchAny, rules, |b| b.retry_config(
        RetryConfig::standard()
            .with_max_attempts(2)
            .with_initial_backoff(Duration::from_millis(1))
    ));
    let objects = ObjectPerBatch {
        file_path: FilePath {
            prefix: "p".into(),
            suffix: ".txt".into(),
            ..Default::default()
        },
        use_batch_key_as_prefix: false,
        separator: Bytes::from_static(b"\n"),
    };
    S3::new("logs-bucket".into(), objects, AwsTarget::default())
        .with_client(client)
        .with_part_size(part_size)
}

fn batch(items: &[&[u8]]) -> Outgoing {
    Outgoing {
        key: String::new(),
        items: items.iter().map(|i| Bytes::copy_from_slice(i)).collect(),
        ..Default::default()
    }
}

/// S3's error document.
fn s3_error(code: &str, message: &str) -> String {
    format!("<Error><Code>{code}</Code><Message>{message}</Message></Error>")
}

fn body_of(b: &ByteStream) -> Vec<u8> {
    b.bytes().expect("an in-memory body").to_vec()
}

#[test]
fn settings_table() {
    let r = registry();
    for s in [
        json!({"aws": {"arn": ARN}, "file_path": {"uuid": true}}),
        json!({"aws": {"arn": "logs-bucket"}, "file_path": {"prefix": "x"}}),
        json!({"aws": {"arn": ARN}, "file_path": {"uuid": true}, "storage_class": "GLACIER_IR",
               "checksum_algorithm": "SHA256", "separator": "\n", "part_size": MIN_PART_SIZE}),
        json!({"aws": {"arn": ARN}, "file_path": {"uuid": true}, "storage_class": "standard_ia",
               "checksum_algorithm": "none"}),
    ] {
        testing::build(&r, json!({"type": "send_aws_s3", "settings": s}))
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    let fp = json!({"uuid": true});
    testing::assert_config_errors(
        &r,
        "send_aws_s3",
        &[
            (json!({"file_path": fp}), "aws.arn: missing required option"),
            (
                json!({"aws": {"arn": "arn:aws:kinesis:us-east-1:1:stream/s"}, "file_path": fp}),
                "is not an S3 bucket ARN",
            ),
            (
                json!({"aws": {"arn": "arn:aws:s3:us-east-1:1:b"}, "file_path": fp}),
                "is not an S3 bucket ARN",
            ),
            (
                json!({"aws": {"arn": "arn:aws:s3:::bucket/prefix"}, "file_path": fp}),
                "names no S3 bucket",
            ),
            (
                json!({"aws": {"arn": "s3://bucket"}, "file_path": fp}),
                "names no S3 bucket",
            ),
            (
                json!({"aws": {"arn": ARN}}),
                "file_path: missing required option",
            ),
            (
                json!({"aws": {"arn": ARN}, "file_path": fp, "storage_class": "COLD"}),
                "storage_class: unknown storage class \"COLD\"; expected one of",
            ),
            (
                json!({"aws": {"arn": ARN}, "file_path": fp, "checksum_algorithm": "MD5"}),
                "checksum_algorithm: unknown checksum algorithm \"MD5\"; expected one of CRC32, CRC32C, SHA1, SHA256 or none",
            ),
            (
                json!({"aws": {"arn": ARN}, "file_path": fp, "part_size": 1024}),
                "part_size: 1024 bytes is outside S3's part sizes",
            ),
            (
                json!({"aws": {"arn": ARN, "assume_role_arn": "arn:aws:s3:::b"}, "file_path": fp}),
                "aws.assume_role_arn",
            ),
        ],
    );
    assert_eq!(parse_bucket(Some(ARN.into())).unwrap(), "logs-bucket");
    assert_eq!(parse_storage_class(None).unwrap(), StorageClass::Standard);
    assert_eq!(
        parse_checksum(Some("crc32c")).unwrap(),
        Some(ChecksumAlgorithm::Crc32C)
    );
}

#[test]
fn part_plans_table() {
    // (object bytes, part size, the parts' sizes; empty for one PutObject)
    let cases: [(usize, usize, Vec<usize>); 5] = [
        (0, MIN_PART_SIZE, vec![]),
        (MIN_PART_SIZE, MIN_PART_SIZE, vec![]),
        (MIN_PART_SIZE + 1, MIN_PART_SIZE, vec![MIN_PART_SIZE, 1]),
        (
            3 * DEFAULT_PART_SIZE,
            DEFAULT_PART_SIZE,
            vec![DEFAULT_PART_SIZE; 3],
        ),
        (
            2 * DEFAULT_PART_SIZE + 7,
            DEFAULT_PART_SIZE,
            vec![DEFAULT_PART_SIZE, DEFAULT_PART_SIZE, 7],
        ),
    ];
    for (len, part, want) in cases {
        let got: Vec<usize> = plan_parts(len, part)
            .unwrap()
            .unwrap_or_default()
            .iter()
            .map(|r| r.len())
            .collect();
        assert_eq!(got, want, "{len} in parts of {part}");
    }
    // Parts are contiguous and cover the object.
    let parts = plan_parts(2 * MIN_PART_SIZE + 3, MIN_PART_SIZE)
        .unwrap()
        .unwrap();
    assert_eq!(parts[0].start, 0);
    assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
    assert_eq!(parts.last().unwrap().end, 2 * MIN_PART_SIZE + 3);
    // The largest object fits in 10,000 parts, which grow to make it fit.
    let max = MAX_OBJECT_BYTES as usize;
    let parts = plan_parts(max, DEFAULT_PART_SIZE).unwrap().unwrap();
    assert!(parts.len() <= MAX_PARTS, "{}", parts.len());
    assert!(parts[0].len() <= MAX_PART_SIZE);
    assert_eq!(parts.last().unwrap().end, max);
    let e = plan_parts(max + 1, DEFAULT_PART_SIZE).unwrap_err();
    assert!(
        e.contains("exceeds S3's object size limit of 5 TiB (5497558138880 bytes)"),
        "{e}"
    );
}

type Seen = Arc<Mutex<Vec<(String, String, Vec<u8>, Option<String>)>>>;

#[tokio::test]
async fn a_small_batch_is_one_put_object() {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let rule = mock!(Client::put_object)
        .match_requests(move |r: &PutObjectInput| {
            s.lock().unwrap().push((
                r.bucket().unwrap_or("").to_string(),
                r.key().unwrap_or("").to_string(),
                body_of(&r.body),
                r.content_type().map(str::to_string),
            ));
            r.storage_class() == Some(&StorageClass::Standard)
        })
        .then_output(|| PutObjectOutput::builder().build());
    let d = s3(&[&rule], MIN_PART_SIZE);
    d.send(&batch(&[b"{\"a\":1}", b"{\"a\":2}"])).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (bucket, key, body, ct) = &seen[0];
    assert_eq!(bucket, "logs-bucket");
    assert_eq!(key, "p.txt");
    assert_eq!(body, b"{\"a\":1}\n{\"a\":2}", "joined by the separator");
    assert_eq!(ct.as_deref(), Some("text/plain; charset=utf-8"));
}

#[tokio::test]
async fn a_failed_put_object_names_bucket_key_and_code() {
    let rule = mock!(Client::put_object)
        .sequence()
        .http_status(
            404,
            Some(s3_error(
                "NoSuchBucket",
                "The specified bucket does not exist",
            )),
        )
        .repeatedly()
        .build();
    let d = s3(&[&rule], MIN_PART_SIZE);
    let e = d.send(&batch(&[b"x"])).await.unwrap_err();
    assert_eq!(e.undelivered, crate::send::batcher::Undelivered::All);
    let text = e.error.to_string();
    assert!(
        text.contains("s3 bucket logs-bucket, key p.txt: PutObject failed: NoSuchBucket (The specified bucket does not exist)"),
        "{text}"
    );
}

/// Rules for a multipart upload whose part `fail_part` (1-based; 0 for none) fails with
/// `InternalError` every time; the parts' bodies are recorded.
fn multipart_rules(fail_part: i32, parts: Arc<Mutex<Vec<(i32, usize)>>>) -> Vec<Rule> {
    let create = mock!(Client::create_multipart_upload).then_output(|| {
        CreateMultipartUploadOutput::builder()
            .upload_id("up-1")
            .build()
    });
    let upload_ok = mock!(Client::upload_part)
        .match_requests(move |r: &UploadPartInput| {
            let n = r.part_number().unwrap_or(0);
            if n == fail_part {
                return false;
            }
            parts.lock().unwrap().push((n, body_of(&r.body).len()));
            true
        })
        .then_compute_output(|r| {
            UploadPartOutput::builder()
                .e_tag(format!("etag-{}", r.part_number().unwrap_or(0)))
                .build()
        });
    let upload_fail = mock!(Client::upload_part)
        .match_requests(move |r: &UploadPartInput| r.part_number() == Some(fail_part))
        .sequence()
        .http_status(
            500,
            Some(s3_error(
                "InternalError",
                "We encountered an internal error",
            )),
        )
        .repeatedly()
        .build();
    let complete = mock!(Client::complete_multipart_upload)
        .match_requests(|r| {
            let parts = r.multipart_upload().map(|m| m.parts()).unwrap_or_default();
            // Ordered by part number, each with its ETag.
            parts.iter().enumerate().all(|(i, p)| {
                p.part_number() == Some(i as i32 + 1)
                    && p.e_tag() == Some(format!("etag-{}", i + 1).as_str())
            }) && r.upload_id() == Some("up-1")
        })
        .then_output(|| CompleteMultipartUploadOutput::builder().build());
    let abort = mock!(Client::abort_multipart_upload)
        .match_requests(|r| r.upload_id() == Some("up-1") && r.key() == Some("p.txt"))
        .then_output(|| AbortMultipartUploadOutput::builder().build());
    vec![create, upload_ok, upload_fail, complete, abort]
}

#[tokio::test]
async fn a_large_batch_is_a_multipart_upload() {
    let parts = Arc::new(Mutex::new(Vec::new()));
    let rules = multipart_rules(0, parts.clone());
    let refs: Vec<&Rule> = rules.iter().collect();
    let d = s3(&refs, MIN_PART_SIZE);
    let item = vec![b'x'; MIN_PART_SIZE];
    // Two items and a separator: 10 MiB + 1 byte, in parts of 5 MiB, 5 MiB and 1 byte.
    d.send(&batch(&[&item, &item])).await.unwrap();
    let mut got = parts.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, vec![(1, MIN_PART_SIZE), (2, MIN_PART_SIZE), (3, 1)]);
    assert_eq!(rules[0].num_calls(), 1, "CreateMultipartUpload");
    assert_eq!(rules[3].num_calls(), 1, "CompleteMultipartUpload");
    assert_eq!(rules[4].num_calls(), 0, "no AbortMultipartUpload");
}

#[tokio::test]
async fn a_failed_part_aborts_the_upload_and_fails_the_batch() {
    let parts = Arc::new(Mutex::new(Vec::new()));
    let rules = multipart_rules(2, parts);
    let refs: Vec<&Rule> = rules.iter().collect();
    let d = s3(&refs, MIN_PART_SIZE);
    let item = vec![b'x'; MIN_PART_SIZE];
    let e = d.send(&batch(&[&item, &item])).await.unwrap_err();
    let text = e.error.to_string();
    assert!(
        text.contains("s3 bucket logs-bucket, key p.txt: UploadPart (part 2 of 3) failed: InternalError (We encountered an internal error); the upload was aborted"),
        "{text}"
    );
    assert_eq!(rules[2].num_calls(), 2, "the SDK retried the 500 once");
    assert_eq!(rules[3].num_calls(), 0, "not completed");
    assert_eq!(rules[4].num_calls(), 1, "aborted");
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_upload_fails_every_message_of_the_batch() {
    let parts = Arc::new(Mutex::new(Vec::new()));
    let rules = multipart_rules(1, parts);
    let refs: Vec<&Rule> = rules.iter().collect();
    let s = Sender::from_parts(
        s3(&refs, MIN_PART_SIZE),
        BatchLimits::from(BatchSettings {
            size: 64 * MIB,
            ..Default::default()
        }),
        usize::MAX,
        None,
        None,
    );
    let mut trackers = Vec::new();
    let mut out = Vec::new();
    for _ in 0..3 {
        let (t, tok) = AckTracker::new();
        let mut m = Message::new(vec![b'y'; 3 * MIB]);
        m.add_ack(tok);
        s.transform(m, &mut out).await.unwrap();
        trackers.push(t);
    }
    drop(out);
    let e = s
        .transform(Message::ctrl(), &mut Vec::new())
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("UploadPart (part 1 of 2) failed"),
        "{e}"
    );
    assert_eq!(s.undelivered(), 3, "the whole batch is kept");
    assert!(trackers.iter().all(|t| t.status() == AckStatus::Pending));
    s.abort("gave up").await;
    assert!(trackers.iter().all(|t| t.status() == AckStatus::Failed));
}

#[tokio::test]
async fn a_failed_abort_is_reported_with_the_part() {
    let create = mock!(Client::create_multipart_upload).then_output(|| {
        CreateMultipartUploadOutput::builder()
            .upload_id("up-9")
            .build()
    });
    let upload = mock!(Client::upload_part)
        .sequence()
        .http_status(403, Some(s3_error("AccessDenied", "Access Denied")))
        .repeatedly()
        .build();
    let abort = mock!(Client::abort_multipart_upload)
        .sequence()
        .http_status(403, Some(s3_error("AccessDenied", "Access Denied")))
        .repeatedly()
        .build();
    let d = s3(&[&create, &upload, &abort], MIN_PART_SIZE);
    let item = vec![b'x'; MIN_PART_SIZE + 1];
    let text = d
        .send(&batch(&[&item]))
        .await
        .unwrap_err()
        .error
        .to_string();
    assert!(
        text.contains("UploadPart (part 1 of 2) failed: access denied: AccessDenied"),
        "{text}"
    );
    assert!(
        text.contains(
            "AbortMultipartUpload of upload up-9 failed too: access denied: AccessDenied"
        ),
        "{text}"
    );
}

#[test]
fn compliance() {
    let rule = mock!(Client::put_object).then_output(|| PutObjectOutput::builder().build());
    let t = Transform::stateful(Sender::from_parts(
        s3(&[&rule], MIN_PART_SIZE),
        BatchLimits::from(BatchSettings::default()),
        usize::MAX,
        None,
        None,
    ));
    testing::check_compliance(t);
}

#[tokio::test]
async fn failures_say_whether_they_may_have_been_applied() {
    for (answers, want) in sluice_platform::aws::outcome::ANSWERS_TABLE {
        let (last, first) = answers.split_last().unwrap();
        let mut seq = mock!(Client::put_object).sequence();
        for status in first {
            seq = seq.http_status(*status, None);
        }
        let rule = seq.http_status(*last, None).repeatedly().build();
        let d = s3(&[&rule], MIN_PART_SIZE);
        let e = d.send(&batch(&[b"a"])).await.unwrap_err();
        assert_eq!(e.uncertain, *want, "{answers:?}: {}", e.error);
    }
}

#[tokio::test]
async fn a_locked_batch_sent_again_replaces_its_object() {
    use crate::kv_store::LockTicket;
    use crate::kv_store::memory::MemoryStore;
    use crate::send::batcher::ItemLocks;
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let rule = mock!(Client::put_object)
        .match_requests(move |r: &PutObjectInput| {
            s.lock().unwrap().push((
                String::new(),
                r.key().unwrap_or("").to_string(),
                Vec::new(),
                None,
            ));
            true
        })
        .then_output(|| PutObjectOutput::builder().build());
    let client = mock_client!(aws_sdk_s3, RuleMode::MatchAny, [&rule]);
    let objects = ObjectPerBatch {
        file_path: FilePath {
            prefix: "p".into(),
            uuid: true,
            suffix: ".txt".into(),
            ..Default::default()
        },
        use_batch_key_as_prefix: false,
        separator: Bytes::from_static(b"\n"),
    };
    let d = S3::new("logs-bucket".into(), objects, AwsTarget::default()).with_client(client);
    let store = Arc::new(MemoryStore::new(std::num::NonZeroUsize::new(1).unwrap()));
    let locked = |taken_ms: i64| Outgoing {
        locks: ItemLocks::PerItem(
            ["k1", "k2"]
                .iter()
                .map(|k| {
                    vec![Arc::new(LockTicket::new(
                        k.to_string(),
                        0,
                        taken_ms,
                        Some((1_704_164_645_000, Default::default())),
                        store.clone(),
                        "me".into(),
                        std::time::Instant::now(),
                        None,
                    ))]
                })
                .collect(),
        ),
        ..batch(&[b"a", b"b"])
    };
    d.send(&locked(1_704_164_700_000)).await.unwrap();
    d.send(&locked(1_704_164_900_000)).await.unwrap();
    d.send(&batch(&[b"a", b"b"])).await.unwrap();
    let keys: Vec<String> = seen.lock().unwrap().iter().map(|s| s.1.clone()).collect();
    assert_eq!(keys[0], keys[1], "the same messages: the same object");
    assert!(
        keys[0].starts_with("p/") && keys[0].ends_with(".txt"),
        "{}",
        keys[0]
    );
    assert_ne!(keys[2], keys[0], "without locks: a random UUID");
}
