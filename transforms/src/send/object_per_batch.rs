//! What the sends that write one object per batch share (`send_file`, `send_aws_s3`): the
//! `file_path` that names each object, the choice of prefix with `use_batch_key_as_prefix`,
//! and how a batch's items become the object's bytes (joined by `separator`).
//!
//! Naming, as in Substation: `[prefix]/[time_format]/[uuid][suffix]`, the parts that are
//! set joined by `/` with the suffix appended to the last one; `time_format` is a Go layout
//! applied to the current UTC time; with `use_batch_key_as_prefix` a non-empty batch key
//! replaces the prefix. A name that is empty or ends in `/` names no object and is an error.
//!
//! Contents: Substation concatenates the items without a separator; sluice's `separator`
//! (default `""`, so Substation's behaviour) is put between consecutive items, not after the
//! last, like `aggregate_to_string`'s.

use bytes::Bytes;
use chrono::Utc;
use serde::Deserialize;
use sluice_engine::{Build, ConfigError, TransformError};

use crate::time::layout::format_go;

/// `file_path`: how object (file) names are made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FilePath {
    /// The first directory (or directories) of the path.
    pub prefix: String,
    /// A Go time layout for the directories after the prefix (e.g. `2006/01/02`).
    pub time_format: String,
    /// Whether the file name is a random UUID.
    pub uuid: bool,
    /// Appended to the file name (e.g. `.json.gz`).
    pub suffix: String,
}

impl FilePath {
    /// Whether no part is set (Go's default, which names nothing).
    pub fn is_empty(&self) -> bool {
        self.prefix.is_empty()
            && self.time_format.is_empty()
            && !self.uuid
            && self.suffix.is_empty()
    }

    /// A new path for a batch written now, with `prefix` instead of the configured one
    /// (when it is not empty).
    pub fn make(&self, prefix: &str) -> String {
        let mut parts: Vec<String> = Vec::with_capacity(3);
        let prefix = if prefix.is_empty() {
            &self.prefix
        } else {
            prefix
        };
        if !prefix.is_empty() {
            parts.push(prefix.trim_end_matches('/').to_string());
        }
        if !self.time_format.is_empty() {
            let now = Utc::now().with_timezone(&chrono_tz::UTC);
            parts.push(format_go(&now, &self.time_format));
        }
        if self.uuid {
            parts.push(uuid::Uuid::new_v4().to_string());
        }
        let mut path = parts.join("/");
        path.push_str(&self.suffix);
        path
    }
}

/// How a send names and fills the object of each batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectPerBatch {
    /// `file_path`.
    pub file_path: FilePath,
    /// `use_batch_key_as_prefix`.
    pub use_batch_key_as_prefix: bool,
    /// `separator`, put between consecutive items.
    pub separator: Bytes,
}

impl ObjectPerBatch {
    /// Checks the settings at build time: a `file_path` with no part set is an error (Go's
    /// default names nothing, which Substation only finds at the first flush); one without
    /// `uuid` draws a warning, since batches of one time bucket then get one name.
    pub fn new(
        b: &Build<'_>,
        file_path: FilePath,
        use_batch_key_as_prefix: bool,
        separator: String,
    ) -> Result<Self, ConfigError> {
        if file_path.is_empty() {
            return Err(b.field_error(
                "file_path",
                "missing required option: file_path must set at least one of prefix, time_format, uuid, suffix (the library's default is {time_format: '2006/01/02', uuid: true})",
            ));
        }
        if !file_path.uuid {
            b.warn(
                "file_path.uuid is false: batches written in the same time bucket replace each other"
                    .to_string(),
            );
        }
        Ok(ObjectPerBatch {
            file_path,
            use_batch_key_as_prefix,
            separator: Bytes::from(separator),
        })
    }

    /// A new name for a batch with batch key `key`, written now.
    pub fn name(&self, key: &str) -> Result<String, TransformError> {
        let prefix = if self.use_batch_key_as_prefix {
            key
        } else {
            ""
        };
        let path = self.file_path.make(prefix);
        if path.is_empty() || path.ends_with('/') {
            return Err(TransformError::failed(format!(
                "file_path gives no file name for batch key {key:?}"
            )));
        }
        Ok(path)
    }

    /// The object's bytes: `items` joined by the separator.
    pub fn contents(&self, items: &[Bytes]) -> Bytes {
        join(items, &self.separator)
    }
}

/// `items` with `separator` between consecutive ones; a single item is returned as is
/// (no copy).
pub fn join(items: &[Bytes], separator: &[u8]) -> Bytes {
    if let [one] = items {
        return one.clone();
    }
    let size = items.iter().map(Bytes::len).sum::<usize>()
        + separator.len() * items.len().saturating_sub(1);
    let mut out = Vec::with_capacity(size);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(separator);
        }
        out.extend_from_slice(item);
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_table() {
        let b = |s: &[&str]| {
            s.iter()
                .map(|i| Bytes::from(i.to_string()))
                .collect::<Vec<_>>()
        };
        for (items, sep, want) in [
            (b(&[]), "", ""),
            (b(&["a"]), "\n", "a"),
            (b(&["a", "b", "c"]), "", "abc"),
            (b(&["a", "b", "c"]), "\n", "a\nb\nc"),
            (b(&["a", "", "c"]), ", ", "a, , c"),
        ] {
            assert_eq!(
                join(&items, sep.as_bytes()),
                want.as_bytes(),
                "{items:?} {sep:?}"
            );
        }
    }

    #[test]
    fn names_table() {
        let fp = |prefix: &str, time_format: &str, uuid: bool, suffix: &str| FilePath {
            prefix: prefix.into(),
            time_format: time_format.into(),
            uuid,
            suffix: suffix.into(),
        };
        let year = Utc::now().format("%Y").to_string();
        // (file_path, use_batch_key_as_prefix, batch key, the name with each UUID as "U")
        let cases = [
            (
                fp("logs", "", false, ".json"),
                false,
                "k",
                "logs.json".to_string(),
            ),
            (fp("logs/", "", true, ".gz"), false, "k", "logs/U.gz".into()),
            (
                fp("logs", "2006", true, ""),
                false,
                "k",
                format!("logs/{year}/U"),
            ),
            (fp("logs", "", true, ""), true, "k", "k/U".into()),
            (fp("logs", "", true, ""), true, "", "logs/U".into()),
            (fp("", "", true, ".x"), true, "a/b/", "a/b/U.x".into()),
            (fp("", "", false, ".x"), false, "", ".x".into()),
        ];
        let uuid =
            regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
                .unwrap();
        for (file_path, by_key, key, want) in cases {
            let o = ObjectPerBatch {
                file_path: file_path.clone(),
                use_batch_key_as_prefix: by_key,
                separator: Bytes::new(),
            };
            let got = o.name(key).unwrap();
            assert_eq!(uuid.replace_all(&got, "U"), want, "{file_path:?} {key:?}");
        }
        // A name that ends in a directory names nothing.
        let o = ObjectPerBatch {
            file_path: fp("logs/", "", false, ""),
            use_batch_key_as_prefix: true,
            separator: Bytes::new(),
        };
        assert_eq!(o.name("").unwrap(), "logs");
        let o = ObjectPerBatch {
            file_path: fp("", "2006/", false, ""),
            ..o
        };
        let e = o.name("k").unwrap_err().to_string();
        assert!(
            e.contains("file_path gives no file name for batch key \"k\""),
            "{e}"
        );
    }
}
