//! Reading a file named by a URL: the one implementation behind configs at URLs
//! (`sluice run -c s3://...`, the CLI's `remote` module), the kv stores' files
//! (`csv_file`, `json_file`, `text_file`, `mmdb` with `file: "https://..."`) and the
//! inputs of `sluice run s3://...`.
//!
//! - `s3://BUCKET/KEY`: `GetObject` with the AWS SDK's default chains (credentials,
//!   `AWS_REGION`, `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`; [`crate::aws::s3`]).
//! - `gs://BUCKET/OBJECT`: Cloud Storage's JSON API with Google's Application Default
//!   Credentials, or the emulator at `STORAGE_EMULATOR_HOST` ([`crate::gcp::storage`]), as
//!   Substation reads such URLs.
//! - `https://...`: a `GET` through the same hyper + rustls (ring) client the AWS SDK uses,
//!   trusting the system's certificates; redirects are followed (at most
//!   [`MAX_REDIRECTS`], never from `https` down to `http`), and the file is then known by
//!   the URL they led to.
//! - `http://...`: only to a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`), e.g. the
//!   AWS AppConfig Lambda extension on `localhost:2772`; anything else must use `https`, so
//!   what is read cannot be altered on its way.
//!
//! Every fetch is bounded in time and size by the caller's [`Limits`]. A download
//! ([`Fetcher::download`], an input of `sluice run`) is not: it streams into the caller's
//! sink, and only a stall is an error. Errors are texts that say why and leave naming the
//! URL to the caller.

use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Duration;

use aws_smithy_http_client::{Connector, tls};
use aws_smithy_runtime_api::client::http::HttpConnector;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_types::byte_stream::ByteStream;

/// The most redirects followed for one `https://` fetch.
pub const MAX_REDIRECTS: usize = 5;

/// How much one fetch may read and how long it may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most bytes read.
    pub max_bytes: usize,
    /// The longest the fetch may take, redirects included.
    pub timeout: Duration,
    /// What is fetched, for the size error: "a config" gives "more than the N bytes a
    /// config may have".
    pub what: &'static str,
}

/// Whether `name` is a URL this module reads (`s3://`, `gs://`, `https://`, `http://`, any
/// case), rather than a local path.
pub fn is_url(name: &str) -> bool {
    ["s3://", "gs://", "https://", "http://"]
        .iter()
        .any(|scheme| has_scheme(name, scheme))
}

/// Why a config read from `config` (a URL, where its redirects led) may not import
/// `import` (the URL its import resolved to), or `Ok` when it may: the import has the
/// config's scheme, host and port, and its path lies under the config's directory (no
/// `..` segment left after resolving). Anything else (another host, `s3://`, `gs://`,
/// `file://`, a loopback or link-local address such as the cloud metadata service at
/// 169.254.169.254) is someone else's to allow: the error names the import, and the caller
/// says how to allow it.
pub fn import_within_origin(config: &str, import: &str) -> Result<(), String> {
    let (Ok(base), Ok(target)) = (url::Url::parse(config), url::Url::parse(import)) else {
        return Err(format!("{import:?} is not a URL under {config:?}"));
    };
    let same_origin = base.scheme().eq_ignore_ascii_case(target.scheme())
        && base.host_str() == target.host_str()
        && base.port_or_known_default() == target.port_or_known_default()
        && target.username().is_empty()
        && target.password().is_none();
    let dir = match base.path().rfind('/') {
        Some(at) => &base.path()[..=at],
        None => "/",
    };
    let path = target.path();
    let climbs = path
        .split('/')
        .any(|seg| seg == ".." || seg.eq_ignore_ascii_case("%2e%2e") || seg.contains('\\'));
    if same_origin && path.starts_with(dir) && !climbs {
        return Ok(());
    }
    let origin = match base.port() {
        Some(port) => format!(
            "{}://{}:{port}",
            base.scheme(),
            base.host_str().unwrap_or("")
        ),
        None => format!("{}://{}", base.scheme(), base.host_str().unwrap_or("")),
    };
    Err(format!(
        "{import} is outside the config's own origin and directory ({origin}{dir})"
    ))
}

/// Reads URLs. Its HTTP client (and Cloud Storage client, with its token) is made on first
/// use and reused.
#[derive(Default)]
pub struct Fetcher {
    http: OnceLock<Connector>,
    gcs: OnceLock<crate::gcp::storage::Storage>,
}

impl Fetcher {
    /// A fetcher (nothing is made until the first fetch).
    pub fn new() -> Self {
        Self::default()
    }

    /// The URL the bytes came from (`url`, or where its redirects led) and the bytes, or
    /// why not (the caller names the URL).
    pub async fn fetch(&self, url: &str, limits: Limits) -> Result<(String, Vec<u8>), String> {
        let work = async {
            if has_scheme(url, "s3://") {
                #[cfg(feature = "aws")]
                {
                    let (bucket, key) = parse_s3_url(url)?;
                    let bytes =
                        crate::aws::s3::get_object(&bucket, &key, limits.max_bytes, limits.what)
                            .await?;
                    Ok((url.to_string(), bytes))
                }
                #[cfg(not(feature = "aws"))]
                Err(crate::built_without_aws("reading an s3:// URL"))
            } else if has_scheme(url, "gs://") {
                let (bucket, name) = parse_gs_url(url)?;
                let bytes = self
                    .gcs()
                    .download(&bucket, &name, limits.max_bytes, limits.what)
                    .await
                    .map_err(|f| f.text)?;
                Ok((url.to_string(), bytes))
            } else {
                self.get(url, limits).await
            }
        };
        tokio::time::timeout(limits.timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer within {} s",
                    limits.timeout.as_secs_f64()
                ))
            })
    }

    /// Cloud Storage, from the process's environment (made at the first `gs://` URL).
    fn gcs(&self) -> &crate::gcp::storage::Storage {
        self.gcs.get_or_init(|| {
            crate::gcp::storage::Storage::from_env(crate::gcp::credentials::process_env())
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
    async fn get(&self, url: &str, limits: Limits) -> Result<(String, Vec<u8>), String> {
        let (url, body) = self.get_body(url, &[]).await?;
        Ok((url, read_limited(body, limits).await?))
    }

    /// Streams what `url` names into `sink` as it arrives, each chunk within `idle` of the
    /// one before, and returns how many bytes it wrote: an input of `sluice run`, which
    /// may be far larger than memory. The URL forms and their rules are [`Fetcher::fetch`]'s.
    pub async fn download(
        &self,
        url: &str,
        idle: Duration,
        sink: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
    ) -> Result<u64, String> {
        let body = if has_scheme(url, "s3://") {
            #[cfg(feature = "aws")]
            {
                let (bucket, key) = parse_s3_url(url)?;
                crate::aws::s3::get_object_body(&bucket, &key).await?.1
            }
            #[cfg(not(feature = "aws"))]
            return Err(crate::built_without_aws("reading an s3:// URL"));
        } else if has_scheme(url, "gs://") {
            let (bucket, name) = parse_gs_url(url)?;
            let (media, headers) = self
                .gcs()
                .media_request(&bucket, &name)
                .await
                .map_err(|f| f.text)?;
            self.get_body(&media, &headers).await?.1
        } else {
            self.get_body(url, &[]).await?.1
        };
        read_into(body, idle, sink).await
    }

    /// `GET url` with `headers` (`https://`, or `http://` to loopback), following
    /// redirects: the final URL and the body, not read yet.
    async fn get_body(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
    ) -> Result<(String, ByteStream), String> {
        let mut url = check_http_url(url, None)?;
        for _ in 0..=MAX_REDIRECTS {
            let mut req = HttpRequest::get(url.as_str()).map_err(|e| format!("bad URL: {e}"))?;
            req.headers_mut()
                .insert("user-agent", concat!("sluice/", env!("CARGO_PKG_VERSION")));
            for (name, value) in headers {
                req.headers_mut().insert(*name, value.clone());
            }
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
            return Ok((url.to_string(), ByteStream::new(resp.into_body())));
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }
}

/// Reads `body` into `sink`, each chunk within `idle` of the one before: how many bytes.
async fn read_into(
    mut body: ByteStream,
    idle: Duration,
    sink: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
) -> Result<u64, String> {
    let mut n = 0u64;
    loop {
        let next = tokio::time::timeout(idle, body.try_next())
            .await
            .map_err(|_| format!("no data for {idle:?}: the transfer stalled"))?
            .map_err(|e| format!("reading the answer: {}", error_chain(&e)))?;
        let Some(chunk) = next else {
            return Ok(n);
        };
        sink(&chunk)?;
        n += chunk.len() as u64;
    }
}

/// Whether `url` starts with `scheme` (`s3://`, `gs://`), in any case.
fn has_scheme(url: &str, scheme: &str) -> bool {
    url.get(..scheme.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
}

/// `s3://BUCKET/KEY` as (bucket, key); the message of an error says what is wrong (the
/// caller names the URL).
pub fn parse_s3_url(url: &str) -> Result<(String, String), String> {
    bucket_and_key(url, "s3://", "KEY")
}

/// The bucket and object of a `gs://BUCKET/OBJECT` URL.
pub fn parse_gs_url(url: &str) -> Result<(String, String), String> {
    bucket_and_key(url, "gs://", "OBJECT")
}

/// `SCHEME BUCKET/KEY` (`s3://`, `gs://`, any case) as (bucket, key); the error says what is
/// wrong, `key_name` naming the key in the form it expects (the caller names the URL).
pub fn bucket_and_key(url: &str, scheme: &str, key_name: &str) -> Result<(String, String), String> {
    let rest = url
        .get(..scheme.len())
        .filter(|p| p.eq_ignore_ascii_case(scheme))
        .map(|_| &url[scheme.len()..])
        .ok_or_else(|| format!("does not start with {scheme}"))?;
    match rest.split_once('/') {
        Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => {
            Ok((bucket.to_string(), key.to_string()))
        }
        _ => Err(format!(
            "names no object (expected {scheme}BUCKET/{key_name})"
        )),
    }
}

/// `url` parsed, if sluice may fetch it over HTTP: `https`, or `http` to a loopback host; a
/// redirect (from `from`) may not go from `https` to `http`.
pub fn check_http_url(url: &str, from: Option<&url::Url>) -> Result<url::Url, String> {
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
        other => Err(format!(
            "unsupported URL scheme {other:?} (use s3://, gs:// or https://)"
        )),
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

/// The body, refused past `limits.max_bytes`.
async fn read_limited(mut body: ByteStream, limits: Limits) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| format!("reading the answer: {}", error_chain(&e)))?
    {
        data.extend_from_slice(&chunk);
        if data.len() > limits.max_bytes {
            return Err(format!(
                "more than the {} bytes {} may have",
                limits.max_bytes, limits.what
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_table() {
        assert_eq!(
            parse_s3_url("s3://b/k.jsonnet"),
            Ok(("b".into(), "k.jsonnet".into()))
        );
        assert_eq!(
            parse_s3_url("s3://b/dir/k.json"),
            Ok(("b".into(), "dir/k.json".into()))
        );
        for bad in ["s3://", "s3://b", "s3://b/", "s3:///k", "https://b/k"] {
            assert!(parse_s3_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn imports_within_origin_table() {
        let cfg = "https://configs.example.com/team/app/config.jsonnet";
        // (import, allowed)
        for (import, ok) in [
            ("https://configs.example.com/team/app/lib.libsonnet", true),
            (
                "https://configs.example.com/team/app/sub/lib.libsonnet",
                true,
            ),
            (
                "https://configs.example.com:443/team/app/lib.libsonnet",
                true,
            ),
            (
                "https://configs.example.com/team/other/lib.libsonnet",
                false,
            ),
            ("https://configs.example.com/team/app/../x.libsonnet", false),
            ("https://configs.example.com/team/app/%2e%2e/x", false),
            (
                "https://configs.example.com:8443/team/app/lib.libsonnet",
                false,
            ),
            ("http://configs.example.com/team/app/lib.libsonnet", false),
            ("https://evil.example.com/team/app/lib.libsonnet", false),
            (
                "https://u:p@configs.example.com/team/app/lib.libsonnet",
                false,
            ),
            ("s3://bucket/team/app/lib.libsonnet", false),
            ("gs://bucket/team/app/lib.libsonnet", false),
            ("file:///etc/passwd", false),
            ("http://127.0.0.1/team/app/lib.libsonnet", false),
            ("http://169.254.169.254/latest/meta-data/", false),
            ("not a url", false),
        ] {
            assert_eq!(import_within_origin(cfg, import).is_ok(), ok, "{import}");
        }
        assert!(import_within_origin("s3://b/team/c.jsonnet", "s3://b/team/l.libsonnet").is_ok());
        assert!(import_within_origin("s3://b/team/c.jsonnet", "s3://other/team/l").is_err());
        assert!(
            import_within_origin("http://localhost:2772/a/c", "http://localhost:2772/a/l").is_ok()
        );
        let e = import_within_origin(cfg, "s3://bucket/x").unwrap_err();
        assert_eq!(
            e,
            "s3://bucket/x is outside the config's own origin and directory (https://configs.example.com/team/app/)"
        );
    }

    #[test]
    fn urls_table() {
        for (name, url) in [
            ("s3://b/k.jsonnet", true),
            ("S3://b/k.jsonnet", true),
            ("https://h/c.jsonnet", true),
            ("HTTP://127.0.0.1:8080/c.json", true),
            ("config.jsonnet", false),
            ("./s3://x", false),
            ("gs://b/k", true),
            ("GS://b/k", true),
            ("gcs://b/k", false),
            ("", false),
        ] {
            assert_eq!(is_url(name), url, "{name}");
        }
        assert_eq!(
            parse_gs_url("gs://b/team/c.jsonnet").unwrap(),
            ("b".to_string(), "team/c.jsonnet".to_string())
        );
        for bad in ["gs://b", "gs://b/", "gs:///k"] {
            assert_eq!(
                parse_gs_url(bad).unwrap_err(),
                "names no object (expected gs://BUCKET/OBJECT)"
            );
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
