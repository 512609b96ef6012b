//! `AWS_S3`, `AWS_S3_SNS`, `AWS_S3_SQS`: S3 event notifications, each object read.
//!
//! The notification comes directly (`AWS_S3`), inside SNS messages (`AWS_S3_SNS`), or
//! inside SQS message bodies (`AWS_S3_SQS`: an S3 event, or an SNS envelope whose `Message`
//! is one). Each object is read (at most `SLUICE_MAX_OBJECT_BYTES`, 1 GiB by default), a
//! compressed object (gzip, bzip2, Zstandard, framed Snappy: [`sluice_transforms::compression`]) is
//! decompressed (detected by its magic bytes; a truncated one is an error),
//! and text becomes one message per line (a final newline ends the last line, `\r\n` is a
//! line end); an object with a NUL byte in its first 8 KiB is binary and is one message.
//! Unlike Substation, a binary object does not end the processing of the event's other
//! records. Metadata: `eventTime` (RFC 3339), `bucketArn`, `bucketName`, `objectKey`
//! (URL-decoded) and `objectSize`.
//!
//! An object that cannot be read fails the invocation (S3 and SNS retry asynchronous
//! invokes); with `AWS_S3_SQS` its SQS message is answered in `batchItemFailures`. So does
//! an SNS message or SQS body that is not an S3 notification (not JSON, or not of its
//! shape): it is logged once with its id, and the other records are processed; the
//! invocation as a whole fails only when the event is not of the handler's shape.

use std::io::Read;

use aws_lambda_events::event::sns::SnsEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_engine::Message;

use super::{Function, HandlerError, HandlerKind, message, parse_event};

/// An S3 event notification: only what the handler reads, so that a notification without
/// the fields it does not need (moto's have no `userIdentity`, for one) is still read.
#[derive(Debug, Deserialize)]
struct S3Event {
    #[serde(rename = "Records")]
    records: Vec<S3EventRecord>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct S3EventRecord {
    #[serde(default)]
    event_time: Option<String>,
    s3: S3Entity,
}

#[derive(Debug, Deserialize)]
struct S3Entity {
    bucket: S3Bucket,
    object: S3Object,
}

#[derive(Debug, Deserialize)]
struct S3Bucket {
    name: String,
    #[serde(default)]
    arn: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct S3Object {
    key: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    url_decoded_key: Option<String>,
}

pub(crate) async fn handle(f: &Function, payload: Value) -> Result<Value, HandlerError> {
    let kind = f.options().kind;
    // Each source record (an S3 record, an SNS record, an SQS message) with its id and the
    // S3 records it carries, or why they cannot be read (that source record alone fails).
    let mut sources: Vec<(String, Result<Vec<S3EventRecord>, String>)> = Vec::new();
    match kind {
        HandlerKind::S3 => {
            let e: S3Event = parse_event(kind, payload)?;
            sources.extend(e.records.into_iter().map(|r| (String::new(), Ok(vec![r]))));
        }
        HandlerKind::S3Sns => {
            let e: SnsEvent = parse_event(kind, payload)?;
            for r in e.records {
                let inner = s3_in_message(&r.sns.message)
                    .map_err(|e| format!("SNS message {}: {e}", r.sns.message_id));
                sources.push((r.sns.message_id, inner));
            }
        }
        _ => {
            let e: SqsEvent = parse_event(kind, payload)?;
            for (i, m) in e.records.into_iter().enumerate() {
                let id = m.message_id.unwrap_or_else(|| format!("record {i}"));
                let inner = s3_in_sqs_body(m.body.as_deref().unwrap_or(""))
                    .map_err(|e| format!("SQS message {id}: {e}"));
                sources.push((id, inner));
            }
        }
    }
    let mut records: Vec<Result<Vec<Message>, String>> = Vec::with_capacity(sources.len());
    for (_, s3s) in &sources {
        let s3s = match s3s {
            Ok(s3s) => s3s,
            Err(why) => {
                tracing::error!(error = %why, "notification not read");
                records.push(Err(why.clone()));
                continue;
            }
        };
        let mut msgs = Ok(Vec::new());
        for r in s3s {
            match read_record(r, f.options().max_object_bytes).await {
                Ok(m) => {
                    if let Ok(all) = &mut msgs {
                        all.extend(m);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "object not read");
                    msgs = Err(e);
                    break;
                }
            }
        }
        records.push(msgs);
    }
    let run = f.run_records(records, false).await;
    if kind == HandlerKind::S3Sqs {
        let ids: Vec<String> = sources.into_iter().map(|(id, _)| id).collect();
        f.batch_response(&run, &ids)
    } else {
        super::sns::all_delivered(&run)
    }
}

/// The S3 records in an SQS body: an S3 event, or an SNS envelope carrying one.
fn s3_in_sqs_body(body: &str) -> Result<Vec<S3EventRecord>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    if v.get("Records").is_none()
        && let Some(inner) = v.get("Message").and_then(Value::as_str)
    {
        return s3_in_message(inner).map_err(|e| format!("the SNS message in the body: {e}"));
    }
    s3_records(v)?
        .ok_or_else(|| "the body is neither an S3 event nor an SNS message carrying one".into())
}

/// How many S3 records `text` carries as an SQS body (`AWS_S3_SQS`) and as an SNS message
/// (`AWS_S3_SNS`), or why it is not an S3 notification (the fuzz targets' way in).
pub fn notification_counts(text: &str) -> (Result<usize, String>, Result<usize, String>) {
    (
        s3_in_sqs_body(text).map(|r| r.len()),
        s3_in_message(text).map(|r| r.len()),
    )
}

/// The S3 records of one S3 notification's text.
fn s3_in_message(text: &str) -> Result<Vec<S3EventRecord>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("it is not JSON: {e}"))?;
    s3_records(v)?.ok_or_else(|| "neither an S3 event nor S3's test event".into())
}

/// The S3 records of a notification; `None` when it is neither an S3 event nor S3's
/// `s3:TestEvent` (sent to a queue or topic when notifications are set up: no records,
/// and no error).
fn s3_records(v: Value) -> Result<Option<Vec<S3EventRecord>>, String> {
    if v.get("Records").is_some() {
        let e: S3Event =
            serde_json::from_value(v).map_err(|e| format!("it is not an S3 event: {e}"))?;
        return Ok(Some(e.records));
    }
    if v.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        return Ok(Some(Vec::new()));
    }
    Ok(None)
}

/// Reads one S3 record's object into messages.
async fn read_record(r: &S3EventRecord, max: usize) -> Result<Vec<Message>, String> {
    let bucket = r.s3.bucket.name.clone();
    let key =
        r.s3.object
            .url_decoded_key
            .clone()
            .unwrap_or_else(|| url_decode(&r.s3.object.key));
    let meta = json!({
        "eventTime": r.event_time,
        "bucketArn": r.s3.bucket.arn,
        "bucketName": bucket,
        "objectKey": key,
        "objectSize": r.s3.object.size,
    });
    let place = format!("s3://{bucket}/{key}");
    let data = get_object(&bucket, &key, max)
        .await
        .map_err(|e| format!("{place}: {e}"))?;
    let data = if let Some(codec) = sluice_transforms::compression::Codec::detect(&data) {
        let mut out = Vec::with_capacity(data.len() * 4);
        codec
            .reader(&data[..])
            .and_then(|r| r.take(max as u64 + 1).read_to_end(&mut out))
            .map_err(|e| format!("{place}: {e}"))?;
        if out.len() > max {
            return Err(format!(
                "{place}: decompressed, it is larger than {max} bytes"
            ));
        }
        out
    } else {
        data
    };
    Ok(split(data).into_iter().map(|d| message(d, &meta)).collect())
}

/// One message per line, or the whole object when it is binary.
pub(crate) fn split(data: Vec<u8>) -> Vec<bytes::Bytes> {
    let data = bytes::Bytes::from(data);
    if data[..data.len().min(8192)].contains(&0) {
        return vec![data];
    }
    let mut out = Vec::new();
    let mut start = 0;
    for nl in memchr::memchr_iter(b'\n', &data) {
        let mut end = nl;
        if end > start && data[end - 1] == b'\r' {
            end -= 1;
        }
        out.push(data.slice(start..end));
        start = nl + 1;
    }
    if start < data.len() {
        out.push(data.slice(start..));
    }
    out
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// S3 notification keys are URL-encoded with `+` for a space.
fn url_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(feature = "aws")]
async fn get_object(bucket: &str, key: &str, max: usize) -> Result<Vec<u8>, String> {
    use sluice_platform::aws;
    let conf = aws::load(&aws::AwsTarget::default()).await;
    if conf.region().is_none() {
        return Err("no AWS region: set AWS_REGION".into());
    }
    let c = aws::s3::client(
        &conf,
        aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired,
    );
    let out = c
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| format!("GetObject failed: {}", aws::describe_error(&e)))?;
    if let Some(n) = out.content_length()
        && n as u64 > max as u64
    {
        return Err(format!(
            "the object has {n} bytes, more than SLUICE_MAX_OBJECT_BYTES ({max})"
        ));
    }
    let body = out
        .body
        .collect()
        .await
        .map_err(|e| format!("reading the object: {e}"))?;
    Ok(body.to_vec())
}

/// Without the `aws` feature there is no S3 client (the `lambda` fuzz target's build):
/// each notification's object fails as an unreadable one does.
#[cfg(not(feature = "aws"))]
async fn get_object(_bucket: &str, _key: &str, _max: usize) -> Result<Vec<u8>, String> {
    Err("reading S3 objects needs a build with the `aws` feature".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_binary_table() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"a\nb\n", &[b"a", b"b"]),
            (b"a\r\nb", &[b"a", b"b"]),
            (b"\n", &[b""]),
            (b"", &[]),
            (b"x\0y\nz", &[b"x\0y\nz"]),
        ];
        for (input, want) in cases {
            let got = split(Vec::from(*input));
            assert_eq!(
                got.iter().map(|b| &b[..]).collect::<Vec<_>>(),
                *want,
                "{input:?}"
            );
        }
    }

    #[test]
    fn keys_are_url_decoded() {
        for (k, want) in [
            ("a+b%2Fc.json", "a b/c.json"),
            ("plain", "plain"),
            ("bad%zz", "bad%zz"),
            ("end%2", "end%2"),
        ] {
            assert_eq!(url_decode(k), want, "{k}");
        }
    }

    #[test]
    fn sqs_bodies_table() {
        // An S3 event notification as S3 sends it (every field its schema has).
        let s3 = r#"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2024-01-01T00:00:00.000Z","eventName":"ObjectCreated:Put","userIdentity":{"principalId":"AWS:EXAMPLE"},"requestParameters":{"sourceIPAddress":"127.0.0.1"},"responseElements":{"x-amz-request-id":"R","x-amz-id-2":"I"},"s3":{"s3SchemaVersion":"1.0","configurationId":"c","bucket":{"name":"b","ownerIdentity":{"principalId":"EXAMPLE"},"arn":"arn:aws:s3:::b"},"object":{"key":"k","size":1,"eTag":"e","sequencer":"0A"}}}]}"#;
        assert_eq!(s3_in_sqs_body(s3).unwrap().len(), 1);
        let sns = json!({"Type": "Notification", "Message": s3}).to_string();
        assert_eq!(s3_in_sqs_body(&sns).unwrap().len(), 1);
        assert!(
            s3_in_sqs_body(r#"{"Event":"s3:TestEvent"}"#)
                .unwrap()
                .is_empty()
        );
        assert!(s3_in_sqs_body("{}").unwrap_err().contains("neither"));
        assert!(s3_in_sqs_body("nope").unwrap_err().contains("not JSON"));
        let test_in_sns = json!({"Type": "Notification", "Message": r#"{"Event":"s3:TestEvent"}"#});
        assert!(s3_in_sqs_body(&test_in_sns.to_string()).unwrap().is_empty());
        assert!(
            s3_in_message(r#"{"Event":"s3:TestEvent"}"#)
                .unwrap()
                .is_empty()
        );
        assert!(
            s3_in_message(r#"{"Records":[{"s3":1}]}"#)
                .unwrap_err()
                .contains("not an S3 event")
        );
        let sns_bad = json!({"Type": "Notification", "Message": "{}"}).to_string();
        assert!(
            s3_in_sqs_body(&sns_bad)
                .unwrap_err()
                .contains("SNS message in the body")
        );
    }
}
