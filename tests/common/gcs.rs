//! A Google Cloud Storage endpoint for integration tests: gcp-storage-emulator (PyPI,
//! installed by `scripts/emulators.sh install` into `.emulators/venv`) started once per test
//! binary on a free loopback port, in memory, or the endpoint in `SLUICE_TEST_GCS_ENDPOINT`
//! when that is set. A missing emulator fails the test with instructions; it is never
//! skipped.
//!
//! Tests share the one server and keep apart by bucket names. The emulator checks no
//! credentials (an `Authorization` header is ignored), so what sluice wrote is read back
//! with plain HTTP requests to the JSON API (`/storage/v1`), not with sluice's own client.
//!
//! Quirks (gcp-storage-emulator 2026.7.19): it answers one request at a time (HTTP/1.0, one
//! thread); a missing bucket or object is a 404 with an empty body (no JSON error); object
//! lists are never paged; a media upload (`uploadType=media`) whose `Content-Type` is
//! `application/json…` or `multipart/…`, or whose body is empty, fails and the connection
//! closes without an answer (multipart and resumable uploads store such objects); an object
//! uploaded without a `Content-Type` has `contentType` null; a `contentEncoding` query
//! parameter replaces the content type, and a gzip `Content-Encoding` header makes it store
//! the decompressed bytes; a resumable upload's status query before any byte answers 308
//! with `Range: bytes=0-0`.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use super::emulator::{self, Emulator, Spec};
use super::moto::http_request;

/// The environment variable that names an already running endpoint to use instead.
pub const ENDPOINT_ENV: &str = "SLUICE_TEST_GCS_ENDPOINT";

/// Where the emulator lives once `scripts/emulators.sh install` ran.
pub fn emulator_binary() -> PathBuf {
    super::workspace_root().join(".emulators/venv/bin/gcp-storage-emulator")
}

/// The endpoint URL (`http://127.0.0.1:PORT`) of a running Cloud Storage emulator: the one
/// in `SLUICE_TEST_GCS_ENDPOINT`, else this test binary's, started in memory on first use
/// and killed when the binary exits.
pub fn endpoint() -> String {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    // `gcp-storage-emulator start --in-memory --host 127.0.0.1 --port PORT`
    emulator::endpoint_with_args(&EMULATOR, &["start", "--in-memory"], || Spec {
        what: "the Cloud Storage emulator",
        env: ENDPOINT_ENV,
        running: "Cloud Storage emulator",
        bin: emulator_binary(),
        flags: ["--host", "--port"],
        timeout: Duration::from_secs(30),
        poll: Duration::from_millis(50),
    })
}

/// Creates bucket `bucket` (`POST /storage/v1/b`).
pub fn create_bucket(endpoint: &str, bucket: &str) {
    let body = serde_json::json!({ "name": bucket }).to_string();
    let (status, _, answer) = http_request(
        endpoint,
        "POST",
        "/storage/v1/b?project=test",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(
        status,
        200,
        "creating bucket {bucket} at {endpoint}: {}",
        String::from_utf8_lossy(&answer)
    );
}

/// Writes `body` as object `name` of `bucket` (a media upload, as text: the emulator parses
/// a JSON-typed body instead of storing it).
pub fn put_object(endpoint: &str, bucket: &str, name: &str, body: &[u8]) {
    let path = format!(
        "/upload/storage/v1/b/{}/o?uploadType=media&name={}",
        encode(bucket),
        encode(name)
    );
    let (status, _, answer) = http_request(
        endpoint,
        "POST",
        &path,
        &[("Content-Type", "text/plain")],
        body,
    );
    assert_eq!(
        status,
        200,
        "writing {bucket}/{name} at {endpoint}: {}",
        String::from_utf8_lossy(&answer)
    );
}

/// Object `name` of bucket `bucket`: its contents and its `contentType` (empty when it has
/// none); `None` when there is no such object.
pub fn object(endpoint: &str, bucket: &str, name: &str) -> Option<(Vec<u8>, String)> {
    let path = format!("/storage/v1/b/{}/o/{}", encode(bucket), encode(name));
    let (status, _, meta) = http_request(endpoint, "GET", &path, &[], b"");
    match status {
        404 => return None,
        200 => {}
        _ => panic!(
            "reading the metadata of {bucket}/{name}: HTTP {status}: {}",
            String::from_utf8_lossy(&meta)
        ),
    }
    let meta: serde_json::Value = serde_json::from_slice(&meta)
        .unwrap_or_else(|e| panic!("the metadata of {bucket}/{name} is not JSON: {e}"));
    let content_type = meta["contentType"].as_str().unwrap_or_default().to_string();
    let (status, _, body) = http_request(endpoint, "GET", &format!("{path}?alt=media"), &[], b"");
    assert_eq!(
        status,
        200,
        "reading {bucket}/{name}: {}",
        String::from_utf8_lossy(&body)
    );
    Some((body, content_type))
}

/// The names of every object in bucket `bucket`, in name order.
pub fn list(endpoint: &str, bucket: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut page_token: Option<String> = None;
    loop {
        let mut path = format!("/storage/v1/b/{}/o", encode(bucket));
        if let Some(token) = &page_token {
            path.push_str(&format!("?pageToken={}", encode(token)));
        }
        let (status, _, body) = http_request(endpoint, "GET", &path, &[], b"");
        assert_eq!(
            status,
            200,
            "listing bucket {bucket} at {endpoint} (404: no such bucket): {}",
            String::from_utf8_lossy(&body)
        );
        let page: serde_json::Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("the listing of {bucket} is not JSON: {e}"));
        for item in page["items"].as_array().into_iter().flatten() {
            let name = item["name"].as_str().expect("an object name");
            names.push(name.to_string());
        }
        match page["nextPageToken"].as_str() {
            Some(token) if page_token.as_deref() != Some(token) => {
                page_token = Some(token.to_string())
            }
            _ => return names,
        }
    }
}

/// `s` percent-encoded for one path segment or query value: every byte but
/// `A-Z a-z 0-9 - . _ ~` as `%XX` (so an object name's `/` is `%2F`).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
