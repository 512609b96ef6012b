//! Tests of `storage`: the upload protocols against a Cloud Storage stand-in on loopback
//! that answers as the JSON API does, for what an emulator cannot be made to do (keep part
//! of a chunk, fail, refuse); `tests/send_gcp_storage.rs` writes to the emulator.

use super::*;

#[test]
fn persisted_table() {
    for (range, want) in [
        (None, Some(0)),
        (Some("bytes=0-0"), Some(1)),
        (Some("bytes=0-16777215"), Some(16_777_216)),
        (Some(" bytes=0-9 "), Some(10)),
        (Some("bytes=5-9"), None),
        (Some("bytes=0-x"), None),
        (Some("0-9"), None),
    ] {
        assert_eq!(persisted(range), want, "{range:?}");
    }
}

#[test]
fn path_segments_table() {
    for (name, want) in [
        ("cfg.jsonnet", "cfg.jsonnet"),
        (
            "team/lib/x y+z.libsonnet",
            "team%2Flib%2Fx%20y%2Bz.libsonnet",
        ),
        ("é~_", "%C3%A9~_"),
    ] {
        assert_eq!(path_segment(name), want, "{name}");
    }
}

#[tokio::test]
async fn an_object_is_read_whole_or_refused_past_its_limit() {
    let server = Server::start(|r| match r.path.as_str() {
        "/storage/v1/b/configs/o/team%2Fcfg.jsonnet?alt=media" => Reply::ok("{ transforms: [] }"),
        _ => Reply::status(404, r#"{"error":{"code":404,"message":"No such object"}}"#),
    });
    let s = Storage::new(server.url(), None).with_client(quick());
    let got = s
        .download("configs", "team/cfg.jsonnet", 100, "a config")
        .await
        .unwrap();
    assert_eq!(got, b"{ transforms: [] }");
    let e = s
        .download("configs", "team/cfg.jsonnet", 10, "a config")
        .await
        .unwrap_err();
    assert_eq!(
        e.text,
        "the object has 18 bytes, more than the 10 bytes a config may have"
    );
    let e = s
        .download("configs", "nope", 100, "a config")
        .await
        .unwrap_err();
    assert!(e.text.starts_with("download: HTTP 404: "), "{}", e.text);
}

#[test]
fn emulator_host_table() {
    for (host, want) in [
        ("localhost:9023", "http://localhost:9023"),
        ("http://127.0.0.1:1", "http://127.0.0.1:1"),
        ("https://gcs.example", "https://gcs.example"),
    ] {
        let env: Env =
            std::sync::Arc::new(move |k| (k == "STORAGE_EMULATOR_HOST").then(|| host.to_string()));
        let s = Storage::from_env(env);
        assert_eq!(s.endpoint, want);
        assert!(s.credentials.is_none(), "an emulator gets no credentials");
    }
    let s = Storage::from_env(std::sync::Arc::new(|_| None));
    assert_eq!(s.endpoint, ENDPOINT);
    assert!(s.credentials.is_some());
}

use std::sync::{Arc, Mutex, OnceLock};

use crate::http::test_server::{Reply, Server};

/// A client that retries twice without waiting long.
fn quick() -> Client {
    Client::new(Duration::from_secs(10), 2, Duration::from_millis(1))
}

#[tokio::test]
async fn a_small_object_is_one_media_upload_with_its_content_type() {
    let server = Server::start(|_| Reply::ok(r#"{"kind":"storage#object"}"#));
    let s = Storage::new(server.url(), None);
    s.upload(
        "logs",
        "2026/11/26/a b+c.json",
        "text/plain; charset=utf-8",
        Bytes::from_static(b"{\"a\":1}{\"a\":2}"),
    )
    .await
    .unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.method, "POST");
    assert_eq!(
        r.path,
        "/upload/storage/v1/b/logs/o?uploadType=media&name=2026%2F11%2F26%2Fa+b%2Bc.json"
    );
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("authorization"), None, "an emulator gets no token");
    assert_eq!(r.text(), "{\"a\":1}{\"a\":2}");
}

#[tokio::test]
async fn calls_carry_the_token_of_the_credentials() {
    let server = Server::start(|r| {
        if r.path.starts_with("/computeMetadata/") {
            Reply::ok(r#"{"access_token":"ya29.t","expires_in":3599}"#)
        } else {
            Reply::ok("{}")
        }
    });
    let host = server.url().trim_start_matches("http://").to_string();
    let env: Env = Arc::new(move |k| match k {
        "GCE_METADATA_HOST" => Some(host.clone()),
        "HOME" => Some("/nonexistent".to_string()),
        _ => None,
    });
    let s = Storage::new(server.url(), Some(Credentials::new(env, STORAGE_SCOPE)));
    for name in ["a", "b"] {
        s.upload("logs", name, "text/plain", Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    let seen = server.requests();
    let uploads: Vec<_> = seen
        .iter()
        .filter(|r| r.path.starts_with("/upload/"))
        .collect();
    assert_eq!(uploads.len(), 2);
    for r in uploads {
        assert_eq!(r.header("authorization"), Some("Bearer ya29.t"));
    }
    assert_eq!(seen.len(), 3, "one token for both uploads");
}

/// A stand-in for a resumable session: it keeps only half of the first chunk (answering
/// 308 with what it has), keeps the first 1,000 bytes of the second and answers 503 (a
/// connection lost midway), refuses a chunk that does not start where it stands (400, as
/// a strict server may), and answers status queries with what it has.
#[tokio::test]
async fn a_large_object_goes_in_chunks_resumed_from_what_was_kept() {
    let base: Arc<OnceLock<String>> = Arc::default();
    let kept: Arc<Mutex<Vec<u8>>> = Arc::default();
    let failed_once = Arc::new(Mutex::new(false));
    let server = {
        let (base, kept, failed_once) = (base.clone(), kept.clone(), failed_once.clone());
        Server::start(move |r| {
            if r.method == "POST" {
                assert!(
                    r.path.contains("uploadType=resumable&name=big"),
                    "{}",
                    r.path
                );
                assert_eq!(r.header("x-upload-content-type"), Some("application/gzip"));
                let location = format!("{}/session/1", base.get().unwrap());
                return Reply::ok("").header("Location", &location);
            }
            assert_eq!(r.path, "/session/1");
            let mut kept = kept.lock().unwrap();
            let range = r.header("content-range").unwrap().to_string();
            let (span, total) = range
                .strip_prefix("bytes ")
                .unwrap()
                .split_once('/')
                .unwrap();
            let total: usize = total.parse().unwrap();
            let has = |kept: &Vec<u8>| {
                Reply::status(308, "").header("Range", &format!("bytes=0-{}", kept.len() - 1))
            };
            if span == "*" {
                assert!(r.body.is_empty());
                return has(&kept);
            }
            let (start, end) = span.split_once('-').unwrap();
            let (start, end): (usize, usize) = (start.parse().unwrap(), end.parse().unwrap());
            assert_eq!(end - start + 1, r.body.len(), "{range}");
            if start != kept.len() {
                return Reply::status(400, "the chunk does not start at the persisted offset");
            }
            if start > 0 && !*failed_once.lock().unwrap() {
                *failed_once.lock().unwrap() = true;
                kept.extend_from_slice(&r.body[..1000]);
                return Reply::status(503, "backend error");
            }
            let take = if start == 0 {
                r.body.len() / 2
            } else {
                r.body.len()
            };
            kept.extend_from_slice(&r.body[..take]);
            if kept.len() == total {
                Reply::ok(r#"{"kind":"storage#object"}"#)
            } else {
                has(&kept)
            }
        })
    };
    base.set(server.url()).unwrap();
    let body: Bytes = (0..2 * CHUNK + 5)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let s = Storage::new(server.url(), None).with_client(quick());
    s.upload("logs", "big", "application/gzip", body.clone())
        .await
        .unwrap();
    assert!(
        *kept.lock().unwrap() == body.to_vec(),
        "the object is whole"
    );
    let ranges: Vec<String> = server
        .requests()
        .iter()
        .filter_map(|r| r.header("content-range").map(str::to_string))
        .collect();
    let total = body.len();
    let half = CHUNK / 2;
    let after = half + 1000;
    assert_eq!(
        ranges,
        [
            format!("bytes 0-{}/{total}", CHUNK - 1),
            // Resumed after the half that was kept; the 503 sends the same chunk again,
            // which is refused, since 1,000 bytes of it were kept.
            format!("bytes {half}-{}/{total}", half + CHUNK - 1),
            format!("bytes {half}-{}/{total}", half + CHUNK - 1),
            // So the upload asks what was kept, and goes on from there.
            format!("bytes */{total}"),
            format!("bytes {after}-{}/{total}", after + CHUNK - 1),
            format!("bytes {}-{}/{total}", after + CHUNK, total - 1),
        ]
    );
}

#[tokio::test]
async fn failures_say_what_was_answered_and_whether_the_object_may_exist() {
    let refused = Server::start(|_| {
        Reply::status(
            403,
            r#"{"error":{"code":403,"message":"sender does not have storage.objects.create access"}}"#,
        )
    });
    let f = Storage::new(refused.url(), None)
        .with_client(quick())
        .upload("logs", "a", "text/plain", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(f.text.starts_with("upload: HTTP 403: "), "{}", f.text);
    assert!(
        f.text.contains("storage.objects.create access"),
        "{}",
        f.text
    );
    assert!(!f.uncertain, "a 403 writes nothing");
    assert_eq!(refused.requests().len(), 1, "a 403 is not retried");

    let failing = Server::start(|_| Reply::status(503, "backend error"));
    let f = Storage::new(failing.url(), None)
        .with_client(quick())
        .upload("logs", "a", "text/plain", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert_eq!(f.text, "upload: HTTP 503: backend error (after 3 attempts)");
    assert!(f.uncertain, "a 5xx may have written the object");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let f = Storage::new(format!("http://127.0.0.1:{port}"), None)
        .with_client(quick())
        .upload("logs", "a", "text/plain", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(f.text.starts_with("upload: request failed"), "{}", f.text);
}
