//! `meta_for_each`: runs every element of an array through an inner list and collects what
//! comes out into a new array.
//!
//! Each element of the array at `object.source_key` becomes a data message (strings as
//! their text, objects and arrays as JSON, other values as their JSON text) carrying the
//! input's metadata and acknowledgement tokens; the elements cross the inner list together,
//! in order, and the data of every output is collected, in order, into an array written at
//! `object.target_key` (JSON objects and arrays as JSON values, anything else as with any
//! bytes written to a key: a string). A missing or non-array source value passes the
//! message through. A ctrl message goes through the inner list, and what that flushes comes
//! out ahead of the ctrl (as separate messages, as in Substation).
//!
//! Substation compatibility: the same settings and results, except that an empty array
//! gives an empty array at the target (Substation writes `null`), and that the elements run
//! through the list as one batch rather than one by one.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Body, Build, ConfigError, Key, Message, OutputsReach, Pipeline, TransformError, Value, Wrapper,
    async_trait, value,
};

use super::{push_with_one_ctrl, required_pipeline};

/// Settings of `meta_for_each`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` (the array; required) and `target_key` (the result; required).
    pub object: ObjectSettings,
    /// The inner list (at least one transform).
    pub transforms: Value,
}

/// The `meta_for_each` transform.
pub(crate) struct MetaForEach {
    source: Key,
    target: Key,
    inner: Pipeline,
}

impl MetaForEach {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let source = b
            .opt_key("object.source_key", &s.object.source_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.source_key",
                    "missing required option: the array to iterate",
                )
            })?;
        let target = b
            .opt_key("object.target_key", &s.object.target_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.target_key",
                    "missing required option: where the results go",
                )
            })?;
        let inner = required_pipeline(b, "transforms", &s.transforms)?;
        Ok(MetaForEach {
            source,
            target,
            inner,
        })
    }
}

/// The message body of one element: Substation gives an element's text (GJSON `String()`).
fn element_body(v: Value) -> Body {
    match v {
        Value::String(s) => Body::from_bytes(s.into_string().into_bytes()),
        v @ (Value::Object(_) | Value::Array(_)) => Body::from_value(v),
        other => Body::from_bytes(value::to_text(&other).into_owned().into_bytes()),
    }
}

/// The value an output contributes to the result array.
fn output_value(m: &Message) -> Value {
    match m.data_value() {
        Some(v @ (Value::Object(_) | Value::Array(_))) => v.clone(),
        _ => value::from_bytes(m.data()),
    }
}

#[async_trait]
impl Wrapper for MetaForEach {
    fn wraps(&self) -> &[Pipeline] {
        std::slice::from_ref(&self.inner)
    }

    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            let outs = self.inner.apply(vec![msg.clone()]).await?;
            push_with_one_ctrl(outs, msg, out);
            return Ok(());
        }
        let elements = match msg.get(&self.source).map(|v| v.into_owned()) {
            Some(Value::Array(a)) => a,
            _ => {
                out.push(msg);
                return Ok(());
            }
        };
        let items: Vec<Message> = elements
            .into_iter()
            .map(|e| msg.derive(element_body(e)))
            .collect();
        let results: Vec<Value> = if items.is_empty() {
            Vec::new()
        } else {
            self.inner
                .apply(items)
                .await?
                .iter()
                .filter(|m| !m.is_ctrl())
                .map(output_value)
                .collect()
        };
        msg.set(&self.target, Value::Array(results.into()))?;
        out.push(msg);
        Ok(())
    }

    /// Not passed on: what the inner list emits is gathered into the message it came from,
    /// which goes on.
    fn outputs_reach(&self, _reach: OutputsReach) {}
}

impl MetaForEach {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.inner.is_stateful();
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// What registers the `meta_for_each` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_for_each",
    aliases: &[],
    library: "sub.tf.meta.for_each",
    summary: "runs each element of an array through inner transforms",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"object": {"source_key": "a", "target_key": "b"}, "transforms": [{"type": "string_to_upper"}]}"#,
};

#[cfg(test)]
mod tests {
    use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};
    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Pipeline, Value, json, testing};

    fn for_each(inner: Value) -> Value {
        json!({"type": "meta_for_each", "settings": {
            "object": {"source_key": "a", "target_key": "b"}, "transforms": inner}})
    }

    #[test]
    fn cases() {
        let r = registry();
        let suffix = json!([{"type": "fixture_suffix", "settings": {"suffix": "!"}}]);
        let cases = [
            (
                "strings",
                suffix.clone(),
                r#"{"a":["x","y"]}"#,
                r#"{"a":["x","y"],"b":["x!","y!"]}"#,
            ),
            (
                "numbers become text, outputs that are not JSON objects stay strings",
                suffix.clone(),
                r#"{"a":[1,2.5,true]}"#,
                r#"{"a":[1,2.5,true],"b":["1!","2.5!","true!"]}"#,
            ),
            (
                "objects are JSON in and out",
                json!([{"type": "object_copy", "settings": {"object": {"source_key": "k", "target_key": "c"}}}]),
                r#"{"a":[{"k":1},{"k":{"z":2}}]}"#,
                r#"{"a":[{"k":1},{"k":{"z":2}}],"b":[{"k":1,"c":1},{"k":{"z":2},"c":{"z":2}}]}"#,
            ),
            (
                "wrapped text becomes an object",
                json!([{"type": "object_copy", "settings": {"object": {"target_key": "v"}}}]),
                r#"{"a":["p",7]}"#,
                r#"{"a":["p",7],"b":[{"v":"p"},{"v":"7"}]}"#,
            ),
            (
                "drops leave gaps out",
                json!([
                    {"type": "meta_switch", "settings": {"cases": [{
                        "condition": {"type": "fixture_contains", "settings": {"value": "x"}},
                        "transforms": [{"type": "utility_drop"}]}]}},
                ]),
                r#"{"a":["x","y","xx","z"]}"#,
                r#"{"a":["x","y","xx","z"],"b":["y","z"]}"#,
            ),
            (
                "empty array",
                suffix.clone(),
                r#"{"a":[]}"#,
                r#"{"a":[],"b":[]}"#,
            ),
            (
                "not an array passes",
                suffix.clone(),
                r#"{"a":"x"}"#,
                r#"{"a":"x"}"#,
            ),
            ("missing passes", suffix.clone(), r#"{"c":1}"#, r#"{"c":1}"#),
            ("not JSON passes", suffix, "plain", "plain"),
        ];
        for (name, inner, input, want) in cases {
            let t = testing::build(&r, for_each(inner)).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), vec![want], "{name}");
        }
    }

    #[test]
    fn elements_carry_the_metadata_and_the_tokens() {
        let r = registry();
        let t = testing::build(
            &r,
            for_each(json!([{"type": "object_copy", "settings": {"object": {"source_key": "meta m", "target_key": "m"}}}])),
        )
        .unwrap();
        let (mut m, tracker) = tracked(r#"{"a":[{"k":1},{"k":2}]}"#);
        m.set_metadata(&br#"{"m":"v"}"#[..]);
        let p = Pipeline::new(vec![("fe", t)]);
        let out = testing::block_on(p.apply(vec![m])).unwrap();
        assert_eq!(
            datas(&out),
            vec![r#"{"a":[{"k":1},{"k":2}],"b":[{"k":1,"m":"v"},{"k":2,"m":"v"}]}"#]
        );
        assert_eq!(&out[0].metadata()[..], br#"{"m":"v"}"#);
        drop(out);
        assert_status(&tracker, AckStatus::Delivered, "all copies released");

        // A send inside the loop holds the element copies until ctrl.
        let t = testing::build(
            &r,
            for_each(json!([{"type": "fixture_send", "settings": {"name": "fe-send"}}])),
        )
        .unwrap();
        assert!(t.is_stateful());
        let p = Pipeline::new(vec![("fe", t)]);
        let (m, tracker) = tracked(r#"{"a":["x","y"]}"#);
        drop(testing::block_on(p.apply(vec![m])).unwrap());
        assert_status(&tracker, AckStatus::Pending, "elements held by the send");
        let out = testing::block_on(p.apply(vec![Message::ctrl()])).unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0].is_ctrl());
        assert_eq!(journal("fe-send"), vec!["sent:x", "sent:y"]);
        assert_status(&tracker, AckStatus::Delivered, "elements sent");
    }

    #[test]
    fn ctrl_goes_through_the_inner_list() {
        let r = registry();
        let t = testing::build(
            &r,
            for_each(json!([{"type": "fixture_record", "settings": {"name": "fe-ctrl", "emit_on_ctrl": "flushed"}}])),
        )
        .unwrap();
        let p = Pipeline::new(vec![("fe", t)]);
        let out =
            testing::block_on(p.apply(vec![Message::new(&br#"{"a":["x"]}"#[..]), Message::ctrl()]))
                .unwrap();
        assert_eq!(datas(&out), vec![r#"{"a":["x"],"b":["x"]}"#, "flushed"]);
        assert_eq!(out.iter().filter(|m| m.is_ctrl()).count(), 1);
        assert!(out.last().unwrap().is_ctrl());
        assert_eq!(journal("fe-ctrl"), vec!["x", "<ctrl>"]);
    }

    #[test]
    fn errors_name_the_inner_transform() {
        let r = registry();
        let t = testing::build(
            &r,
            for_each(
                json!([{"type": "utility_err", "settings": {"id": "inner_err", "message": "no"}}]),
            ),
        )
        .unwrap();
        let p = Pipeline::new(vec![("fe", t)]);
        let (m, tracker) = tracked(r#"{"a":["x"]}"#);
        let err = testing::block_on(p.apply(vec![m])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "transforms[0].settings.transforms[0] (utility_err, id inner_err): no"
        );
        assert_status(&tracker, AckStatus::Failed, "an element failed");
    }

    #[test]
    fn config_errors_name_the_field() {
        let r = registry();
        let inner = json!([{"type": "utility_drop"}]);
        let cases = [
            (
                json!({"object": {"target_key": "b"}, "transforms": inner}),
                "settings.object.source_key: missing required option",
            ),
            (
                json!({"object": {"source_key": "a"}, "transforms": inner}),
                "settings.object.target_key: missing required option",
            ),
            (
                json!({"object": {"source_key": "a", "target_key": "b"}}),
                "settings.transforms: missing required option",
            ),
            (
                json!({"object": {"source_key": "a", "target_key": "b"}, "transforms": []}),
                "settings.transforms: at least one transform",
            ),
        ];
        for (settings, want) in cases {
            let err = testing::build(&r, json!({"type": "meta_for_each", "settings": settings}))
                .err()
                .unwrap_or_else(|| panic!("{want} should fail"))
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn compliance() {
        let r = registry();
        for inner in [
            json!([{"type": "fixture_suffix", "settings": {"suffix": "!"}}]),
            json!([{"type": "fixture_record", "settings": {"name": "fe-compliance"}}]),
        ] {
            testing::check_compliance(testing::build(&r, for_each(inner)).unwrap());
        }
    }
}
