//! `object_delete`: deletes the value at a key of the data or the metadata.
//!
//! Substation compatibility: `object.source_key` is required (the key to delete); a missing
//! key, or data that is not JSON, passes the message through unchanged. Metadata keys
//! (`meta x`) are deleted from the metadata.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, InPlace, Key, MapTransform, Message, TransformError};

/// Settings of `object_delete`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key`: the key to delete (required).
    pub object: ObjectSettings,
}

/// The `object_delete` transform.
pub(crate) struct ObjectDelete {
    source: Key,
}

impl ObjectDelete {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let source = b
            .opt_key("object.source_key", &s.object.source_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.source_key",
                    "missing required option: the key to delete",
                )
            })?;
        Ok(ObjectDelete { source })
    }
}

impl MapTransform for ObjectDelete {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectDelete {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        if msg.get(&self.source).is_some() {
            msg.delete(&self.source)?;
        }
        Ok(())
    }
}

/// What registers the `object_delete` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_delete",
    aliases: &[],
    library: "sub.tf.obj.del",
    summary: "deletes a key",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"object": {"source_key": "a"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "delete top-level key",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":1,"b":2}"#,
                vec![r#"{"b":2}"#],
            ),
            (
                "delete nested key",
                json!({"object": {"source_key": "a.b"}}),
                r#"{"a":{"b":1,"c":2}}"#,
                vec![r#"{"a":{"c":2}}"#],
            ),
            (
                "delete array element",
                json!({"object": {"source_key": "a.0"}}),
                r#"{"a":[1,2]}"#,
                vec![r#"{"a":[2]}"#],
            ),
            (
                "missing key passes",
                json!({"object": {"source_key": "z"}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
            (
                "non-JSON data passes",
                json!({"object": {"source_key": "a"}}),
                "plain text",
                vec!["plain text"],
            ),
            (
                "metadata key leaves the data alone",
                json!({"object": {"source_key": "meta a"}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "object_delete", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn deletes_from_metadata() {
        let r = registry();
        let p = testing::build_pipeline(
            &r,
            json!([
                {"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "meta a"}}},
                {"type": "object_delete", "settings": {"object": {"source_key": "meta a"}}},
                {"type": "object_copy", "settings": {"object": {"source_key": "meta a", "target_key": "b"}}},
            ]),
        )
        .unwrap();
        assert_eq!(
            testing::run_pipeline(&p, &[r#"{"a":1}"#]).unwrap(),
            vec![r#"{"a":1}"#]
        );
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "object_delete",
            &[
                (json!({}), "object.source_key"),
                (json!({"object": {"source_key": ""}}), "object.source_key"),
                (json!({"object": {"source_key": 3}}), "object.source_key"),
            ],
        );
    }
}
