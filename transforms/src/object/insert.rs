//! `object_insert`: writes a value from the settings at a key.
//!
//! Substation compatibility: `object.target_key` and `value` (any JSON) are required. The
//! value is inserted as the JSON value it is in the settings, with Substation's `SetValue`
//! typing: a string holding a JSON object or array (`"{\"a\":1}"`, `"[1]"`) is inserted as
//! that object or array, any other string (`"123"`, `"true"`) as a string; objects and arrays
//! are inserted as they are. Numbers are written as Go
//! writes them after decoding the settings: floats with an integral value become integers
//! (`1.0` is written `1`); integers keep every digit (Go would round ones beyond 2^53).
//! The target may be a metadata key (`meta x`). Inserting into data that is not JSON is an
//! error; empty data becomes a new object.

use serde::Deserialize;
use sluice_engine::settings::{AnyValue, ObjectSettings};
use sluice_engine::{
    Build, ConfigError, InPlace, Key, MapPlan, MapTransform, Message, Transform, TransformError,
    Value, value,
};

/// Settings of `object_insert`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `target_key`: where the value goes (required).
    pub object: ObjectSettings,
    /// The value to insert (required; `null` counts as missing, as in Substation).
    pub value: Option<AnyValue>,
}

/// The `object_insert` transform.
pub(crate) struct ObjectInsert {
    target: Key,
    value: Value,
}

impl ObjectInsert {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let target = b
            .opt_key("object.target_key", &s.object.target_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.target_key",
                    "missing required option: the key to write the value to",
                )
            })?;
        let value = s.value.ok_or_else(|| {
            b.field_error("value", "missing required option: the value to insert")
        })?;
        Ok(ObjectInsert {
            target,
            value: go_numbers(value),
        })
    }

    /// All it does is write a constant, which the pipeline may do with the copies and
    /// inserts next to it ([`MapPlan::Insert`]).
    pub(crate) fn into_transform(self) -> Transform {
        let plan = MapPlan::Insert {
            value: self.value.clone(),
            to: self.target.clone(),
        };
        Transform::map_doing(plan, self)
    }
}

/// Rewrites floats with an integral value as integers, recursively.
fn go_numbers(v: Value) -> Value {
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => value::number(n.as_f64().unwrap_or(0.0)),
        Value::Array(a) => Value::Array(a.into_iter().map(go_numbers).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, go_numbers(v))).collect()),
        other => other,
    }
}

impl MapTransform for ObjectInsert {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectInsert {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        msg.set(&self.target, self.value.clone())?;
        Ok(())
    }
}

/// What registers the `object_insert` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_insert",
    aliases: &[],
    library: "sub.tf.obj.insert",
    summary: "writes a fixed value at a key",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"object": {"target_key": "a"}, "value": {"b": 1}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{MapPlan, Transform, json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "string",
                json!({"object": {"target_key": "b"}, "value": "x"}),
                r#"{"a":1}"#,
                vec![r#"{"a":1,"b":"x"}"#],
            ),
            (
                "string holding a JSON object becomes the object",
                json!({"object": {"target_key": "b"}, "value": "{\"c\":1}"}),
                r#"{"a":1}"#,
                vec![r#"{"a":1,"b":{"c":1}}"#],
            ),
            (
                "string holding a JSON array becomes the array",
                json!({"object": {"target_key": "b"}, "value": "[1]"}),
                r#"{"a":1}"#,
                vec![r#"{"a":1,"b":[1]}"#],
            ),
            (
                "string holding a number stays a string",
                json!({"object": {"target_key": "b"}, "value": "123"}),
                r#"{"a":1}"#,
                vec![r#"{"a":1,"b":"123"}"#],
            ),
            (
                "object",
                json!({"object": {"target_key": "b.c"}, "value": {"d": [1, true, null]}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1,"b":{"c":{"d":[1,true,null]}}}"#],
            ),
            (
                "array appended with -1",
                json!({"object": {"target_key": "a.-1"}, "value": [3]}),
                r#"{"a":[1]}"#,
                vec![r#"{"a":[1,[3]]}"#],
            ),
            (
                "integral float becomes integer",
                json!({"object": {"target_key": "n"}, "value": {"x": 2.0, "y": 2.5}}),
                "{}",
                vec![r#"{"n":{"x":2,"y":2.5}}"#],
            ),
            (
                "large integer keeps its digits",
                json!({"object": {"target_key": "n"}, "value": 30400402455622563i64}),
                "{}",
                vec![r#"{"n":30400402455622563}"#],
            ),
            (
                "false is a value",
                json!({"object": {"target_key": "f"}, "value": false}),
                "",
                vec![r#"{"f":false}"#],
            ),
            (
                "replaces an existing value",
                json!({"object": {"target_key": "a"}, "value": 2}),
                r#"{"a":1}"#,
                vec![r#"{"a":2}"#],
            ),
            (
                "metadata target leaves data alone",
                json!({"object": {"target_key": "meta a"}, "value": 2}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "object_insert", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn non_json_data_is_an_error() {
        let t = testing::build(
            &registry(),
            json!({"type": "object_insert", "settings": {"object": {"target_key": "a"}, "value": 1}}),
        )
        .unwrap();
        let err = testing::run(t, &["not json"]).unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
    }

    #[test]
    fn config_errors() {
        let r = registry();
        for (settings, field) in [
            (json!({"value": 1}), "object.target_key"),
            (json!({"object": {"target_key": "a"}}), "value"),
            (
                json!({"object": {"target_key": "a"}, "value": null}),
                "value",
            ),
        ] {
            let err = testing::build(&r, json!({"type": "object_insert", "settings": settings}))
                .expect_err("a config error");
            assert!(
                err.to_string().contains(&format!("settings.{field}")),
                "{err}"
            );
        }
    }

    /// It says it only writes its constant, so the pipeline may fuse it with its neighbours.
    #[test]
    fn is_planned_as_an_insert() {
        let t = testing::build(
            &registry(),
            json!({"type": "object_insert", "settings": {"object": {"target_key": "a"}, "value": 1.0}}),
        )
        .unwrap();
        let Transform::Map(_, plan) = t else {
            panic!("a map transform")
        };
        match &*plan {
            MapPlan::Insert { value, to } => {
                assert_eq!((value, to.as_str()), (&json!(1), "a"));
            }
            other => panic!("{other:?}"),
        }
    }
}
