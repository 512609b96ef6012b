//! `object_copy`: copies a value from one key to another, extracts a value as the new data,
//! or wraps the data into a new object.
//!
//! Substation compatibility: the same three modes. Source only: the data is replaced by the
//! value's text (GJSON `String()`: strings raw, null empty, other values as JSON), e.g.
//! `meta @this` extracts the metadata, `meta k` makes metadata key `k` the data. Target
//! only: the data is put under the target key of a new object (JSON objects and arrays as
//! they are, other data as a string, bytes that are not UTF-8 as base64); with a `meta `
//! target the data goes into that metadata key and the data becomes empty, as Substation's
//! new message has none. Empty data passes through. Both: the value is copied, across data
//! and metadata if the keys say so, with `SetValue`'s typing (a string holding a JSON object
//! or array becomes that value, so copying a key to itself parses it). A missing source
//! passes through.

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, Key, Map, MapPlan, MapTransform, Message, Transform,
    TransformError, Value, json::CREATED_OBJECT_ROOM, message::Target, value,
};

/// Settings of `object_copy`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and/or `target_key`.
    pub object: ObjectSettings,
}

/// The `object_copy` transform.
pub(crate) struct ObjectCopy {
    source: Option<Key>,
    target: Option<Key>,
}

impl ObjectCopy {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(ObjectCopy {
            source: b.opt_key("object.source_key", &s.object.source_key)?,
            target: b.opt_key("object.target_key", &s.object.target_key)?,
        })
    }

    /// With both keys all it does is copy a value, which the pipeline may do with the
    /// copies next to it ([`MapPlan::Copy`]).
    pub(crate) fn into_transform(self) -> Transform {
        match (&self.source, &self.target) {
            (Some(from), Some(to)) => {
                let plan = MapPlan::Copy {
                    from: from.clone(),
                    to: to.clone(),
                };
                Transform::map_doing(plan, self)
            }
            _ => Transform::map(self),
        }
    }
}

impl MapTransform for ObjectCopy {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl ObjectCopy {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        match (&self.source, &self.target) {
            (Some(src), Some(trg)) => {
                if let Some(v) = msg.get(src).map(|v| v.into_owned()) {
                    msg.set(trg, v)?;
                }
            }
            (Some(src), None) => {
                if let Some(v) = msg.get(src).map(|v| v.into_owned()) {
                    match v {
                        Value::String(s) => msg.set_data(s.into_string().into_bytes()),
                        Value::Null => msg.set_data(Vec::new()),
                        other => msg.set_data_value(other),
                    }
                }
            }
            (None, Some(trg)) => {
                if msg.data_body().is_empty() {
                    return Ok(());
                }
                if trg.target() == Target::Meta {
                    let v = value::from_bytes(msg.data());
                    msg.set(trg, v)?;
                    msg.set_data(Vec::new());
                } else {
                    let moved = match msg.data_value() {
                        // Move the parsed document into the new one instead of copying it.
                        Some(Value::Object(_) | Value::Array(_)) => msg.take_data_value(),
                        _ => None,
                    };
                    let v = moved.unwrap_or_else(|| value::from_bytes(msg.data()));
                    let mut wrapped = Value::Object(Map::with_capacity(CREATED_OBJECT_ROOM));
                    trg.path().set(&mut wrapped, v)?;
                    msg.set_data_value(wrapped);
                }
            }
            (None, None) => {}
        }
        Ok(())
    }
}

/// What registers the `object_copy` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "object_copy",
    aliases: &[],
    library: "sub.tf.obj.cp",
    summary: "copies a value, extracts it as the data, or wraps the data",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"object": {"source_key": "a", "target_key": "b"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{MapPlan, Message, Transform, json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "copy",
                json!({"object": {"source_key": "a", "target_key": "b"}}),
                r#"{"a":{"x":1}}"#,
                vec![r#"{"a":{"x":1},"b":{"x":1}}"#],
            ),
            // Substation copies an object as its text (GJSON's `Raw`, set raw by SJSON).
            (
                "an object's spacing and number forms are copied",
                json!({"object": {"source_key": "a", "target_key": "b"}}),
                r#"{"a":{ "x" : 1.50, "y":[1 ,2] }}"#,
                vec![r#"{"a":{ "x" : 1.50, "y":[1 ,2] },"b":{ "x" : 1.50, "y":[1 ,2] }}"#],
            ),
            (
                "missing source passes",
                json!({"object": {"source_key": "z", "target_key": "b"}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
            (
                "extract string",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":"hi"}"#,
                vec!["hi"],
            ),
            (
                "extract object",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":{"b":2}}"#,
                vec![r#"{"b":2}"#],
            ),
            (
                "wrap object",
                json!({"object": {"target_key": "x.y"}}),
                r#"{"a":1}"#,
                vec![r#"{"x":{"y":{"a":1}}}"#],
            ),
            (
                "wrap text",
                json!({"object": {"target_key": "x"}}),
                "plain",
                vec![r#"{"x":"plain"}"#],
            ),
            (
                "wrap empty passes",
                json!({"object": {"target_key": "x"}}),
                "",
                vec![""],
            ),
            (
                "to metadata and back",
                json!({"object": {"source_key": "a", "target_key": "meta a"}}),
                r#"{"a":1}"#,
                vec![r#"{"a":1}"#],
            ),
            (
                "extract null is empty",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":null}"#,
                vec![""],
            ),
            (
                "a key to itself parses a string holding an object",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"{\"b\":\"c\"}"}"#,
                vec![r#"{"a":{"b":"c"}}"#],
            ),
            (
                "a key to itself parses a string holding an array",
                json!({"object": {"source_key": "a", "target_key": "a"}}),
                r#"{"a":"[\"b\",\"c\"]"}"#,
                vec![r#"{"a":["b","c"]}"#],
            ),
            (
                "a string holding a number stays a string",
                json!({"object": {"source_key": "a", "target_key": "b"}}),
                r#"{"a":"12"}"#,
                vec![r#"{"a":"12","b":"12"}"#],
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "object_copy", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    /// Substation 2.8's own table (`transform/object_copy_test.go`), its data and expected
    /// data byte for byte: "unescape object" copies a key onto itself in data that ends
    /// before its closing brace, which GJSON reads and SJSON edits in place.
    #[test]
    fn substation_cases() {
        let r = registry();
        let both = |s: &str, t: &str| json!({"object": {"source_key": s, "target_key": t}});
        let cases: [(&str, _, &[u8], &str); 8] = [
            (
                "object",
                both("a", "c"),
                br#"{"a":"b"}"#,
                r#"{"a":"b","c":"b"}"#,
            ),
            (
                "unescape object",
                both("a", "a"),
                br#"{"a":"{\"b\":\"c\"}""#,
                r#"{"a":{"b":"c"}"#,
            ),
            (
                "unescape array",
                both("a", "a"),
                br#"{"a":"[\"b\",\"c\"]"}"#,
                r#"{"a":["b","c"]}"#,
            ),
            (
                "from object",
                json!({"object": {"source_key": "a"}}),
                br#"{"a":"b"}"#,
                "b",
            ),
            (
                "from nested object",
                json!({"object": {"source_key": "a"}}),
                br#"{"a":{"b":"c"}}"#,
                r#"{"b":"c"}"#,
            ),
            (
                "to object",
                json!({"object": {"target_key": "a"}}),
                b"b",
                r#"{"a":"b"}"#,
            ),
            (
                "to nested object",
                json!({"object": {"target_key": "a.b"}}),
                b"c",
                r#"{"a":{"b":"c"}}"#,
            ),
            (
                "to object base64",
                json!({"object": {"target_key": "a"}}),
                &[
                    120, 156, 5, 192, 49, 13, 0, 0, 0, 194, 48, 173, 76, 2, 254, 143, 166, 29, 2,
                    93, 1, 54,
                ],
                r#"{"a":"eJwFwDENAAAAwjCtTAL+j6YdAl0BNg=="}"#,
            ),
        ];
        for (name, settings, data, want) in cases {
            let t =
                testing::build(&r, json!({"type": "object_copy", "settings": settings})).unwrap();
            let mut out = Vec::new();
            testing::block_on(t.transform(Message::new(data.to_vec()), &mut out)).unwrap();
            let got: Vec<String> = out
                .iter()
                .map(|m| String::from_utf8_lossy(m.data()).into_owned())
                .collect();
            assert_eq!(got, vec![want.to_string()], "{name}");
        }
    }

    /// Data with bytes after its JSON (GJSON reads the first value, SJSON edits its text):
    /// a copy reads in it, sets in place keeping the bytes, and adds a key as SJSON adds it;
    /// the whole data is not JSON, so wrapping it makes it a string.
    #[test]
    fn data_with_bytes_after_its_json() {
        let r = registry();
        let both = |s: &str, t: &str| json!({"object": {"source_key": s, "target_key": t}});
        let cases = [
            (
                "onto itself",
                both("a", "a"),
                r#"{"a":"{\"b\":1}"} x"#,
                r#"{"a":{"b":1}} x"#,
            ),
            (
                "to a new key",
                both("a", "b"),
                r#"{"a":1} x"#,
                r#"{"a":1,"b":1}"#,
            ),
            (
                "after a brace",
                both("a", "b"),
                r#"{"a":1}}"#,
                r#"{"a":1},"b":1}"#,
            ),
            (
                "missing source",
                both("z", "b"),
                r#"{"a":1} x"#,
                r#"{"a":1} x"#,
            ),
            (
                "extract",
                json!({"object": {"source_key": "a"}}),
                r#"{"a":{"b":2}} x"#,
                r#"{"b":2}"#,
            ),
            (
                "wrap",
                json!({"object": {"target_key": "w"}}),
                r#"{"a":1} x"#,
                r#"{"w":"{\"a\":1} x"}"#,
            ),
        ];
        for (name, settings, input, want) in cases {
            let t =
                testing::build(&r, json!({"type": "object_copy", "settings": settings})).unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), vec![want], "{name}");
        }
    }

    /// Data and metadata, in and out: `(settings, data, metadata, data out, metadata out)`.
    #[test]
    fn metadata_cases() {
        let r = registry();
        let cases = [
            (
                "the whole data into a metadata key; the data becomes empty",
                json!({"object": {"target_key": "meta d"}}),
                r#"{"x":1}"#,
                r#"{"m":1}"#,
                "",
                r#"{"m":1,"d":{"x":1}}"#,
            ),
            (
                "text data into a metadata key",
                json!({"object": {"target_key": "meta d"}}),
                "plain",
                "",
                "",
                r#"{"d":"plain"}"#,
            ),
            (
                "a metadata key becomes the data",
                json!({"object": {"source_key": "meta m"}}),
                r#"{"x":1}"#,
                r#"{"m":"v"}"#,
                "v",
                r#"{"m":"v"}"#,
            ),
            (
                "the whole metadata becomes the data",
                json!({"object": {"source_key": "meta @this"}}),
                "x",
                r#"{"m":{"n":1}}"#,
                r#"{"m":{"n":1}}"#,
                r#"{"m":{"n":1}}"#,
            ),
            (
                "a data key into a metadata key",
                json!({"object": {"source_key": "a", "target_key": "meta a"}}),
                r#"{"a":1}"#,
                "",
                r#"{"a":1}"#,
                r#"{"a":1}"#,
            ),
        ];
        for (name, settings, data, meta, want_data, want_meta) in cases {
            let t =
                testing::build(&r, json!({"type": "object_copy", "settings": settings})).unwrap();
            let mut m = Message::new(data.as_bytes().to_vec());
            m.set_metadata(meta.as_bytes().to_vec());
            let mut out = Vec::new();
            testing::block_on(t.transform(m, &mut out)).unwrap();
            assert_eq!(out.len(), 1, "{name}");
            assert_eq!(String::from_utf8_lossy(out[0].data()), want_data, "{name}");
            assert_eq!(
                String::from_utf8_lossy(out[0].metadata()),
                want_meta,
                "{name}"
            );
        }
    }

    /// With both keys it says it only copies, so the pipeline may fuse it with its
    /// neighbours; with one key it does more (extracts, wraps) and says nothing.
    #[test]
    fn only_a_copy_with_both_keys_is_planned_as_one() {
        let r = registry();
        let build = |object| {
            testing::build(
                &r,
                json!({"type": "object_copy", "settings": {"object": object}}),
            )
            .unwrap()
        };
        let Transform::Map(_, plan) = build(json!({"source_key": "a.b", "target_key": "meta c"}))
        else {
            panic!("a map transform")
        };
        match &*plan {
            MapPlan::Copy { from, to } => {
                assert_eq!((from.as_str(), to.as_str()), ("a.b", "meta c"));
            }
            other => panic!("{other:?}"),
        }
        for object in [json!({"source_key": "a"}), json!({"target_key": "a"})] {
            let t = build(object.clone());
            assert!(
                matches!(&t, Transform::Map(_, plan) if matches!(**plan, MapPlan::Opaque)),
                "{object:?}"
            );
        }
    }
}
