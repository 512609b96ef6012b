//! What the read-only kv stores (this family's file stores) share: their
//! `file` setting, reading it (a local path relative to the working directory, or an
//! `http(s)://` or `s3://` URL through [`sluice_platform::fetch`]) on first use, and keeping what
//! they parsed from it until `close`.
//!
//! A failed read or parse is not kept: the next lookup tries again (a file that appears
//! later, a server that comes back), and each failure is an error naming the file.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sluice_platform::fetch::{Fetcher, Limits};

/// The largest kv store file read.
pub const MAX_FILE_BYTES: usize = 1024 * 1024 * 1024;
/// The longest reading one from a URL may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

const LIMITS: Limits = Limits {
    max_bytes: MAX_FILE_BYTES,
    timeout: FETCH_TIMEOUT,
    what: "a kv store file",
};

/// The bytes of `file` (a path or a URL), or why not, naming it.
pub async fn read(file: &str) -> Result<Vec<u8>, String> {
    if sluice_platform::fetch::is_url(file) {
        static FETCHER: OnceLock<Fetcher> = OnceLock::new();
        FETCHER
            .get_or_init(Fetcher::new)
            .fetch(file, LIMITS)
            .await
            .map(|(_, bytes)| bytes)
            .map_err(|e| format!("reading {file}: {e}"))
    } else {
        let meta = tokio::fs::metadata(file)
            .await
            .map_err(|e| format!("reading {file}: {e}"))?;
        if meta.len() > MAX_FILE_BYTES as u64 {
            return Err(format!(
                "reading {file}: it has {} bytes, more than the {MAX_FILE_BYTES} a kv store file may have",
                meta.len()
            ));
        }
        tokio::fs::read(file)
            .await
            .map_err(|e| format!("reading {file}: {e}"))
    }
}

/// A file's parsed contents, read on first use.
pub struct Loaded<T> {
    file: String,
    contents: tokio::sync::Mutex<Option<Arc<T>>>,
}

impl<T> Loaded<T> {
    /// Nothing read yet.
    pub fn new(file: String) -> Self {
        Loaded {
            file,
            contents: tokio::sync::Mutex::new(None),
        }
    }

    /// The file setting.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The contents, read and parsed with `parse` the first time (the error of `parse`
    /// says what is wrong; this names the file).
    pub async fn get(
        &self,
        parse: impl FnOnce(Vec<u8>) -> Result<T, String>,
    ) -> Result<Arc<T>, String> {
        let mut g = self.contents.lock().await;
        if let Some(t) = &*g {
            return Ok(t.clone());
        }
        let bytes = read(&self.file).await?;
        let t = Arc::new(parse(bytes).map_err(|e| format!("{}: {e}", self.file))?);
        *g = Some(t.clone());
        Ok(t)
    }

    /// Forgets the contents; the next [`Loaded::get`] reads the file again.
    pub async fn forget(&self) {
        *self.contents.lock().await = None;
    }
}

/// `file`, required: the error message when it is missing or empty.
pub fn required(file: Option<String>) -> Result<String, &'static str> {
    file.filter(|f| !f.is_empty()).ok_or(
        "missing required option: a local path or an https://, http:// (loopback) or s3:// URL",
    )
}
