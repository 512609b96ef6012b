//! `object_copy`: copies a value from one key to another, extracts a value as the new data,
//! or wraps the data into a new object.
//!
//! Substation compatibility: the same three modes. Source only: the data is replaced by the
//! value (strings raw, other values as JSON), e.g. `meta @this` extracts the metadata.
//! Target only: the data is put under the target key of a new object (JSON objects and
//! arrays as they are, other data as a string); empty data passes through. Both: the value
//! is copied, across data and metadata if the keys say so. A missing source passes through.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, Key, MapTransform, Message, TransformError, Value, value,
};

/// Settings of `object_copy`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and/or `target_key`.
    pub object: ObjectSettings,
}

/// The `object_copy` transform.
pub(crate) struct ObjectCopy {
    source: Option<Key>,
    target: Option<Key>,
}

impl ObjectCopy {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectCopy {
            source: b.opt_key("object.source_key", &s.object.source_key)?,
            target: b.opt_key("object.target_key", &s.object.target_key)?,
        })
    }
}

impl MapTransform for ObjectCopy {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectCopy {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        match (&self.source, &self.target) {
            (Some(src), Some(trg)) => {
                if let Some(v) = msg.get(src).map(|v| v.into_owned()) {
                    msg.set(trg, v)?;
                }
            }
            (Some(src), None) => {
                if let Some(v) = msg.get(src).map(|v| v.into_owned()) {
                    match v {
                        Value::String(s) => msg.set_data(s.into_bytes()),
                        other => msg.set_data_value(other),
                    }
                }
            }
            (None, Some(trg)) => {
                if !msg.data_body().is_empty() {
                    let v = match msg.data_value() {
                        // Move the parsed document into the new one instead of copying it.
                        Some(Value::Object(_) | Value::Array(_)) => {
                            msg.take_data_value().expect("parsed above")
                        }
                        _ => value::from_bytes(msg.data()),
                    };
                    let mut wrapped = Value::Object(Default::default());
                    trg.path().set(&mut wrapped, v)?;
                    msg.set_data_value(wrapped);
                }
            }
            (None, None) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "copy",
                json!({"object": {"source_key": "a", "target_key": "b"}}),
                r#"{"a":{"x":1}}"#,
                vec![r#"{"a":{"x":1},"b":{"x":1}}"#],
            ),
            (
                "missing source passes",
                json!({"object": {"source_key": "z", "target_key": "b"}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
            (
                "extract string",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":"hi"}"#,
                vec!["hi"],
            ),
            (
                "extract object",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":{"b":2}}"#,
                vec![r#"{"b":2}"#],
            ),
            (
                "wrap object",
                json!({"object": {"target_key": "x.y"}}),
                r#"{"a":1}"#,
                vec![r#"{"x":{"y":{"a":1}}}"#],
            ),
            (
                "wrap text",
                json!({"object": {"target_key": "x"}}),
                "plain",
                vec![r#"{"x":"plain"}"#],
            ),
            (
                "wrap empty passes",
                json!({"object": {"target_key": "x"}}),
                "",
                vec![""],
            ),
            (
                "to metadata and back",
                json!({"object": {"source_key": "a", "target_key": "meta a"}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "object_copy", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }
}
