//! Configs at URLs: `sluice run -c s3://bucket/config.jsonnet`, and `test`, `build`, `vet`
//! given such URLs.
//!
//! The fetching itself is `sluice_transforms::fetch`, shared with the kv stores' files:
//!
//! - `s3://BUCKET/KEY`: `GetObject` with the AWS SDK's default chains (credentials,
//!   `AWS_REGION`, `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`; `sluice_transforms::aws::s3`).
//! - `gs://BUCKET/OBJECT`: Cloud Storage with Google's Application Default Credentials (or
//!   the emulator at `STORAGE_EMULATOR_HOST`).
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
//!
//! A config read from a URL is someone else's code (docs/security.md), and its imports are
//! fetched with the user's credentials: so it imports only from its own origin (scheme,
//! host and port) and from under its own directory
//! ([`sluice_transforms::fetch::import_within_origin`]), where a redirect may lead as
//! well. Another bucket, `s3://` or `gs://` from an `https://` config, `file://`, a loopback
//! or link-local host (the cloud metadata service) is refused with an error naming the
//! import and [`ALLOW_IMPORTS_FLAG`], which (or [`ALLOW_IMPORTS_ENV`]`=1`, for the Lambda
//! bootstrap) lifts the rule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, anyhow};
use sluice_transforms::fetch;

/// The largest config (or import) read from a URL.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024 * 1024;
/// The longest one fetch may take, redirects included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// The most redirects followed for one `https://` fetch.
pub const MAX_REDIRECTS: usize = fetch::MAX_REDIRECTS;

const LIMITS: fetch::Limits = fetch::Limits {
    max_bytes: MAX_CONFIG_BYTES,
    timeout: FETCH_TIMEOUT,
    what: "a config",
};

/// The flag that lets a config read from a URL import from anywhere.
pub const ALLOW_IMPORTS_FLAG: &str = "--allow-remote-imports";
/// The environment variable that does what [`ALLOW_IMPORTS_FLAG`] does (set to `1`).
pub const ALLOW_IMPORTS_ENV: &str = "SLUICE_ALLOW_REMOTE_IMPORTS";

static ALLOW_IMPORTS: AtomicBool = AtomicBool::new(false);

/// Sets whether configs read from URLs may import from anywhere (the command's
/// [`ALLOW_IMPORTS_FLAG`]).
pub fn allow_imports(allow: bool) {
    ALLOW_IMPORTS.store(allow, Ordering::Relaxed);
}

/// Whether configs read from URLs may import from anywhere: the flag, or
/// [`ALLOW_IMPORTS_ENV`] set to `1` or `true`.
fn imports_allowed() -> bool {
    ALLOW_IMPORTS.load(Ordering::Relaxed)
        || std::env::var(ALLOW_IMPORTS_ENV)
            .is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Why the config at `config` may not import `import` (see the module documentation).
fn check_import(config: &str, import: &str) -> Result<(), String> {
    fetch::import_within_origin(config, import).map_err(|why| {
        format!(
            "not imported: {why}; a config read from a URL imports only from under its own \
             directory unless sluice runs with {ALLOW_IMPORTS_FLAG} (or {ALLOW_IMPORTS_ENV}=1)"
        )
    })
}

/// Whether `name` (a command-line argument) is a URL sluice reads configs from, rather
/// than a local path.
pub fn is_url(name: &str) -> bool {
    fetch::is_url(name)
}

/// Reads URLs ([`sluice_transforms::fetch`]), on a runtime of its own (config loading
/// happens before, and outside, the pipeline's runtime).
pub struct Fetcher {
    rt: tokio::runtime::Runtime,
    inner: fetch::Fetcher,
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
            inner: fetch::Fetcher::new(),
        })
    }

    /// The bytes at `url`, or why not (the caller names the URL).
    pub fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        self.fetch_final(url).map(|(_, bytes)| bytes)
    }

    /// The URL the bytes came from (`url`, or where its redirects led) and the bytes.
    pub fn fetch_final(&self, url: &str) -> Result<(String, Vec<u8>), String> {
        self.rt.block_on(self.inner.fetch(url, LIMITS))
    }
}

/// The config at `url`: the URL it came from (where redirects led; its imports resolve
/// against it and its errors name it), its text, and a fetcher for its imports.
fn read(url: &str) -> anyhow::Result<(String, String, sluice_config::Fetch)> {
    let fetcher = Fetcher::new()?;
    let (name, bytes) = fetcher
        .fetch_final(url)
        .map_err(|e| anyhow!("{url}: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow!("{url}: the config is not UTF-8 text"))?;
    let origin = name.clone();
    let allow = imports_allowed();
    let imports: sluice_config::Fetch = Box::new(move |u: &str| {
        if !allow {
            check_import(&origin, u)?;
        }
        let (led_to, bytes) = fetcher.fetch_final(u)?;
        if !allow && led_to != u {
            check_import(&origin, &led_to)?;
        }
        Ok(bytes)
    });
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
            ("gs://b/k", true),
            ("", false),
        ] {
            assert_eq!(is_url(name), url, "{name}");
        }
    }
}
