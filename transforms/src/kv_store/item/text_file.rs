//! The `text_file` kv store: a read-only list of lines; a key's value is whether it is
//! one of them (`true` or `false`), as in Substation.
//!
//! Settings as Substation's: `file` (a path or URL, required). Lines are compared whole
//! (a trailing `\r` is dropped); empty lines are not members. Lookups use a hash set
//! (Substation scans the list for every lookup).

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::{ConfigError, Value, async_trait};

use super::file::{Loaded, required};
use super::store::{ItemError, ItemStore};
use crate::kv_store::KvPlace;

/// Settings of the `text_file` kv store.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The file: a local path, or an `https://`, `http://` (loopback) or `s3://` URL.
    pub file: Option<String>,
}

/// A set of lines.
pub struct TextFile {
    lines: Loaded<HashSet<String>>,
}

impl TextFile {
    /// The store for these settings, shared by every transform configured alike.
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let file = required(s.file).map_err(|m| place.error("file", m))?;
        place.shared(format!("text_file:{file}"), || {
            Ok(TextFile {
                lines: Loaded::new(file),
            })
        })
    }
}

fn parse(bytes: Vec<u8>) -> Result<HashSet<String>, String> {
    let text = String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))?;
    Ok(text
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

#[async_trait]
impl ItemStore for TextFile {
    fn describe(&self) -> String {
        format!("text_file {}", self.lines.file())
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError> {
        let lines = self.lines.get(parse).await.map_err(|why| ItemError::Load {
            store: "text_file".into(),
            why,
        })?;
        Ok(Some(Value::Bool(lines.contains(key))))
    }

    async fn close(&self) {
        self.lines.forget().await;
    }
}

/// The `text_file` kv store's descriptor: what registers it and lists it in the reference.
pub(crate) const INFO: crate::kv_store::stores::KvStoreInfo =
    crate::kv_store::stores::KvStoreInfo {
        info: sluice_engine::TypeInfo {
            name: "text_file",
            aliases: &[],
            library: "sub.kv_store.text_file",
            summary: "a list of lines; a key's value is whether it is one of them",
            reach: sluice_engine::Reach::Files,
            example: r#"{"file": "list.txt"}"#,
        },
        items: Some(|p, s| TextFile::shared(p, s).map(|s| s as Arc<dyn ItemStore>)),
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
    fn membership_of_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bad_domains.txt");
        std::fs::write(&f, "evil.example\r\nworse.example\n\n").unwrap();
        let st =
            item_store(json!({"type": "text_file", "settings": {"file": f.to_str().unwrap()}}));
        for (key, want) in [
            ("evil.example", true),
            ("worse.example", true),
            ("evil", false),
            ("", false),
        ] {
            assert_eq!(block_on(st.get(key)).unwrap(), Some(json!(want)), "{key}");
        }
        // Closing forgets the file: a changed file is read again.
        std::fs::write(&f, "new.example\n").unwrap();
        block_on(st.close());
        assert_eq!(block_on(st.get("new.example")).unwrap(), Some(json!(true)));
        assert_eq!(
            block_on(st.get("evil.example")).unwrap(),
            Some(json!(false))
        );
    }

    #[test]
    fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bin.txt");
        std::fs::write(&f, b"\xff\xfe").unwrap();
        let st =
            item_store(json!({"type": "text_file", "settings": {"file": f.to_str().unwrap()}}));
        let e = block_on(st.get("x")).unwrap_err().to_string();
        assert!(e.contains("bin.txt: not UTF-8 text"), "{e}");
        let e = block_on(st.set("x", json!(1), None))
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("set is not supported: the store is read-only"),
            "{e}"
        );
        let e = config_error(json!({"type": "text_file", "settings": {"file": ""}}));
        assert!(
            e.contains("kv_store.settings.file: missing required option"),
            "{e}"
        );
    }
}
