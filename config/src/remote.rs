//! Configs at URLs: `sluice run -c s3://bucket/config.jsonnet`, and `test`, `build`, `vet`
//! given such URLs.
//!
//! The fetching itself is `sluice_platform::fetch`, shared with the kv stores' files; the
//! CLI and the Lambda bootstrap both load configs through here:
//!
//! - `s3://BUCKET/KEY`: `GetObject` with the AWS SDK's default chains (credentials,
//!   `AWS_REGION`, `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`; `sluice_platform::aws::s3`).
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
//! text is compiled by [`crate::load_text`] under the URL, so errors show the URL
//! where a file's would show its path; the config's relative imports are resolved against
//! its URL and fetched the same way (`import 'lib.libsonnet'` next to
//! `s3://bucket/team/config.jsonnet` is `s3://bucket/team/lib.libsonnet`), and the library
//! (`sluice.libsonnet`, `substation.libsonnet`, with any directories) is always the
//! embedded one.
//!
//! A config read from a URL is someone else's code (docs/security.md), and its imports are
//! fetched with the user's credentials: so it imports only from its own origin (scheme,
//! host and port) and from under its own directory
//! ([`sluice_platform::fetch::import_within_origin`]), where a redirect may lead as
//! well. Another bucket, `s3://` or `gs://` from an `https://` config, `file://`, a loopback
//! or link-local host (the cloud metadata service) is refused with an error naming the
//! import and [`ALLOW_IMPORTS_FLAG`], which (or [`ALLOW_IMPORTS_ENV`]`=1`, for the Lambda
//! bootstrap) lifts the rule.
//!
//! The same rule holds for the files such a config makes sluice read when it runs: the
//! `file` of the kv stores that read one ([`FILE_SETTINGS`], which a test in
//! `tests/library_registry.rs` compares with the stores' descriptors) must be a URL under the config's own directory, and a local path is
//! refused (a config read from a URL reads no local file), unless the same flag is given.
//! The compiled config is checked before anything is built ([`check_files`]), by `run`,
//! `test`, `vet` and the Lambda bootstrap; `build` only prints it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice_platform::fetch;

use crate::{ConfigLoadError, Fetch, LoadedConfig};

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

/// The settings that name a file sluice reads, as `(type, setting)`: an object of that
/// `type` anywhere in a compiled config (a kv store inside a transform's settings, in
/// `tests:` too) reads its `settings.<setting>` when the pipeline runs
/// (`sluice_transforms::kv_store::item::file`).
pub const FILE_SETTINGS: &[(&str, &str)] = &[
    ("csv_file", "file"),
    ("json_file", "file"),
    ("text_file", "file"),
    ("mmdb", "file"),
];

/// Why a config at a URL could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The runtime the fetches run on could not start.
    #[error("starting a runtime to fetch the config: {0}")]
    Runtime(std::io::Error),
    /// The config could not be fetched.
    #[error("{url}: {why}")]
    Fetch {
        /// The URL as given.
        url: String,
        /// Why not.
        why: String,
    },
    /// The config is not text.
    #[error("{url}: the config is not UTF-8 text")]
    NotUtf8 {
        /// The URL as given.
        url: String,
    },
    /// The config did not compile or is not a valid config.
    #[error(transparent)]
    Load(#[from] ConfigLoadError),
    /// The config names a file it may not make sluice read.
    #[error(transparent)]
    FileRefused(#[from] FileRefused),
}

/// A file a config read from a URL may not make sluice read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{config}: {place}: {setting} {file:?} is not read: {why}; a config read from a URL reads \
     files only from under its own directory unless sluice runs with {ALLOW_IMPORTS_FLAG} (or \
     {ALLOW_IMPORTS_ENV}=1)"
)]
pub struct FileRefused {
    /// The config's URL.
    config: String,
    /// The outermost transform around the setting, as `transforms[2] (meta_switch)` (or a
    /// test's, as `tests[0].transforms[1] (enrich_kv_store_item_get)`).
    place: String,
    /// The setting, from that transform, as `settings.kv_store.settings.file (csv_file)`.
    setting: String,
    /// Its value.
    file: String,
    /// Why it is refused.
    why: String,
}

/// Checks every file setting ([`FILE_SETTINGS`]) of `json`, the config compiled from
/// `config` (the URL it came from, where redirects led): a URL must lie under the config's
/// own directory, at its origin ([`fetch::import_within_origin`]); a local path is refused.
pub fn check_files(config: &str, json: &serde_json::Value) -> Result<(), FileRefused> {
    fn walk(
        config: &str,
        v: &serde_json::Value,
        at: &str,
        within: Option<(&str, &str)>,
    ) -> Result<(), FileRefused> {
        use serde_json::Value;
        match v {
            Value::Object(map) => {
                let ty = map.get("type").and_then(Value::as_str);
                // The outermost object with a type is the transform errors name.
                let here;
                let within = match (within, ty) {
                    (Some(w), _) => Some(w),
                    (None, Some(t)) => {
                        here = (at.to_string(), t.to_string());
                        Some((here.0.as_str(), here.1.as_str()))
                    }
                    (None, None) => None,
                };
                if let Some(ty) = ty
                    && let Some((_, setting)) = FILE_SETTINGS.iter().find(|(t, _)| *t == ty)
                    && let Some(file) = map
                        .get("settings")
                        .and_then(|s| s.get(*setting))
                        .and_then(Value::as_str)
                    && !file.is_empty()
                {
                    let why = if fetch::is_url(file) {
                        fetch::import_within_origin(config, file).err()
                    } else {
                        Some(
                            "it is a local file, which a config read from a URL never reads".into(),
                        )
                    };
                    if let Some(why) = why {
                        let (place, outer) = within.unwrap_or((at, ty));
                        let rel = at
                            .strip_prefix(place)
                            .map(|r| r.trim_start_matches('.'))
                            .unwrap_or(at);
                        let setting = if rel.is_empty() {
                            format!("settings.{setting}")
                        } else {
                            format!("{rel}.settings.{setting} ({ty})")
                        };
                        return Err(FileRefused {
                            config: config.to_string(),
                            place: format!("{place} ({outer})"),
                            setting,
                            file: file.to_string(),
                            why,
                        });
                    }
                }
                for (k, child) in map {
                    let path = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    walk(config, child, &path, within)?;
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(config, child, &format!("{at}[{i}]"), within)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(config, json, "", None)
}

/// Whether `name` (a command-line argument) is a URL sluice reads configs from, rather
/// than a local path.
pub fn is_url(name: &str) -> bool {
    fetch::is_url(name)
}

/// Reads URLs ([`sluice_platform::fetch`]), on a runtime of its own (config loading
/// happens before, and outside, the pipeline's runtime).
pub struct Fetcher {
    rt: tokio::runtime::Runtime,
    inner: fetch::Fetcher,
}

impl Fetcher {
    /// A fetcher with its own single-threaded runtime.
    pub fn new() -> Result<Self, RemoteError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(RemoteError::Runtime)?;
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

    /// Streams what `url` names into `out` (an input of `sluice run`; see
    /// [`fetch::Fetcher::download`]): how many bytes.
    pub fn download(
        &self,
        url: &str,
        out: &mut (impl std::io::Write + Send),
    ) -> Result<u64, String> {
        let mut sink = |chunk: &[u8]| {
            out.write_all(chunk)
                .map_err(|e| format!("writing the download: {e}"))
        };
        self.rt
            .block_on(self.inner.download(url, DOWNLOAD_IDLE, &mut sink))
    }
}

/// The longest a download may wait for its next bytes.
const DOWNLOAD_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

/// The config at `url`: the URL it came from (where redirects led; its imports resolve
/// against it and its errors name it), its text, and a fetcher for its imports.
fn read(url: &str) -> Result<(String, String, Fetch), RemoteError> {
    let fetcher = Fetcher::new()?;
    let (name, bytes) = fetcher.fetch_final(url).map_err(|why| RemoteError::Fetch {
        url: url.to_string(),
        why,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| RemoteError::NotUtf8 {
        url: url.to_string(),
    })?;
    let origin = name.clone();
    let allow = imports_allowed();
    let imports: Fetch = Box::new(move |u: &str| {
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

/// Compiles the config at `url` (see [`crate::compile_text`]) and checks the files
/// it reads ([`check_files`], unless [`ALLOW_IMPORTS_FLAG`] is given).
pub fn compile(url: &str, ext: &[(String, String)]) -> Result<serde_json::Value, RemoteError> {
    compile_named(url, ext).map(|(_, json)| json)
}

/// [`compile`], with the URL the config came from.
fn compile_named(
    url: &str,
    ext: &[(String, String)],
) -> Result<(String, serde_json::Value), RemoteError> {
    let (name, text, imports) = read(url)?;
    let json = crate::compile_text(&name, &text, ext, Some(imports))?;
    if !imports_allowed() {
        check_files(&name, &json)?;
    }
    Ok((name, json))
}

/// Compiles the config at `url` to JSON text, for `sluice build`.
pub fn compile_to_string(
    url: &str,
    ext: &[(String, String)],
    pretty: bool,
) -> Result<String, RemoteError> {
    let (name, text, imports) = read(url)?;
    Ok(crate::compile_text_to_string(
        &name,
        &text,
        ext,
        Some(imports),
        pretty,
    )?)
}

/// Loads the config at `url` (see [`crate::load_text`]), checking the files it
/// reads as [`compile`] does.
pub fn load(url: &str, ext: &[(String, String)]) -> Result<LoadedConfig, RemoteError> {
    let (name, json) = compile_named(url, ext)?;
    Ok(LoadedConfig::new(json, std::path::Path::new(&name))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which kv store files a config at `https://h/cfg/c.jsonnet` may name, and what the
    /// error says for the others.
    #[test]
    fn files_table() {
        let config = "https://h/cfg/c.jsonnet";
        let kv = |ty: &str, file: &str| {
            serde_json::json!({"transforms": [
                {"type": "send_stdout", "settings": {}},
                {"type": "enrich_kv_store_item_get", "settings": {
                    "kv_store": {"type": ty, "settings": {"file": file}}}},
            ]})
        };
        let at = "transforms[1] (enrich_kv_store_item_get): \
                  settings.kv_store.settings.file";
        let cases: &[(serde_json::Value, Option<&str>)] = &[
            (kv("csv_file", "https://h/cfg/users.csv"), None),
            (kv("json_file", "https://h/cfg/sub/x.json"), None),
            (
                kv("csv_file", "https://h/other/users.csv"),
                Some(&format!(
                    "{config}: {at} (csv_file) \"https://h/other/users.csv\" is not read: \
                     https://h/other/users.csv is outside the config's own origin and \
                     directory (https://h/cfg/); a config read from a URL reads files only \
                     from under its own directory unless sluice runs with \
                     --allow-remote-imports (or SLUICE_ALLOW_REMOTE_IMPORTS=1)"
                )),
            ),
            (
                kv("text_file", "/etc/passwd"),
                Some(&format!(
                    "{config}: {at} (text_file) \"/etc/passwd\" is not read: it is a local \
                     file, which a config read from a URL never reads; a config read"
                )),
            ),
            (
                kv("mmdb", "geo.mmdb"),
                Some("\"geo.mmdb\" is not read: it is a local file"),
            ),
            (
                kv("json_file", "s3://bucket/cfg/x.json"),
                Some("is outside the config's own"),
            ),
            (
                kv("csv_file", "http://127.0.0.1:9/cfg/x.csv"),
                Some("is outside the config's own"),
            ),
            (
                kv("csv_file", "http://169.254.169.254/latest/meta-data/"),
                Some("is outside the config's own"),
            ),
            (
                kv("csv_file", "https://h/cfg/../x.csv"),
                Some("is outside the config's own"),
            ),
            // A kv store given on its own (in a test), and one of the sqlite lock (a file
            // sluice writes, not one it reads: see docs/security.md).
            (
                serde_json::json!({"tests": [{"transforms": [{"type": "mmdb",
                    "settings": {"file": "/x.mmdb"}}]}], "transforms": []}),
                Some(
                    "https://h/cfg/c.jsonnet: tests[0].transforms[0] (mmdb): settings.file \"/x.mmdb\" is not read",
                ),
            ),
            (
                serde_json::json!({"transforms": [{"type": "meta_kv_store_lock", "settings": {
                    "kv_store": {"type": "sqlite", "settings": {"file": "locks.sqlite"}}}}]}),
                None,
            ),
        ];
        for (json, want) in cases {
            let got = check_files(config, json).err().map(|e| e.to_string());
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g))
                    if g.starts_with(w) || (!w.starts_with("https") && g.contains(w)) => {}
                _ => panic!("{json}: got {got:?}, want {want:?}"),
            }
        }
    }

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
