//! `string_to_snake`: converts text to snake_case.
//!
//! Substation compatibility: the words are split as Go's `strcase.ToSnake` (v0.3.0, which
//! Substation uses) splits them, byte by byte on ASCII: a `_` between a lower-case letter
//! or digit and what follows when case or digit-ness changes (`bC` → `b_c`, `A1B2` →
//! `a_1_b_2`), before the last capital of a run followed by a lower-case letter
//! (`HTTPServer` → `http_server`), and for each space, `_`, `-` and `.` (not collapsed:
//! `a  b` → `a__b`); surrounding white space is trimmed and other characters, non-ASCII
//! ones included, are kept as they are (`ÉCOLE` → `École`). No crate splits words this way
//! (`heck`, for one, drops punctuation and treats Unicode case). Object mode (both `object.source_key` and
//! `object.target_key`) converts the value's text (GJSON's `String()`) and writes a string
//! at the target; a missing source passes the message through. Data mode (neither key)
//! converts the whole data; bytes that are not UTF-8 are read as U+FFFD.

use compact_str::CompactString;
use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, Compute, ConfigError, InPlace, MapTransform, Message, TransformError, Value,
};

use crate::common::Io;

/// Settings of `string_to_snake`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// The `string_to_snake` transform.
pub(crate) struct StringToSnake {
    pub(super) io: Io,
}

impl StringToSnake {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(StringToSnake {
            io: Io::new(b, &s.object)?,
        })
    }
}

/// The conversion: `strcase.ToScreamingDelimited(s, '_', "", false)`.
fn convert(s: &str) -> CompactString {
    let b = s.trim().as_bytes();
    let mut out = Vec::with_capacity(b.len() + b.len() / 4);
    for (i, &byte) in b.iter().enumerate() {
        let cap = byte.is_ascii_uppercase();
        let low = byte.is_ascii_lowercase();
        let digit = byte.is_ascii_digit();
        let v = byte.to_ascii_lowercase();
        if let Some(&next) = b.get(i + 1) {
            let (n_cap, n_low, n_digit) = (
                next.is_ascii_uppercase(),
                next.is_ascii_lowercase(),
                next.is_ascii_digit(),
            );
            if (cap && (n_low || n_digit))
                || (low && (n_cap || n_digit))
                || (digit && (n_cap || n_low))
            {
                if cap && n_low && i > 0 && b[i - 1].is_ascii_uppercase() {
                    out.push(b'_');
                }
                out.push(v);
                if low || digit || n_digit {
                    out.push(b'_');
                }
                continue;
            }
        }
        out.push(if matches!(v, b' ' | b'_' | b'-' | b'.') {
            b'_'
        } else {
            v
        });
    }
    // Only ASCII bytes were changed, and only into ASCII: still UTF-8.
    String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        .into()
}

impl MapTransform for StringToSnake {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Compute for StringToSnake {
    fn compute(&self, read: &[&Value]) -> Result<Option<Value>, TransformError> {
        super::compute_text(read, convert)
    }
}

impl StringToSnake {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        super::map_text(&self.io, msg, convert)?;
        Ok(())
    }
}

/// What registers the `string_to_snake` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "string_to_snake",
    aliases: &[],
    library: "sub.tf.str.to.snake",
    summary: "converts text to snake_case",
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
        let data = json!({});
        let cases = [
            (
                "camel case",
                obj.clone(),
                r#"{"a":"helloWorld"}"#,
                r#"{"a":"helloWorld","b":"hello_world"}"#,
            ),
            (
                "mixed separators",
                obj.clone(),
                r#"{"a":"AnyKind of_string"}"#,
                r#"{"a":"AnyKind of_string","b":"any_kind_of_string"}"#,
            ),
            (
                "acronym",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"HTTPRequest"}"#,
                r#"{"a":"http_request"}"#,
            ),
            ("kebab", data.clone(), "user-agent", "user_agent"),
            // strcase v0.3.0's ToSnake, case by case.
            ("lower then upper", data.clone(), "bC", "b_c"),
            ("run of capitals", data.clone(), "HTTPServer", "http_server"),
            ("all capitals", data.clone(), "ID", "id"),
            ("digits", data.clone(), "A1B2", "a_1_b_2"),
            (
                "digit runs",
                data.clone(),
                "numbers2and55with000",
                "numbers_2_and_55_with_000",
            ),
            ("acronym then word", data.clone(), "JSONData", "json_data"),
            ("trailing acronym", data.clone(), "userID", "user_id"),
            ("capitals then lower", data.clone(), "AAAbbb", "aa_abbb"),
            ("leading digit", data.clone(), "1A2", "1_a_2"),
            ("trimmed", data.clone(), " Test Case ", "test_case"),
            (
                "separators not collapsed",
                data.clone(),
                "foo__bar",
                "foo__bar",
            ),
            ("spaces not collapsed", data.clone(), "  a  b  ", "a__b"),
            ("dots", data.clone(), "v2.8.0", "v_2_8_0"),
            ("mixed", data.clone(), "IPv6Address", "i_pv_6_address"),
            ("non-ASCII kept", data.clone(), "ÉCOLE", "École"),
            (
                "other punctuation kept",
                data.clone(),
                "user@Example.Com",
                "user@example_com",
            ),
            ("underscores kept", data.clone(), "__init__", "__init__"),
            (
                "digit in a word",
                data.clone(),
                "HTTP2Server",
                "http_2_server",
            ),
            (
                "data mode",
                data.clone(),
                "SourceIPAddress",
                "source_ip_address",
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"z":"Q"}"#,
                r#"{"z":"Q"}"#,
            ),
            (
                "non-JSON data with keys passes",
                obj.clone(),
                "Plain Text",
                "Plain Text",
            ),
        ];
        testing::assert_single_outputs(&r, "string_to_snake", &cases);
    }

    #[test]
    fn config_errors() {
        let r = registry();
        testing::assert_config_errors(
            &r,
            "string_to_snake",
            &[
                (json!({"object": {"source_key": "a"}}), "object.target_key"),
                (json!({"object": {"target_key": "a"}}), "object.source_key"),
            ],
        );
    }
}
