//! `array_zip`: transposes an array of arrays (`[[1,2],[3,4]]` becomes `[[1,3],[2,4]]`).
//!
//! Substation compatibility: the i-th output array holds the i-th element of every input
//! element, in order. Input elements are read as GJSON reads arrays: an array is its
//! elements, null is empty, and any other value counts as a one-element array. With uneven
//! lengths the i-th output holds the i-th elements of the inputs that have one
//! (`[[1,2,3],[4]]` becomes `[[1,4],[2],[3]]`). A value that is not an array, or a missing
//! source, passes the message through unchanged. Object mode needs both
//! `object.source_key` and `object.target_key`; data mode (neither) zips data that is a
//! JSON array.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, MapTransform, Message, TransformError, Value};

use crate::common::Io;

/// Settings of `array_zip`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `array_zip` transform.
pub(crate) struct ArrayZip {
    io: Io,
}

impl ArrayZip {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ArrayZip {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The transposition of `rows`.
fn zip(rows: &[Value]) -> Vec<Value> {
    let mut columns: Vec<Vec<Value>> = Vec::new();
    for row in rows {
        let items: &[Value] = match row {
            Value::Array(a) => a,
            Value::Null => &[],
            other => std::slice::from_ref(other),
        };
        for (i, item) in items.iter().enumerate() {
            if columns.len() <= i {
                columns.push(Vec::new());
            }
            columns[i].push(item.clone());
        }
    }
    columns.into_iter().map(Value::from).collect()
}

impl MapTransform for ArrayZip {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ArrayZip {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let zipped = match crate::object::read_json(&self.io, msg).as_deref() {
            Some(Value::Array(rows)) => Some(zip(rows)),
            _ => None,
        };
        if let Some(z) = zipped {
            self.io.write(msg, Value::Array(z.into()))?;
        }
        Ok(())
    }
}

/// What registers the `array_zip` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "array_zip",
    aliases: &[],
    library: "sub.tf.arr.zip",
    summary: "transposes an array of arrays",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}});
        let cases = [
            (
                "two by two",
                obj.clone(),
                r#"{"a":[[1,2],[3,4]]}"#,
                r#"{"a":[[1,2],[3,4]],"b":[[1,3],[2,4]]}"#,
            ),
            (
                "three rows of mixed values",
                obj.clone(),
                r#"{"a":[["x","y"],[true,null],[{"c":1},[2]]]}"#,
                r#"{"a":[["x","y"],[true,null],[{"c":1},[2]]],"b":[["x",true,{"c":1}],["y",null,[2]]]}"#,
            ),
            (
                "uneven lengths",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":[[1,2,3],[4]]}"#,
                r#"{"a":[[1,4],[2],[3]]}"#,
            ),
            (
                "scalar elements count as one-element arrays",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":[[1,2],5,null]}"#,
                r#"{"a":[[1,5],[2]]}"#,
            ),
            (
                "empty array",
                obj.clone(),
                r#"{"a":[]}"#,
                r#"{"a":[],"b":[]}"#,
            ),
            (
                "non-array passes",
                obj.clone(),
                r#"{"a":{"c":1}}"#,
                r#"{"a":{"c":1}}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"c":1}"#,
                r#"{"c":1}"#,
            ),
            (
                "data mode",
                json!({}),
                r#"[["a","b"],["c","d"]]"#,
                r#"[["a","c"],["b","d"]]"#,
            ),
            ("data mode non-JSON passes", json!({}), "a,b", "a,b"),
        ];
        testing::assert_single_outputs(&r, "array_zip", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "array_zip",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
