//! The `csv_file` kv store: a read-only table from a CSV file, one row per key.
//!
//! Settings as Substation's: `file` (a path or URL, required), `column` (the header of the
//! key column, required), `delimiter` (one character, default `,`), `header` (the column
//! names, joined by the delimiter; when set, the file's first line is data). A key's value
//! is an object of the row's other columns, every value a string, as in Substation. A later
//! row with the same key replaces an earlier one.
//!
//! Differences from Substation: `column` is checked when the config is built (Substation
//! fails on the first lookup), and a row with more or fewer fields than the header is an
//! error naming its line, not a row with missing values.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::{ConfigError, Map, Value, async_trait};

use super::file::{Loaded, required};
use super::store::{ItemError, ItemStore};
use crate::kv_store::KvPlace;

/// Settings of the `csv_file` kv store.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The file: a local path, or an `https://`, `http://` (loopback) or `s3://` URL.
    pub file: Option<String>,
    /// The header of the key column.
    pub column: Option<String>,
    /// The field delimiter (default `,`).
    pub delimiter: Option<String>,
    /// The column names, when the file has no header line.
    pub header: Option<String>,
}

/// A CSV file's rows by key.
pub struct CsvFile {
    column: String,
    delimiter: u8,
    header: Option<Vec<String>>,
    rows: Loaded<HashMap<String, Value>>,
}

impl CsvFile {
    /// The store for these settings, shared by every transform configured alike.
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let file = required(s.file).map_err(|m| place.error("file", m))?;
        let column = s.column.filter(|c| !c.is_empty()).ok_or_else(|| {
            place.error(
                "column",
                "missing required option: the header of the column whose values are the keys",
            )
        })?;
        let delimiter = match s.delimiter.as_deref() {
            None | Some("") => b',',
            Some(d) if d.len() == 1 => d.as_bytes()[0],
            Some(d) => {
                return Err(place.error(
                    "delimiter",
                    format!("{d:?} is not one ASCII character (e.g. \",\", \";\", \"\\t\")"),
                ));
            }
        };
        let header = s.header.filter(|h| !h.is_empty()).map(|h| {
            h.split(delimiter as char)
                .map(str::to_string)
                .collect::<Vec<_>>()
        });
        if let Some(h) = &header
            && !h.contains(&column)
        {
            return Err(place.error(
                "header",
                format!("the key column {column:?} is not one of the header's columns {h:?}"),
            ));
        }
        let id = format!("csv_file:{file}\u{0}{column}\u{0}{delimiter}\u{0}{header:?}");
        place.shared(id, || {
            Ok(CsvFile {
                column,
                delimiter,
                header,
                rows: Loaded::new(file),
            })
        })
    }

    fn parse(&self, bytes: Vec<u8>) -> Result<HashMap<String, Value>, String> {
        let mut r = csv::ReaderBuilder::new()
            .delimiter(self.delimiter)
            .has_headers(self.header.is_none())
            .from_reader(bytes.as_slice());
        let names: Vec<String> = match &self.header {
            Some(h) => h.clone(),
            None => r
                .headers()
                .map_err(|e| format!("bad CSV: {e}"))?
                .iter()
                .map(str::to_string)
                .collect(),
        };
        let key_index = names
            .iter()
            .position(|n| *n == self.column)
            .ok_or_else(|| {
                format!(
                    "the key column {:?} is not in the header {names:?}",
                    self.column
                )
            })?;
        let mut rows = HashMap::new();
        for record in r.records() {
            let record = record.map_err(|e| format!("bad CSV: {e}"))?;
            if record.len() != names.len() {
                let line = record.position().map_or(0, |p| p.line());
                return Err(format!(
                    "bad CSV: line {line} has {} fields, the header {}",
                    record.len(),
                    names.len()
                ));
            }
            let mut m = Map::with_capacity(names.len() - 1);
            for (i, (name, field)) in names.iter().zip(record.iter()).enumerate() {
                if i != key_index {
                    m.insert(name.as_str(), Value::from(field));
                }
            }
            rows.insert(record[key_index].to_string(), Value::Object(m));
        }
        Ok(rows)
    }
}

#[async_trait]
impl ItemStore for CsvFile {
    fn describe(&self) -> String {
        format!("csv_file {}", self.rows.file())
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError> {
        let rows = self
            .rows
            .get(|b| self.parse(b))
            .await
            .map_err(|why| ItemError::Load {
                store: "csv_file".into(),
                why,
            })?;
        Ok(rows.get(key).cloned())
    }

    async fn close(&self) {
        self.rows.forget().await;
    }
}

/// The `csv_file` kv store's descriptor: what registers it and lists it in the reference.
pub(crate) const INFO: crate::kv_store::stores::KvStoreInfo =
    crate::kv_store::stores::KvStoreInfo {
        info: sluice_engine::TypeInfo {
            name: "csv_file",
            aliases: &[],
            library: "sub.kv_store.csv_file",
            summary: "a CSV file, one row per key (`column`)",
            reach: sluice_engine::Reach::Files,
            example: r#"{"file": "users.csv", "column": "id"}"#,
        },
        items: Some(|p, s| CsvFile::shared(p, s).map(|s| s as Arc<dyn ItemStore>)),
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
    fn rows_by_key_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.csv");
        std::fs::write(&path, "id,name,team\n1,ann,red\n2,bob,blue\n2,bo,green\n").unwrap();
        let file = path.to_str().unwrap();
        // (settings, key, value)
        let cases = [
            (
                json!({"file": file, "column": "id"}),
                "1",
                Some(json!({"name": "ann", "team": "red"})),
            ),
            (
                json!({"file": file, "column": "id"}),
                "2",
                Some(json!({"name": "bo", "team": "green"})),
            ),
            (json!({"file": file, "column": "id"}), "3", None),
            (
                json!({"file": file, "column": "name"}),
                "ann",
                Some(json!({"id": "1", "team": "red"})),
            ),
            // A header of our own: the first line is data.
            (
                json!({"file": file, "column": "a", "header": "a,b,c"}),
                "id",
                Some(json!({"b": "name", "c": "team"})),
            ),
        ];
        for (settings, key, want) in cases {
            let st = item_store(json!({"type": "csv_file", "settings": settings.clone()}));
            assert_eq!(block_on(st.get(key)).unwrap(), want, "{settings:?} {key}");
        }
        let tsv = dir.path().join("t.tsv");
        std::fs::write(&tsv, "k\tv\nx\t1\n").unwrap();
        let st = item_store(
            json!({"type": "csv_file", "settings": {"file": tsv.to_str().unwrap(), "column": "k", "delimiter": "\t"}}),
        );
        assert_eq!(block_on(st.get("x")).unwrap(), Some(json!({"v": "1"})));
    }

    #[test]
    fn errors_name_the_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let ragged = dir.path().join("ragged.csv");
        std::fs::write(&ragged, "id,name\n1,ann\n2\n").unwrap();
        let nocol = dir.path().join("nocol.csv");
        std::fs::write(&nocol, "key,name\n1,ann\n").unwrap();
        let missing = dir.path().join("missing.csv");
        for (file, want) in [
            (&ragged, "ragged.csv: bad CSV: "),
            (
                &nocol,
                "nocol.csv: the key column \"id\" is not in the header [\"key\", \"name\"]",
            ),
            (&missing, "reading "),
        ] {
            let st = item_store(
                json!({"type": "csv_file", "settings": {"file": file.to_str().unwrap(), "column": "id"}}),
            );
            let e = block_on(st.get("1")).unwrap_err().to_string();
            assert!(e.starts_with("csv_file: "), "{e}");
            assert!(e.contains(want), "{e}");
        }
        let st =
            item_store(json!({"type": "csv_file", "settings": {"file": "x.csv", "column": "id"}}));
        let e = block_on(st.set("k", json!(1), None))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "csv_file x.csv: set is not supported: the store is read-only"
        );
        for (settings, want) in [
            (
                json!({"column": "id"}),
                "kv_store.settings.file: missing required option",
            ),
            (
                json!({"file": "x.csv"}),
                "kv_store.settings.column: missing required option",
            ),
            (
                json!({"file": "x.csv", "column": "id", "delimiter": ";;"}),
                "kv_store.settings.delimiter: \";;\" is not one ASCII character",
            ),
            (
                json!({"file": "x.csv", "column": "id", "header": "a,b"}),
                "kv_store.settings.header: the key column \"id\" is not one of",
            ),
            (json!({"file": 1, "column": "id"}), "kv_store.settings.file"),
        ] {
            let e = config_error(json!({"type": "csv_file", "settings": settings}));
            assert!(e.contains(want), "{e}");
        }
    }
}
