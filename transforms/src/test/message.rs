//! `test_message`: on ctrl, emits a data message holding `value`, then the ctrl. It seeds
//! the inputs of config `tests:`.
//!
//! Substation compatibility: the same setting (`value`, any JSON; strings become the data
//! raw, other values their JSON text) and behaviour; data messages pass through unchanged.
//! Without a `value` (or with null) the message is empty, as Substation's is.

use serde::Deserialize;
use sluice_engine::{
    Build, ConfigError, Message, StatefulTransform, TransformError, Value, async_trait, value,
};

/// Settings of `test_message`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The data of the emitted message.
    pub value: Option<Value>,
}

/// The `test_message` transform.
pub(crate) struct TestMessage {
    data: Vec<u8>,
}

impl TestMessage {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let data = match s.value {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => value::to_bytes(&v),
        };
        Ok(TestMessage { data })
    }
}

#[async_trait]
impl StatefulTransform for TestMessage {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(Message::new(self.data.clone()));
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `test_message` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "test_message",
    aliases: &[],
    library: "sub.tf.test.message",
    summary: "on ctrl, emits a message holding `value` (seeds config tests)",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"value": 1}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            ("string raw", json!("hello"), "hello"),
            ("object as json", json!({"a": [1, 2]}), r#"{"a":[1,2]}"#),
            ("number", json!(1.5), "1.5"),
            ("bool", json!(true), "true"),
            ("empty string", json!(""), ""),
        ];
        for (name, value, want) in cases {
            let t = testing::build(
                &r,
                json!({"type": "test_message", "settings": {"value": value}}),
            )
            .unwrap();
            assert_eq!(testing::run(t, &[]).unwrap(), vec![want], "{name}");
        }
    }

    #[test]
    fn data_passes_and_ctrl_comes_after_the_value() {
        let p = testing::build_pipeline(
            &registry(),
            json!([
                {"type": "test_message", "settings": {"value": "a"}},
                {"type": "test_message", "settings": {"value": "b"}},
            ]),
        )
        .unwrap();
        assert_eq!(
            testing::run_pipeline(&p, &["in"]).unwrap(),
            vec!["in", "a", "b"]
        );
    }

    #[test]
    fn without_value_the_message_is_empty() {
        for settings in [json!({}), json!({"value": null})] {
            let t = testing::build(
                &registry(),
                json!({"type": "test_message", "settings": settings}),
            )
            .unwrap();
            assert_eq!(testing::run(t, &[]).unwrap(), vec![""], "{settings}");
        }
    }
}
