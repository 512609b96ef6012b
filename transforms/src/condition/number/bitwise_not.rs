//! `number_bitwise_not`: the bitwise NOT of the input is not zero, i.e. the input is not −1
//! (all bits set).
//!
//! Substation compatibility: the same; it takes no `value`. Data mode parses the data as an
//! integer (an error when it is not one); object mode reads GJSON's `Int()` of the value. A
//! missing source value is 0 (so the condition holds), as in Substation.

use serde::Deserialize;
use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::read_i64;
use crate::condition::{Source, SourceSettings};

/// Settings of `number_bitwise_not`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key`: where the input is read; absent means the data.
    pub object: SourceSettings,
}

/// The `number_bitwise_not` condition.
pub(crate) struct NumberBitwiseNot {
    source: Source,
}

impl NumberBitwiseNot {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(NumberBitwiseNot {
            source: Source::new(b, &s.object.source_key)?,
        })
    }
}

impl Condition for NumberBitwiseNot {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        Ok(read_i64(&self.source, msg, "number_bitwise_not")?.is_some_and(|v| !v != 0))
    }
}

/// What registers the `number_bitwise_not` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "number_bitwise_not",
    aliases: &[],
    library: "sub.cnd.num.bitwise.not",
    summary: "NOT input ≠ 0 (input is not −1)",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::{Want::*, *};
    use sluice_engine::json;

    #[test]
    fn cases() {
        let src = json!({"object": {"source_key": "n"}});
        run_table(
            "number_bitwise_not",
            vec![
                ("data zero", json!({}), data("0"), T),
                ("data positive", json!({}), data("7"), T),
                ("data minus one", json!({}), data("-1"), F),
                ("data not an integer is an error", json!({}), data("x"), Err),
                ("object minus one", src.clone(), data(r#"{"n":-1}"#), F),
                ("object value", src.clone(), data(r#"{"n":12}"#), T),
                (
                    "object string minus one",
                    src.clone(),
                    data(r#"{"n":"-1"}"#),
                    F,
                ),
                ("missing key is 0", src.clone(), data(r#"{"m":0}"#), T),
            ],
        );
        ctrl_is_false("number_bitwise_not", json!({}));
    }

    #[test]
    fn config_errors() {
        config_error("number_bitwise_not", json!({"object": 1}), "object");
        config_error(
            "number_bitwise_not",
            json!({"object": {"source_key": []}}),
            "object.source_key",
        );
    }
}
