//! Configs at URLs: `sluice run -c s3://bucket/config.jsonnet`, and `test`, `build`, `vet`
//! given such URLs.
//!
//! - `s3://BUCKET/KEY`: `GetObject` with the AWS SDK's default chains (credentials,
//!   `AWS_REGION`, `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`; `sluice_transforms::aws::s3`).
//! - `https://...`: a `GET` through the same hyper + rustls (ring) client the AWS SDK uses,
//!   trusting the system's certificates; redirects are followed (at most
//!   [`MAX_REDIRECTS`], never from `https` down to `http`), and the config is then known by
//!   the URL they led to.
//! - `http://...`: only to a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`), e.g. the
//!   AWS AppConfig Lambda extension on `localhost:2772`; anything else must use `https`, so
//!   a config cannot be altered on its way.
//!
//! A fetch may take at most [`FETCH_TIMEOUT`] and read at most [`MAX_CONFIG_BYTES`]. The
//! text is compiled by `sluice_config::load_text` under the URL, so errors show the URL
//! where a file's would show its path; the config's relative imports are resolved against
//! its URL and fetched the same way (`import 'lib.libsonnet'` next to
//! `s3://bucket/team/config.jsonnet` is `s3://bucket/team/lib.libsonnet`), and the library
//! (`sluice.libsonnet`, `substation.libsonnet`, with any directories) is always the
//! embedded one.

use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use aws_smithy_http_client::{Connector, tls};
use aws_smithy_runtime_api::client::http::HttpConnector;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_types::byte_stream::ByteStream;

/// The largest config (or import) read from a URL.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024 * 1024;
/// The longest one fetch may take, redirects included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// The most redirects followed for one `https://` fetch.
pub const MAX_REDIRECTS: usize = 5;

/// Whether `name` (a command-line argument) is a URL sluice reads configs from, rather
/// than a local path.
pub fn is_url(name: &str) -> bool {
    ["s3://", "https://", "http://"].iter().any(|scheme| {
        name.get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
    })
}

/// Reads URLs, on a runtime of its own (config loading happens before, and outside, the
/// pipeline's runtime).
pub struct Fetcher {
    rt: tokio::runtime::Runtime,
    http: std::cell::OnceCell<Connector>,
}

impl Fetcher {
    /// A fetcher with its own single-threaded runtime.
    pub fn new() -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting a runtime to fetch the config")?;
        Ok(Fetcher {
            rt,
            http: std::cell::OnceCell::new(),
        })
    }

    /// The bytes at `url`, or why not (the caller names the URL).
    pub fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        self.fetch_final(url).map(|(_, bytes)| bytes)
    }

    /// The URL the bytes came from (`url`, or where its redirects led) and the bytes.
    pub fn fetch_final(&self, url: &str) -> Result<(String, Vec<u8>), String> {
        let work = async {
            if url
                .get(..5)
                .is_some_and(|p| p.eq_ignore_ascii_case("s3://"))
            {
                let (bucket, key) = sluice_transforms::aws::s3::parse_url(url)?;
                let bytes =
                    sluice_transforms::aws::s3::get_object(&bucket, &key, MAX_CONFIG_BYTES).await?;
                Ok((url.to_string(), bytes))
            } else {
                self.get(url).await
            }
        };
        self.rt.block_on(async {
            tokio::time::timeout(FETCH_TIMEOUT, work)
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {} s", FETCH_TIMEOUT.as_secs())))
        })
    }

    fn http(&self) -> &Connector {
        self.http.get_or_init(|| {
            Connector::builder()
                .tls_provider(tls::Provider::Rustls(
                    tls::rustls_provider::CryptoMode::Ring,
                ))
                .build()
        })
    }

    /// `GET url` (`https://`, or `http://` to loopback), following redirects: the final
    /// URL and the body.
    async fn get(&self, url: &str) -> Result<(String, Vec<u8>), String> {
        let mut url = check_http_url(url, None)?;
        for _ in 0..=MAX_REDIRECTS {
            let mut req = HttpRequest::get(url.as_str()).map_err(|e| format!("bad URL: {e}"))?;
            req.headers_mut()
                .insert("user-agent", concat!("sluice/", env!("CARGO_PKG_VERSION")));
            let resp = self
                .http()
                .call(req)
                .await
                .map_err(|e| format!("request failed: {}", error_chain(&e)))?;
            let status = resp.status().as_u16();
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let location = resp
                    .headers()
                    .get("location")
                    .ok_or_else(|| format!("HTTP {status} without a Location"))?;
                let next = url
                    .join(location)
                    .map_err(|e| format!("HTTP {status} to a bad Location {location:?}: {e}"))?;
                url = check_http_url(next.as_str(), Some(&url))?;
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(format!("HTTP {status}"));
            }
            let body = read_limited(ByteStream::new(resp.into_body())).await?;
            return Ok((url.to_string(), body));
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }
}

/// `url` parsed, if sluice may fetch it over HTTP: `https`, or `http` to a loopback host; a
/// redirect (from `from`) may not go from `https` to `http`.
fn check_http_url(url: &str, from: Option<&url::Url>) -> Result<url::Url, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a valid URL: {e}"))?;
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if from.is_some_and(|f| f.scheme() == "https") => Err(format!(
            "redirected from https to {parsed}, which is plain http"
        )),
        "http" if is_loopback(&parsed) => Ok(parsed),
        "http" => Err(
            "plain http is accepted only for loopback hosts (localhost, 127.0.0.0/8, [::1]); use https"
                .into(),
        ),
        other => Err(format!("unsupported URL scheme {other:?} (use s3:// or https://)")),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// The body, refused past [`MAX_CONFIG_BYTES`].
async fn read_limited(mut body: ByteStream) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| format!("reading the answer: {}", error_chain(&e)))?
    {
        data.extend_from_slice(&chunk);
        if data.len() > MAX_CONFIG_BYTES {
            return Err(format!(
                "more than the {MAX_CONFIG_BYTES} bytes a config may have"
            ));
        }
    }
    Ok(data)
}

/// An error and its causes, `: `-separated.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// The config at `url`: the URL it came from (where redirects led; its imports resolve
/// against it and its errors name it), its text, and a fetcher for its imports.
fn read(url: &str) -> anyhow::Result<(String, String, sluice_config::Fetch)> {
    let fetcher = Rc::new(Fetcher::new()?);
    let (name, bytes) = fetcher
        .fetch_final(url)
        .map_err(|e| anyhow!("{url}: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow!("{url}: the config is not UTF-8 text"))?;
    let imports: sluice_config::Fetch = Box::new(move |u: &str| fetcher.fetch(u));
    Ok((name, text, imports))
}

/// Compiles the config at `url` (see [`sluice_config::compile_text`]).
pub fn compile(url: &str, ext: &[(String, String)]) -> anyhow::Result<serde_json::Value> {
    let (name, text, imports) = read(url)?;
    Ok(sluice_config::compile_text(
        &name,
        &text,
        ext,
        Some(imports),
    )?)
}

/// Compiles the config at `url` to JSON text, for `sluice build`.
pub fn compile_to_string(
    url: &str,
    ext: &[(String, String)],
    pretty: bool,
) -> anyhow::Result<String> {
    let (name, text, imports) = read(url)?;
    Ok(sluice_config::compile_text_to_string(
        &name,
        &text,
        ext,
        Some(imports),
        pretty,
    )?)
}

/// Loads the config at `url` (see [`sluice_config::load_text`]).
pub fn load(url: &str, ext: &[(String, String)]) -> anyhow::Result<sluice_config::LoadedConfig> {
    let (name, text, imports) = read(url)?;
    Ok(sluice_config::load_text(&name, &text, ext, Some(imports))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_table() {
        for (name, url) in [
            ("s3://b/k.jsonnet", true),
            ("S3://b/k.jsonnet", true),
            ("https://h/c.jsonnet", true),
            ("http://127.0.0.1:8080/c.json", true),
            ("config.jsonnet", false),
            ("./s3://x", false),
            ("gs://b/k", false),
            ("", false),
        ] {
            assert_eq!(is_url(name), url, "{name}");
        }
    }

    #[test]
    fn http_is_for_loopback_only() {
        for ok in [
            "https://example.com/c.jsonnet",
            "http://localhost:2772/applications/a",
            "http://127.0.0.1:8080/c.json",
            "http://127.1.2.3/c.json",
            "http://[::1]:9/c.json",
        ] {
            check_http_url(ok, None).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, why) in [
            ("http://example.com/c.jsonnet", "only for loopback hosts"),
            ("http://10.0.0.1/c.jsonnet", "only for loopback hosts"),
            ("ftp://h/c", "unsupported URL scheme \"ftp\""),
            ("https://", "not a valid URL"),
        ] {
            let e = check_http_url(bad, None).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let from = url::Url::parse("https://example.com/a").unwrap();
        let e = check_http_url("http://localhost/c", Some(&from)).unwrap_err();
        assert!(e.contains("redirected from https"), "{e}");
    }
}
