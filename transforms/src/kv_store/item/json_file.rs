//! The `json_file` kv store: a read-only JSON document in which the key is a path.
//!
//! Settings as Substation's: `file` (a path or URL, required) and `is_lines` (default
//! false: the file is one JSON document; true: one document per line). A key is read as a
//! path into the document (the GJSON syntax of every sluice path: `users.ann.team`,
//! `list.#`, `list.0`); with `is_lines`, the value is the first non-null match among the
//! lines, in file order. What the path does not find is no value.
//!
//! Differences from Substation: a file (or, with `is_lines`, a line) that is not JSON is
//! an error naming it (and the line), not a document that matches nothing; a key that is
//! not a valid path is an error naming the key. `sub.kv_store.json_file()` works without
//! an argument (Substation's library function fails).

use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::path::Path;
use sluice_engine::{ConfigError, Value, async_trait};

use super::file::{Loaded, required};
use super::store::{ItemError, ItemStore};
use crate::kv_store::KvPlace;

/// Settings of the `json_file` kv store.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The file: a local path, or an `https://`, `http://` (loopback) or `s3://` URL.
    pub file: Option<String>,
    /// One JSON document per line.
    pub is_lines: bool,
}

/// A JSON document (or one per line).
pub struct JsonFile {
    is_lines: bool,
    docs: Loaded<Vec<Value>>,
}

impl JsonFile {
    /// The store for these settings, shared by every transform configured alike.
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let file = required(s.file).map_err(|m| place.error("file", m))?;
        let id = format!("json_file:{file}\u{0}{}", s.is_lines);
        place.shared(id, || {
            Ok(JsonFile {
                is_lines: s.is_lines,
                docs: Loaded::new(file),
            })
        })
    }

    fn parse(&self, bytes: Vec<u8>) -> Result<Vec<Value>, String> {
        if !self.is_lines {
            return serde_json::from_slice::<Value>(&bytes)
                .map(|v| vec![v])
                .map_err(|e| format!("not JSON: {e}"));
        }
        let mut docs = Vec::new();
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            docs.push(
                serde_json::from_slice::<Value>(line)
                    .map_err(|e| format!("line {} is not JSON: {e}", i + 1))?,
            );
        }
        Ok(docs)
    }
}

#[async_trait]
impl ItemStore for JsonFile {
    fn describe(&self) -> String {
        format!("json_file {}", self.docs.file())
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError> {
        let path = Path::parse(key).map_err(|e| ItemError::BadKey {
            store: self.describe(),
            key: key.to_string(),
            why: format!("not a path: {e}"),
        })?;
        let docs = self
            .docs
            .get(|b| self.parse(b))
            .await
            .map_err(|why| ItemError::Load {
                store: "json_file".into(),
                why,
            })?;
        Ok(docs
            .iter()
            .filter_map(|d| path.get(d))
            .find(|v| !v.is_null())
            .map(|v| v.into_owned()))
    }

    async fn close(&self) {
        self.docs.forget().await;
    }
}

/// The `json_file` kv store's descriptor: what registers it and lists it in the reference.
pub(crate) const INFO: crate::kv_store::stores::KvStoreInfo =
    crate::kv_store::stores::KvStoreInfo {
        info: sluice_engine::TypeInfo {
            name: "json_file",
            aliases: &[],
            library: "sub.kv_store.json_file",
            summary: "a JSON document (or JSON lines); the key is a path into it",
            reach: sluice_engine::Reach::Files,
            example: r#"{"file": "users.json"}"#,
        },
        items: Some(|p, s| JsonFile::shared(p, s).map(|s| s as Arc<dyn ItemStore>)),
        read_only: true,
        locks: None,
        file: Some("file"),
    };

#[cfg(test)]
mod tests {
    use crate::kv_store::test_support::{config_error, item_store};
    use sluice_engine::json;
    use sluice_engine::testing::block_on;

    #[test]
    fn keys_are_paths_into_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let doc = dir.path().join("doc.json");
        std::fs::write(
            &doc,
            r#"{"users":{"ann":{"team":"red"},"bob":null},"list":[1,2,3]}"#,
        )
        .unwrap();
        let lines = dir.path().join("lines.jsonl");
        std::fs::write(&lines, "{\"a\":null,\"b\":1}\n\n{\"a\":2}\r\n{\"a\":3}\n").unwrap();
        let d = doc.to_str().unwrap();
        let l = lines.to_str().unwrap();
        for (file, is_lines, key, want) in [
            (d, false, "users.ann", Some(json!({"team": "red"}))),
            (d, false, "users.ann.team", Some(json!("red"))),
            (d, false, "users.bob", None),
            (d, false, "users.cid", None),
            (d, false, "list.#", Some(json!(3))),
            (d, false, "list.1", Some(json!(2))),
            (l, true, "a", Some(json!(2))),
            (l, true, "b", Some(json!(1))),
            (l, true, "c", None),
        ] {
            let st = item_store(
                json!({"type": "json_file", "settings": {"file": file, "is_lines": is_lines}}),
            );
            assert_eq!(block_on(st.get(key)).unwrap(), want, "{file} {key}");
        }
    }

    #[test]
    fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"a\":").unwrap();
        let badl = dir.path().join("bad.jsonl");
        std::fs::write(&badl, "{\"a\":1}\nnope\n").unwrap();
        for (file, is_lines, want) in [
            (bad.to_str().unwrap(), false, "bad.json: not JSON: "),
            (
                badl.to_str().unwrap(),
                true,
                "bad.jsonl: line 2 is not JSON: ",
            ),
            (
                "/nonexistent/x.json",
                false,
                "json_file: reading /nonexistent/x.json: ",
            ),
        ] {
            let st = item_store(
                json!({"type": "json_file", "settings": {"file": file, "is_lines": is_lines}}),
            );
            let e = block_on(st.get("a")).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let st = item_store(json!({"type": "json_file", "settings": {"file": "x.json"}}));
        let e = block_on(st.set_add("k", vec![], None))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "json_file x.json: set_add is not supported: the store is read-only"
        );
        let e = config_error(json!({"type": "json_file", "settings": {"is_lines": "yes"}}));
        assert!(e.contains("kv_store.settings.is_lines"), "{e}");
        let e = config_error(json!({"type": "json_file"}));
        assert!(
            e.contains("kv_store.settings.file: missing required option"),
            "{e}"
        );
    }
}
