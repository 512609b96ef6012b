//! Cloud Storage's JSON API, as far as sluice needs it: writing an object
//! (`send_gcp_storage`), telling whether one exists (its check of what an earlier attempt
//! wrote) and reading one (`gs://` URLs, [`crate::fetch`]).
//!
//! An object of at most [`CHUNK`] bytes goes in one media upload (`POST
//! /upload/storage/v1/b/BUCKET/o?uploadType=media&name=NAME`, the content type in the
//! header); a larger one in a resumable upload, as Google's Go client writes it: a session
//! is started (`uploadType=resumable`), then the object is sent in chunks of [`CHUNK`]
//! bytes, each `PUT` to the session with its `Content-Range`, and each answered `308` with
//! the `Range` persisted so far, from which the next chunk starts, until the last is
//! answered `200`. A chunk is retried on its own, so a lost connection costs one chunk,
//! not the object; a chunk that still fails makes the upload ask the session what it kept
//! (`Content-Range: bytes */TOTAL`) and go on from there. Writing a name that exists replaces the object (a new generation).
//!
//! Endpoint: `https://storage.googleapis.com`, or `STORAGE_EMULATOR_HOST` (a host and port,
//! or a URL) when it is set, as Google's client libraries read it; requests to an emulator
//! carry no credentials.

use bytes::Bytes;
use std::time::Duration;

use aws_smithy_types::body::SdkBody;

use super::base_url;
use super::credentials::{Credentials, Env, STORAGE_SCOPE, encode};
use crate::http::{self, Client, Failure};

/// Cloud Storage's endpoint.
const ENDPOINT: &str = "https://storage.googleapis.com";
/// Objects up to this size go in one request; larger ones in chunks of it (a multiple of
/// 256 KiB, as the protocol requires; the Go client's default).
pub const CHUNK: usize = 16 * 1024 * 1024;
/// One request (a whole object up to [`CHUNK`], or one chunk) may take this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Retries of one request after the first attempt.
const RETRIES: u32 = 4;

/// A Cloud Storage endpoint and the credentials to call it with.
#[derive(Debug)]
pub struct Storage {
    endpoint: String,
    /// `None` for an emulator.
    credentials: Option<Credentials>,
    client: Client,
}

impl Storage {
    /// The endpoint `env` says (see the module documentation), with Application Default
    /// Credentials from `env` unless it is an emulator.
    pub fn from_env(env: Env) -> Self {
        match env("STORAGE_EMULATOR_HOST") {
            Some(host) => Storage::new(base_url(&host), None),
            None => Storage::new(
                ENDPOINT.to_string(),
                Some(Credentials::new(env, STORAGE_SCOPE)),
            ),
        }
    }

    /// Cloud Storage at `endpoint` (`http(s)://HOST[:PORT]`), called with `credentials`.
    pub fn new(endpoint: String, credentials: Option<Credentials>) -> Self {
        Storage {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            credentials,
            client: Client::new(REQUEST_TIMEOUT, RETRIES, Duration::from_millis(500)),
        }
    }

    /// The same, its calls made through `client` (tests shorten the retries' waits).
    #[cfg(test)]
    pub fn with_client(mut self, client: Client) -> Self {
        self.client = client;
        self
    }

    /// Writes `body` as object `name` of `bucket` with `content_type`. The failure says
    /// which call failed and whether the object may have been written all the same.
    pub async fn upload(
        &self,
        bucket: &str,
        name: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(), Failure> {
        let auth = self.authorization().await?;
        if body.len() <= CHUNK {
            let url = format!(
                "{}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
                self.endpoint,
                encode(name)
            );
            let mut headers = auth;
            headers.push(("content-type", content_type.to_string()));
            return self
                .call("POST", &url, &headers, SdkBody::from(body), "upload", ok)
                .await
                .map(drop);
        }
        self.upload_resumable(bucket, name, content_type, body, auth)
            .await
    }

    async fn upload_resumable(
        &self,
        bucket: &str,
        name: &str,
        content_type: &str,
        body: Bytes,
        auth: Vec<(&'static str, String)>,
    ) -> Result<(), Failure> {
        let total = body.len();
        let url = format!(
            "{}/upload/storage/v1/b/{bucket}/o?uploadType=resumable&name={}",
            self.endpoint,
            encode(name)
        );
        let mut headers = auth.clone();
        headers.push(("x-upload-content-type", content_type.to_string()));
        headers.push(("x-upload-content-length", total.to_string()));
        let started = self
            .call(
                "POST",
                &url,
                &headers,
                SdkBody::empty(),
                "starting a resumable upload",
                ok,
            )
            .await
            .map_err(|f| Failure {
                uncertain: false,
                ..f
            })?;
        let Some(session) = started.headers.get("location").map(str::to_string) else {
            return Err(Failure {
                text: "starting a resumable upload: the answer has no Location".to_string(),
                uncertain: false,
            });
        };
        let mut offset = 0;
        let mut recoveries = 0;
        loop {
            let end = (offset + CHUNK).min(total);
            let mut headers = auth.clone();
            headers.push((
                "content-range",
                format!("bytes {offset}-{}/{total}", end - 1),
            ));
            let what = format!("sending bytes {offset} to {end} of {total}");
            let sent = self
                .call(
                    "PUT",
                    &session,
                    &headers,
                    SdkBody::from(body.slice(offset..end)),
                    &what,
                    |s| ok(s) || s == 308,
                )
                .await;
            let resp = match sent {
                Ok(resp) => resp,
                // The chunk failed for good, perhaps after part of it was kept: ask the
                // session what it has (the protocol's status query) and go on from there.
                Err(failed) if recoveries < RETRIES => {
                    recoveries += 1;
                    let mut query = auth.clone();
                    query.push(("content-range", format!("bytes */{total}")));
                    match self
                        .call(
                            "PUT",
                            &session,
                            &query,
                            SdkBody::empty(),
                            "asking a resumable upload what it kept",
                            |s| ok(s) || s == 308,
                        )
                        .await
                    {
                        Ok(resp) => resp,
                        Err(_) => return Err(failed),
                    }
                }
                Err(failed) => return Err(failed),
            };
            if resp.status != 308 {
                return Ok(());
            }
            let persisted = persisted(resp.headers.get("range")).ok_or_else(|| Failure {
                text: format!(
                    "{what}: the answer's Range {:?} is not bytes=0-N",
                    resp.headers.get("range")
                ),
                uncertain: false,
            })?;
            if persisted >= total {
                return Err(Failure {
                    text: format!("{what}: every byte is kept but the upload is not finished"),
                    uncertain: true,
                });
            }
            if persisted <= offset && end > offset {
                recoveries += 1;
                if recoveries > RETRIES {
                    return Err(Failure {
                        text: format!(
                            "{what}: Cloud Storage keeps none of it (it has {persisted} bytes)"
                        ),
                        uncertain: false,
                    });
                }
            }
            offset = persisted;
        }
    }

    /// Reads object `name` of `bucket` (`GET /storage/v1/b/BUCKET/o/NAME?alt=media`), refusing
    /// one larger than `max_bytes` (`what` names what it is, for that error: "a config").
    pub async fn download(
        &self,
        bucket: &str,
        name: &str,
        max_bytes: usize,
        what: &str,
    ) -> Result<Vec<u8>, Failure> {
        let (url, headers) = self.media_request(bucket, name).await?;
        let resp = self
            .call("GET", &url, &headers, SdkBody::empty(), "download", ok)
            .await?;
        if resp.body.len() > max_bytes {
            return Err(Failure {
                text: format!(
                    "the object has {} bytes, more than the {max_bytes} bytes {what} may have",
                    resp.body.len()
                ),
                uncertain: false,
            });
        }
        Ok(resp.body)
    }

    /// The URL and headers of a `GET` of object `name`'s bytes, for a caller that reads
    /// them as they arrive (`sluice run gs://...`) rather than whole.
    pub(crate) async fn media_request(
        &self,
        bucket: &str,
        name: &str,
    ) -> Result<(String, Vec<(&'static str, String)>), Failure> {
        let headers = self.authorization().await?;
        let url = format!(
            "{}/storage/v1/b/{}/o/{}?alt=media",
            self.endpoint,
            path_segment(bucket),
            path_segment(name)
        );
        Ok((url, headers))
    }

    /// Whether object `name` of `bucket` exists (`GET /storage/v1/b/BUCKET/o/NAME`, its
    /// metadata: `404` when it does not).
    pub async fn exists(&self, bucket: &str, name: &str) -> Result<bool, Failure> {
        let headers = self.authorization().await?;
        let url = format!(
            "{}/storage/v1/b/{}/o/{}",
            self.endpoint,
            path_segment(bucket),
            path_segment(name)
        );
        let resp = self
            .call(
                "GET",
                &url,
                &headers,
                SdkBody::empty(),
                "get metadata",
                |s| ok(s) || s == 404,
            )
            .await?;
        Ok(resp.status != 404)
    }

    /// The `Authorization` (and quota project) headers, none for an emulator.
    async fn authorization(&self) -> Result<Vec<(&'static str, String)>, Failure> {
        let Some(credentials) = &self.credentials else {
            return Ok(Vec::new());
        };
        credentials.headers().await.map_err(|text| Failure {
            text,
            uncertain: false,
        })
    }

    /// One call, retried as [`Client::execute`] does; the failure names `what`.
    async fn call(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, String)],
        body: SdkBody,
        what: &str,
        answer: impl Fn(u16) -> bool,
    ) -> Result<http::Response, Failure> {
        let req = http::request(method, url, headers, body).map_err(|text| Failure {
            text: format!("{what}: {text}"),
            uncertain: false,
        })?;
        // The request's bearer token is sluice's own, short-lived, and Cloud Storage's
        // errors (JSON naming the reason, e.g. a missing permission) never echo it: they are
        // shown, redacted and cut like any answer's, as the user needs the reason.
        self.client
            .execute_carrying(req, answer, what, false)
            .await
            .map_err(|f| Failure {
                text: format!("{what}: {}", f.text),
                ..f
            })
    }
}

/// `s` as one segment of a URL's path: every byte but the unreserved ones (RFC 3986:
/// letters, digits, `-`, `.`, `_`, `~`) percent-encoded, `/` included.
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A 2xx status.
fn ok(status: u16) -> bool {
    (200..300).contains(&status)
}

/// How many bytes a `Range: bytes=0-N` header says are kept (`N + 1`); none kept without
/// the header.
fn persisted(range: Option<&str>) -> Option<usize> {
    let Some(range) = range else { return Some(0) };
    let last: usize = range.trim().strip_prefix("bytes=0-")?.parse().ok()?;
    last.checked_add(1)
}

#[cfg(test)]
mod tests;
