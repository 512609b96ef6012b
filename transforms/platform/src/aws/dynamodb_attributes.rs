//! DynamoDB attribute values and JSON, both ways: what the DynamoDB enrichment returns,
//! what the DynamoDB item store reads and writes, and what the DynamoDB send puts. One
//! place, so that the enrichment, the store and the send agree on every type.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use sluice_engine::{Map, Number, Value, value};

/// An item as plain JSON: an object with its attributes, keys sorted.
pub fn item_json(item: &HashMap<String, AttributeValue>) -> Result<Value, String> {
    let mut keys: Vec<&String> = item.keys().collect();
    keys.sort();
    let mut m = Map::with_capacity(keys.len());
    for k in keys {
        let v = attribute_json(&item[k]).map_err(|e| format!("attribute {k:?}: {e}"))?;
        m.insert(k.as_str(), v);
    }
    Ok(Value::Object(m))
}

/// A DynamoDB number as JSON: integers within 64 bits exactly, others as the nearest
/// double (integral doubles within 2^53 as integers), text that is no number as a string.
fn number_json(n: &str) -> Value {
    if let Ok(i) = n.parse::<i64>() {
        return Value::Number(Number::from(i));
    }
    if let Ok(u) = n.parse::<u64>() {
        return Value::Number(Number::from(u));
    }
    match n.parse::<f64>() {
        Ok(f) if f.is_finite() => value::number(f),
        _ => Value::from(n),
    }
}

fn base64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b).into())
}

/// One attribute value as plain JSON: `S` a string, `N` a number, `B` a base64 string,
/// `BOOL` a boolean, `NULL` null, `M` an object, `L` an array, and the sets `SS`, `NS`,
/// `BS` arrays of strings, numbers and base64 strings.
pub fn attribute_json(v: &AttributeValue) -> Result<Value, String> {
    Ok(match v {
        AttributeValue::S(s) => Value::from(s.as_str()),
        AttributeValue::N(n) => number_json(n),
        AttributeValue::B(b) => base64(b.as_ref()),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::M(m) => item_json(m)?,
        AttributeValue::L(l) => {
            Value::Array(l.iter().map(attribute_json).collect::<Result<_, _>>()?)
        }
        AttributeValue::Ss(ss) => {
            Value::Array(ss.iter().map(|s| Value::from(s.as_str())).collect())
        }
        AttributeValue::Ns(ns) => Value::Array(ns.iter().map(|n| number_json(n)).collect()),
        AttributeValue::Bs(bs) => Value::Array(bs.iter().map(|b| base64(b.as_ref())).collect()),
        other => return Err(format!("an attribute type sluice does not know: {other:?}")),
    })
}

/// A JSON value as a DynamoDB attribute value (the inverse of [`attribute_json`]).
pub fn attribute_value(v: &Value) -> AttributeValue {
    match v {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Number(n) => AttributeValue::N(n.to_string()),
        Value::String(s) => AttributeValue::S(s.to_string()),
        Value::Array(a) => AttributeValue::L(a.iter().map(attribute_value).collect()),
        Value::Object(o) => AttributeValue::M(
            o.iter()
                .map(|(k, v)| (k.to_string(), attribute_value(v)))
                .collect(),
        ),
    }
}

/// A JSON value as a DynamoDB attribute value (Go's `attributevalue.Marshal` of decoded
/// JSON).
pub fn attribute_value_of_json(v: &serde_json::Value) -> AttributeValue {
    match v {
        serde_json::Value::Null => AttributeValue::Null(true),
        serde_json::Value::Bool(b) => AttributeValue::Bool(*b),
        serde_json::Value::Number(n) => AttributeValue::N(n.to_string()),
        serde_json::Value::String(s) => AttributeValue::S(s.to_string()),
        serde_json::Value::Array(a) => {
            AttributeValue::L(a.iter().map(attribute_value_of_json).collect())
        }
        serde_json::Value::Object(o) => AttributeValue::M(
            o.iter()
                .map(|(k, v)| (k.clone(), attribute_value_of_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;
    use sluice_engine::json;

    fn n(v: &str) -> AttributeValue {
        AttributeValue::N(v.to_string())
    }

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.to_string())
    }

    #[test]
    fn attribute_values_become_plain_json() {
        let nested = HashMap::from([
            ("z".to_string(), n("1")),
            (
                "a".to_string(),
                AttributeValue::L(vec![s("x"), AttributeValue::Bool(false)]),
            ),
        ]);
        // (attribute value, JSON)
        let cases: Vec<(AttributeValue, Value)> = vec![
            (s("text"), json!("text")),
            (s(""), json!("")),
            (n("42"), json!(42)),
            (n("-7"), json!(-7)),
            (n("9223372036854775807"), json!(9223372036854775807i64)),
            (n("18446744073709551615"), json!(18446744073709551615u64)),
            (n("30400402455622563"), json!(30400402455622563i64)),
            (n("1.5"), json!(1.5)),
            (n("-0.25"), json!(-0.25)),
            (n("1E+3"), json!(1000)),
            (
                n("123456789012345678901234567890"),
                json!(1.2345678901234568e29),
            ),
            (
                AttributeValue::B(Blob::new(b"\x00\xffhi".to_vec())),
                json!("AP9oaQ=="),
            ),
            (AttributeValue::Bool(true), json!(true)),
            (AttributeValue::Null(true), json!(null)),
            (
                AttributeValue::M(nested),
                json!({"a": ["x", false], "z": 1}),
            ),
            (AttributeValue::L(vec![]), json!([])),
            (
                AttributeValue::Ss(vec!["b".into(), "a".into()]),
                json!(["b", "a"]),
            ),
            (
                AttributeValue::Ns(vec!["1".into(), "2.5".into()]),
                json!([1, 2.5]),
            ),
            (
                AttributeValue::Bs(vec![Blob::new(b"a".to_vec())]),
                json!(["YQ=="]),
            ),
        ];
        for (av, want) in cases {
            assert_eq!(attribute_json(&av).unwrap(), want, "{av:?}");
        }
        // Keys sorted, whatever the map's order.
        let it = HashMap::from([
            ("b".to_string(), n("2")),
            ("a".to_string(), n("1")),
            ("c".to_string(), s("3")),
        ]);
        assert_eq!(
            sluice_engine::message::serialize(&item_json(&it).unwrap()),
            br#"{"a":1,"b":2,"c":"3"}"#
        );
    }

    #[test]
    fn json_round_trips_through_attribute_values() {
        for v in [
            json!(null),
            json!(true),
            json!(12),
            json!(-1.5),
            json!("x"),
            json!([1, "a", [false]]),
            json!({"a": {"b": [1]}, "c": null}),
        ] {
            assert_eq!(attribute_json(&attribute_value(&v)).unwrap(), v, "{v:?}");
        }
    }
}
