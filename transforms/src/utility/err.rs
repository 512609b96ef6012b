//! `utility_err`: fails every data message with an error whose text is exactly `message`.
//!
//! Substation compatibility: the same; used to test error handling (`meta_err`,
//! `meta_retry`). As with every transform, the pipeline prefixes the error with
//! `transform <id>: ` on its way out (what a user reads); the error itself is the configured
//! text, and it is that text alone that `meta_err` and `meta_retry` match, as Substation's
//! `utility_err` returns its message with no layer of its own. Ctrl messages pass.

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

/// Settings of `utility_err`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The error text.
    pub message: String,
}

/// The `utility_err` transform.
pub(crate) struct UtilityErr {
    message: String,
}

impl UtilityErr {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(UtilityErr { message: s.message })
    }
}

#[async_trait]
impl StatelessTransform for UtilityErr {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
            return Ok(());
        }
        Err(TransformError::Raised(self.message.clone()))
    }
}

/// What registers the `utility_err` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_err",
    aliases: &[],
    library: "sub.tf.util.err",
    summary: "fails every data message with a fixed error",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"message": "x"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn fails_with_exactly_the_message() {
        let r = registry();
        for message in ["boom", "disk full: /tmp", ""] {
            let t = testing::build(
                &r,
                json!({"type": "utility_err", "settings": {"message": message}}),
            )
            .unwrap();
            let err = testing::run(t, &["x"]).unwrap_err();
            assert_eq!(err.root().to_string(), message);
            assert_eq!(err.to_string(), format!("transform under_test: {message}"));
        }
    }

    #[test]
    fn ctrl_passes() {
        let t = testing::build(
            &registry(),
            json!({"type": "utility_err", "settings": {"message": "x"}}),
        )
        .unwrap();
        assert_eq!(testing::run(t, &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn config_errors_name_the_field() {
        let err = testing::build(
            &registry(),
            json!({"type": "utility_err", "settings": {"message": 1}}),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("settings.message"), "{err}");
    }
}
