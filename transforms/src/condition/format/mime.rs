//! `format_mime`: the sniffed media type of the data equals `type`.
//!
//! Substation compatibility: the same sniffer (see [`super::sniff`]), so the names to
//! compare against are Substation's, e.g. `application/x-gzip`, `application/x-zstd`,
//! `text/plain; charset=utf-8` (which JSON text also is), `application/octet-stream`. The
//! comparison is exact. `type` is required. `object` is ignored, as in Substation: the whole
//! data is sniffed.

use serde::Deserialize;
use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::sniff::sniff;

/// Settings of `format_mime`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The media type to match, e.g. `application/x-gzip`.
    #[serde(rename = "type")]
    pub type_: String,
}

/// The `format_mime` condition.
pub(crate) struct FormatMime {
    media_type: String,
}

impl FormatMime {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.type_.is_empty() {
            return Err(b.field_error(
                "type",
                "missing required option: the media type to match, e.g. \"application/x-gzip\"",
            ));
        }
        Ok(FormatMime {
            media_type: s.type_,
        })
    }
}

impl Condition for FormatMime {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        Ok(!msg.is_ctrl() && sniff(msg.data()) == self.media_type)
    }
}

/// What registers the `format_mime` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_mime",
    aliases: &[],
    library: "sub.cnd.fmt.mime",
    summary: "the sniffed media type of the data equals `type`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"type": "application/json"}"#,
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::{Message, json};

    #[test]
    fn cases() {
        let gz = json!({"type": "application/x-gzip"});
        let text = json!({"type": "text/plain; charset=utf-8"});
        let bin = |b: &[u8]| Message::new(b.to_vec());
        run_table(
            "format_mime",
            vec![
                ("gzip", gz.clone(), bin(b"\x1f\x8b\x08\x00\x00\x00"), T),
                ("text is not gzip", gz.clone(), data("hello"), F),
                ("json is text", text.clone(), data(r#"{"a":1}"#), T),
                (
                    "binary is not text",
                    text.clone(),
                    bin(b"\x00\x01\x02\x03\x04"),
                    F,
                ),
                (
                    "zstd has Substation's name",
                    json!({"type": "application/x-zstd"}),
                    bin(b"\x28\xb5\x2f\xfd\x00"),
                    T,
                ),
                (
                    "object is ignored: the data is sniffed",
                    json!({"type": "application/pdf", "object": {"source_key": "a"}}),
                    data("%PDF-1.4"),
                    T,
                ),
                (
                    "comparison is exact",
                    json!({"type": "text/plain"}),
                    data("hello"),
                    F,
                ),
            ],
        );
        ctrl_is_false("format_mime", text);
    }

    #[test]
    fn config_errors() {
        config_error("format_mime", json!({}), "type");
        config_error("format_mime", json!({"type": ""}), "type");
        config_error("format_mime", json!({"type": 3}), "type");
    }
}
