//! Tests of `gcp_storage`: settings, names, and whole batches written to a Cloud Storage
//! stand-in on loopback (`tests/send_gcp_storage.rs` writes to the emulator).

use super::*;
use crate::registry;
use bytes::Bytes;
use sluice_engine::{json, testing};
use sluice_platform::gcp::storage::Storage;
use sluice_platform::http::test_server::{Reply, Server};

const RESOURCE: &str = "projects/_/buckets/logs-bucket";

#[test]
fn settings_table() {
    let r = registry();
    for s in [
        json!({"gcp": {"resource": RESOURCE}, "file_path": {"uuid": true}}),
        // Substation 2.8's form, which its own example uses.
        json!({"gcp": {"resource": "substation-bucket"}, "file_path": {"uuid": true}}),
        json!({"gcp": {"resource": "projects/_/buckets/a.b-c_d"}, "file_path": {"prefix": "x"},
               "use_batch_key_as_prefix": true, "separator": "\n",
               "batch": {"count": 10}, "object": {"batch_key": "k"}}),
    ] {
        testing::build(&r, json!({"type": "send_gcp_storage", "settings": s}))
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    let fp = json!({"uuid": true});
    testing::assert_config_errors(
        &r,
        "send_gcp_storage",
        &[
            (
                json!({"file_path": fp}),
                "gcp.resource: missing required option: the bucket, as projects/_/buckets/BUCKET or its name",
            ),
            (
                json!({"gcp": {"resource": "gs://logs"}, "file_path": fp}),
                "gcp.resource: \"gs://logs\" names no Cloud Storage bucket (expected projects/_/buckets/BUCKET or BUCKET): ':' is not allowed",
            ),
            (
                json!({"gcp": {"resource": "projects/_/buckets/Logs"}, "file_path": fp}),
                "'L' is not allowed in a bucket name",
            ),
            (
                json!({"gcp": {"resource": "projects/_/buckets/logs/prefix"}, "file_path": fp}),
                "'/' is not allowed in a bucket name",
            ),
            (
                json!({"gcp": {"resource": "projects/p/buckets/logs"}, "file_path": fp}),
                "'/' is not allowed in a bucket name",
            ),
            (
                json!({"gcp": {"resource": "projects/_/buckets/ab"}, "file_path": fp}),
                "a bucket name has 3 to 63 characters",
            ),
            (
                json!({"gcp": {"resource": RESOURCE}}),
                "file_path: missing required option",
            ),
        ],
    );
}

#[test]
fn bucket_names_table() {
    let long = "a".repeat(64);
    let dotted = format!("{}.{}", "a".repeat(63), "b".repeat(63));
    let long_part = format!("{}.b", "a".repeat(64));
    for (name, want) in [
        ("logs", None),
        ("my_bucket-2", None),
        ("a.b.c", None),
        (dotted.as_str(), None),
        ("ab", Some("a bucket name has 3 to 63 characters")),
        (long.as_str(), Some("a bucket name has 3 to 63 characters")),
        ("-logs", Some("starts and ends with a letter or digit")),
        ("logs_", Some("starts and ends with a letter or digit")),
        ("a..b", Some("each dot-separated part")),
        (long_part.as_str(), Some("each dot-separated part")),
        ("lögs", Some("'ö' is not allowed")),
    ] {
        let got = bucket_name_error(name);
        match want {
            None => assert_eq!(got, None, "{name}"),
            Some(w) => assert!(
                got.as_deref().is_some_and(|g| g.contains(w)),
                "{name}: {got:?}"
            ),
        }
    }
    assert_eq!(object_name_error("a/b.json"), None);
    assert!(object_name_error("a\nb").is_some());
    assert!(object_name_error(&"x".repeat(1025)).is_some());
    assert_eq!(object_name_error(&"x".repeat(1024)), None);
}

fn bucket(server: &Server, separator: &'static [u8]) -> GcsBucket {
    let objects = ObjectPerBatch {
        file_path: FilePath {
            prefix: "p".into(),
            uuid: true,
            suffix: ".jsonl".into(),
            ..Default::default()
        },
        use_batch_key_as_prefix: true,
        separator: Bytes::from_static(separator),
    };
    GcsBucket::new(
        "logs-bucket".into(),
        objects,
        Storage::new(server.url(), None),
    )
}

fn batch(key: &str, items: &[&[u8]]) -> Outgoing {
    Outgoing {
        key: key.into(),
        items: items.iter().map(|i| Bytes::copy_from_slice(i)).collect(),
        ..Default::default()
    }
}

/// Substation uploads only a batch's first item; every item is written.
#[tokio::test]
async fn a_batch_is_one_object_holding_every_item() {
    let server = Server::start(|_| Reply::ok("{}"));
    for (separator, key, want_body, want_prefix) in [
        (&b""[..], "", "{\"a\":1}{\"a\":2}{\"a\":3}", "name=p%2F"),
        (
            b"\n",
            "tenant-7",
            "{\"a\":1}\n{\"a\":2}\n{\"a\":3}",
            "name=p%2Ftenant-7%2F",
        ),
    ] {
        bucket(&server, separator)
            .send(&batch(key, &[b"{\"a\":1}", b"{\"a\":2}", b"{\"a\":3}"]))
            .await
            .unwrap();
        let r = server.requests().pop().unwrap();
        assert_eq!(r.text(), want_body);
        assert!(r.path.contains(want_prefix), "{}", r.path);
        assert!(r.path.ends_with(".jsonl"), "{}", r.path);
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    }
    let gzip = [0x1f, 0x8b, 8, 0];
    bucket(&server, b"")
        .send(&batch("", &[&gzip]))
        .await
        .unwrap();
    let r = server.requests().pop().unwrap();
    assert_eq!(r.header("content-type"), Some("application/gzip"));
}

#[tokio::test]
async fn a_failed_upload_fails_the_batch_naming_bucket_object_and_answer() {
    let server = Server::start(|_| {
        Reply::status(
            404,
            r#"{"error":{"code":404,"message":"The specified bucket does not exist."}}"#,
        )
    });
    let e = bucket(&server, b"")
        .send(&batch("", &[b"x"]))
        .await
        .unwrap_err();
    let text = e.error.to_string();
    assert!(text.contains("gcs bucket logs-bucket, object p/"), "{text}");
    assert!(text.contains("upload: HTTP 404: "), "{text}");
    assert!(
        text.contains("The specified bucket does not exist."),
        "{text}"
    );
    assert!(!e.uncertain);
    assert_eq!(e.undelivered, super::super::batcher::Undelivered::All);
}
