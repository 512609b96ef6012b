//! `string_append`: appends a suffix to text.
//!
//! Substation compatibility: the suffix is `suffix`, or the text of the value at
//! `suffix_key` (read from the message each time; when it is missing the message passes
//! through unchanged). One of the two is required; when both are set `suffix_key` wins.
//! `suffix_key` needs object mode. Object mode (both `object.source_key` and
//! `object.target_key`) appends to the value's text (GJSON's `String()`) and writes a string;
//! a missing source passes the message through. Data mode (neither key) appends the suffix
//! to the raw data bytes (bytes that are not UTF-8 are kept as they are).

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait, value,
};

use crate::common::Io;

/// Settings of `string_append`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
    /// The text to append.
    pub suffix: String,
    /// A key whose value's text is appended instead (object mode only).
    pub suffix_key: Option<String>,
}

/// The `string_append` transform.
pub(crate) struct StringAppend {
    io: Io,
    suffix: String,
    suffix_key: Option<Key>,
}

impl StringAppend {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let io = Io::new(b, &s.object)?;
        let suffix_key = b.opt_key("suffix_key", &s.suffix_key)?;
        if s.suffix.is_empty() && suffix_key.is_none() {
            return Err(b.field_error(
                "suffix",
                "missing required option: set suffix (the text to append) or suffix_key",
            ));
        }
        if suffix_key.is_some() && matches!(io, Io::Data) {
            return Err(b.field_error(
                "suffix_key",
                "needs object.source_key and object.target_key (it reads the suffix from the message)",
            ));
        }
        Ok(StringAppend {
            io,
            suffix: s.suffix,
            suffix_key,
        })
    }
}

#[async_trait]
impl StatelessTransform for StringAppend {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let suffix = match &self.suffix_key {
            Some(k) => match msg.get(k) {
                Some(v) => value::to_text(&v).into_owned(),
                None => {
                    out.push(msg);
                    return Ok(());
                }
            },
            None => self.suffix.clone(),
        };
        match &self.io {
            Io::Object { .. } => {
                if let Some(text) = self.io.read_text(&msg) {
                    let appended = format!("{text}{suffix}");
                    self.io.write(&mut msg, Value::String(appended.into()))?;
                }
            }
            Io::Data => {
                let mut data = Vec::with_capacity(msg.data().len() + suffix.len());
                data.extend_from_slice(msg.data());
                data.extend_from_slice(suffix.as_bytes());
                msg.set_data(data);
            }
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `string_append` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_append",
    aliases: &[],
    library: "sub.tf.str.append",
    summary: "appends a fixed or looked-up suffix",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"suffix": "x"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Message, Pipeline, json, testing};
    use std::sync::Arc;

    #[test]
    fn cases() {
        let r = registry();
        let obj = json!({"object": {"source_key": "a", "target_key": "b"}, "suffix": "-x"});
        let by_key = json!({"object": {"source_key": "a", "target_key": "a"}, "suffix_key": "s"});
        let cases = [
            (
                "object mode",
                obj.clone(),
                r#"{"a":"v"}"#,
                r#"{"a":"v","b":"v-x"}"#,
            ),
            (
                "number as text",
                obj.clone(),
                r#"{"a":1.5}"#,
                r#"{"a":1.5,"b":"1.5-x"}"#,
            ),
            (
                "suffix from a key",
                by_key.clone(),
                r#"{"a":"v","s":"!"}"#,
                r#"{"a":"v!","s":"!"}"#,
            ),
            (
                "suffix_key wins over suffix",
                json!({"object": {"source_key": "a", "target_key": "a"}, "suffix": "?", "suffix_key": "s"}),
                r#"{"a":"v","s":1}"#,
                r#"{"a":"v1","s":1}"#,
            ),
            (
                "missing suffix_key value passes",
                by_key.clone(),
                r#"{"a":"v"}"#,
                r#"{"a":"v"}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":"v"}"#,
                r#"{"z":"v"}"#,
            ),
            (
                "non-JSON data with keys passes",
                obj.clone(),
                "plain",
                "plain",
            ),
            ("data mode", json!({"suffix": "\n"}), "line", "line\n"),
            ("data mode empty data", json!({"suffix": "x"}), "", "x"),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "string_append", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), vec![want], "{name}");
        }
    }

    #[test]
    fn data_mode_keeps_raw_bytes() {
        let t = testing::build(
            &registry(),
            json!({"type": "string_append", "settings": {"suffix": "!"}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let out = testing::block_on(p.apply(vec![Message::new(vec![0xff, b'a'])])).unwrap();
        assert_eq!(&out[0].data()[..], &[0xff, b'a', b'!']);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_append",
            &[
                (
                    json!({"object": {"source_key": "a"}, "suffix": "x"}),
                    "object.target_key",
                ),
                (
                    json!({"object": {"target_key": "a"}, "suffix": "x"}),
                    "object.source_key",
                ),
                (
                    json!({"object": {"source_key": "a", "target_key": "b"}}),
                    "settings.suffix",
                ),
                (json!({"suffix_key": "s"}), "settings.suffix_key"),
            ],
        );
    }
}
