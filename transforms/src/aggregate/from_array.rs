//! `aggregate_from_array`: fans a JSON array out into one message per element.
//!
//! Substation compatibility: the same two modes. Without `object.source_key` the data is
//! the array and each element becomes the data of one message (strings raw, other values as
//! JSON), or, with `object.target_key`, the only field of a new object at that key. With `object.source_key`, the array is removed from the object and each output is
//! the remaining object plus the element: an object element's fields are merged into it, or
//! the element is placed at `object.target_key` when that is set. Every output keeps the
//! input's metadata and acknowledgement tokens. An empty array produces no message. As in
//! Substation (GJSON's `Array()`), a value that is not an array is read as an array of
//! itself: a source object is merged (or placed at `target_key`), and so is data that is
//! not an array. A missing or null value passes through. Difference: a non-object element
//! with no `target_key` is an error naming the setting instead of a silently malformed
//! output.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Body, Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait,
    value,
};

/// Settings of `aggregate_from_array`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` (where the array is) and `target_key` (where each element goes).
    pub object: ObjectSettings,
}

/// The `aggregate_from_array` transform.
pub(crate) struct AggregateFromArray {
    source: Option<Key>,
    target: Option<Key>,
}

impl AggregateFromArray {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let source = b.opt_key("object.source_key", &s.object.source_key)?;
        let target = b.opt_key("object.target_key", &s.object.target_key)?;
        Ok(AggregateFromArray { source, target })
    }
}

#[async_trait]
impl StatelessTransform for AggregateFromArray {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let Some(src) = &self.source else {
            // GJSON's `Array()`: a value that is not an array is an array of itself.
            let single;
            let items: &[Value] = match msg.data_value() {
                Some(Value::Array(items)) => items,
                Some(Value::Null) => {
                    out.push(msg);
                    return Ok(());
                }
                Some(other) => std::slice::from_ref(other),
                None if self.target.is_some() => {
                    // Data that is not JSON is a string value (Substation's bytesToValue).
                    single = value::from_bytes(msg.data());
                    std::slice::from_ref(&single)
                }
                None => {
                    out.push(msg);
                    return Ok(());
                }
            };
            for v in items {
                let body = match &self.target {
                    Some(trg) => {
                        let mut o = msg.derive(Body::from_value(Value::Object(Default::default())));
                        o.set(trg, v.clone())?;
                        out.push(o);
                        continue;
                    }
                    None => Body::from_bytes(value::to_bytes(v)),
                };
                out.push(msg.derive(body));
            }
            return Ok(());
        };
        let items = match msg.get(src).map(|v| v.into_owned()) {
            Some(Value::Array(items)) => items.into_vec(),
            None | Some(Value::Null) => {
                out.push(msg);
                return Ok(());
            }
            Some(other) => vec![other],
        };
        let mut rest = msg.clone();
        rest.delete(src)?;
        let base = rest
            .data_value()
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        for (i, v) in items.into_iter().enumerate() {
            match (&self.target, v) {
                (Some(trg), v) => {
                    let mut o = msg.derive(Body::from_value(base.clone()));
                    o.set(trg, v)?;
                    out.push(o);
                }
                (None, Value::Object(fields)) => {
                    let mut doc = base.clone();
                    let Value::Object(obj) = &mut doc else {
                        return Err(TransformError::failed(
                            "cannot merge an element into data that is not a JSON object",
                        ));
                    };
                    for (k, fv) in fields {
                        obj.insert(k, fv);
                    }
                    out.push(msg.derive(Body::from_value(doc)));
                }
                (None, other) => {
                    return Err(TransformError::failed(format!(
                        "element {i} of {:?} is {}, not an object: set object.target_key to place it",
                        src.as_str(),
                        kind(&other)
                    )));
                }
            }
        }
        Ok(())
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What registers the `aggregate_from_array` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "aggregate_from_array",
    aliases: &[],
    library: "sub.tf.agg.from.arr",
    summary: "one message per element of a JSON array",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::{Message, json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "data array",
                json!({}),
                r#"[1,"a",{"b":2},[3]]"#,
                vec!["1", "a", r#"{"b":2}"#, "[3]"],
            ),
            ("empty array", json!({}), "[]", vec![]),
            (
                "data not an array: an array of itself",
                json!({}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
            ("not json passes", json!({}), "text", vec!["text"]),
            ("null data passes", json!({}), "null", vec!["null"]),
            (
                "data not an array, into target_key",
                json!({"object": {"target_key": "v"}}),
                r#"{"a":1}"#,
                vec![r#"{"v":{"a":1}}"#],
            ),
            (
                "data not json, into target_key: a string",
                json!({"object": {"target_key": "v"}}),
                "text",
                vec![r#"{"v":"text"}"#],
            ),
            (
                "data array into target_key",
                json!({"object": {"target_key": "v"}}),
                r#"[1,"a",{"b":2}]"#,
                vec![r#"{"v":1}"#, r#"{"v":"a"}"#, r#"{"v":{"b":2}}"#],
            ),
            (
                "data array into a nested target_key",
                json!({"object": {"target_key": "x.y"}}),
                r#"["a"]"#,
                vec![r#"{"x":{"y":"a"}}"#],
            ),
            (
                "merge objects",
                json!({"object": {"source_key": "e"}}),
                r#"{"id":1,"e":[{"x":1},{"x":2,"id":9}]}"#,
                vec![r#"{"id":1,"x":1}"#, r#"{"id":9,"x":2}"#],
            ),
            (
                "place at target",
                json!({"object": {"source_key": "e", "target_key": "v"}}),
                r#"{"id":1,"e":["a","b"]}"#,
                vec![r#"{"id":1,"v":"a"}"#, r#"{"id":1,"v":"b"}"#],
            ),
            (
                "missing source passes",
                json!({"object": {"source_key": "z", "target_key": "v"}}),
                r#"{"id":1}"#,
                vec![r#"{"id":1}"#],
            ),
            (
                "source not an array: an array of itself",
                json!({"object": {"source_key": "id", "target_key": "v"}}),
                r#"{"id":1}"#,
                vec![r#"{"v":1}"#],
            ),
            (
                "source object, not an array: merged",
                json!({"object": {"source_key": "e"}}),
                r#"{"id":1,"e":{"x":2}}"#,
                vec![r#"{"id":1,"x":2}"#],
            ),
            (
                "null source passes",
                json!({"object": {"source_key": "e", "target_key": "v"}}),
                r#"{"id":1,"e":null}"#,
                vec![r#"{"id":1,"e":null}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t = testing::build(
                &r,
                json!({"type": "aggregate_from_array", "settings": settings}),
            )
            .unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn errors() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "aggregate_from_array", "settings": {"object": {"source_key": "e"}}}),
        )
        .unwrap();
        let e = testing::run(t, &[r#"{"e":[1]}"#]).unwrap_err().to_string();
        assert!(e.contains("target_key"), "{e}");
    }

    #[test]
    fn outputs_keep_metadata_and_acks() {
        let t = testing::build(&registry(), json!({"type": "aggregate_from_array"})).unwrap();
        let (tr, tok) = AckTracker::new();
        let mut m = Message::new(&b"[1,2]"[..]);
        m.set_metadata(&br#"{"src":"s3"}"#[..]);
        m.add_ack(tok);
        let mut out = Vec::new();
        testing::block_on(t.transform(m, &mut out)).unwrap();
        assert_eq!(out.len(), 2);
        for o in &out {
            assert_eq!(&o.metadata()[..], br#"{"src":"s3"}"#);
            assert_eq!(o.acks().len(), 1);
        }
        drop(out.pop());
        assert_eq!(tr.status(), AckStatus::Pending, "one output still holds it");
        drop(out);
        assert_eq!(tr.status(), AckStatus::Delivered);
    }
}
