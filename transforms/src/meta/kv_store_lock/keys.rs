//! A message's lock key and TTL.
//!
//! The key is `prefix:` (when a prefix is set) followed by the value at
//! `object.source_key`, or the SHA-256 of the data when no `source_key` is set. Values keep
//! their type: a string is its text as it is (Substation's key, so a table shared with
//! Substation's lock keeps deduplicating string keys), any other value is `#` followed by
//! its JSON text (`#1`, `#true`, `#{"a":1}`), and a string that itself begins with `#` gets
//! one more (`#a` → `##a`), so `1` and `"1"`, `true` and `"true"` are different keys and no
//! string can pass for another type. A key longer than [`MAX_KEY_BYTES`] is replaced by
//! `#sha256:` and the hex SHA-256 of it (DynamoDB refuses partition keys over 2,048 bytes).
//!
//! A missing value, `null` and the empty string are no key at all: an error for that
//! message alone (Substation falls back to one shared key or to the data's hash, which
//! silently drops or duplicates).

use sha2::{Digest, Sha256};
use sluice_engine::{Key, Message, Value, value};

use crate::kv_store::truncate_to_seconds;

/// The longest key text kept as it is.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// The key text of a value, as the module documentation says; `Err` says why there is none.
pub(crate) fn key_text(v: &Value) -> Result<String, &'static str> {
    let text = match v {
        Value::Null => return Err("is null"),
        Value::String(s) if s.is_empty() => return Err("is an empty string"),
        Value::String(s) if s.starts_with('#') => format!("#{s}"),
        Value::String(s) => s.to_string(),
        other => format!("#{}", value::to_text(other)),
    };
    if text.len() > MAX_KEY_BYTES {
        return Ok(format!(
            "#sha256:{}",
            hex::encode(Sha256::digest(text.as_bytes()))
        ));
    }
    Ok(text)
}

/// The lock key of a data message: `source_key`'s value (or the data's hash) with the
/// prefix. `Err` is the message's own error, naming the setting.
pub(crate) fn key_of(
    prefix: &str,
    source_key: Option<&Key>,
    msg: &Message,
) -> Result<String, String> {
    let raw = match source_key {
        None => hex::encode(Sha256::digest(msg.data())),
        Some(k) => {
            let found = match msg.get(k) {
                None => Err("has no value in the message"),
                Some(v) => key_text(&v),
            };
            found.map_err(|why| {
                format!(
                    "object.source_key {:?} {why}: the lock needs a key for every message (this one was not processed)",
                    k.as_str()
                )
            })?
        }
    };
    Ok(if prefix.is_empty() {
        raw
    } else {
        format!("{prefix}:{raw}")
    })
}

/// The lock's TTL (epoch seconds) for a data message: the event time at `ttl_key` (or now)
/// plus `ttl_offset` seconds. `Err` is the message's own error, naming the setting.
pub(crate) fn ttl_of(
    ttl_key: Option<&Key>,
    ttl_offset: i64,
    msg: &Message,
    now_ms: i64,
) -> Result<i64, String> {
    let Some(k) = ttl_key else {
        return Ok(crate::kv_store::lock::ticket::seconds_up(now_ms) + ttl_offset);
    };
    let bad = |what: &str| {
        format!(
            "object.ttl_key {:?}: {what}; the lock's TTL counts from this event time (epoch seconds, ms, µs or ns)",
            k.as_str()
        )
    };
    let v = msg.get(k).ok_or_else(|| bad("no value in the message"))?;
    let t = match &*v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    }
    .ok_or_else(|| bad(&format!("{} is not a whole number", value::to_text(&v))))?;
    if t < 0 {
        return Err(bad("negative"));
    }
    Ok(truncate_to_seconds(t) + ttl_offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::json;

    #[test]
    fn key_texts_keep_their_type() {
        let long = "x".repeat(MAX_KEY_BYTES + 1);
        let cases: Vec<(Value, Result<String, &str>)> = vec![
            (json!("abc"), Ok("abc".into())),
            (json!("1"), Ok("1".into())),
            (json!(1), Ok("#1".into())),
            (json!(1.5), Ok("#1.5".into())),
            (json!(true), Ok("#true".into())),
            (json!("true"), Ok("true".into())),
            (json!("#1"), Ok("##1".into())),
            (json!("#"), Ok("##".into())),
            (json!({"a": [1, "b"]}), Ok(r##"#{"a":[1,"b"]}"##.into())),
            (json!([]), Ok("#[]".into())),
            (json!(""), Err("is an empty string")),
            (Value::Null, Err("is null")),
            (
                json!(long.clone()),
                Ok(format!(
                    "#sha256:{}",
                    hex::encode(Sha256::digest(long.as_bytes()))
                )),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(key_text(&v), want.map(|s: String| s), "{v:?}");
        }
    }

    #[test]
    fn keys_come_from_the_source_key_or_the_data_hash_with_the_prefix() {
        let k = Key::parse("id").unwrap();
        let m = |d: &str| Message::new(d.as_bytes().to_vec());
        assert_eq!(key_of("", Some(&k), &m(r#"{"id":"a"}"#)), Ok("a".into()));
        assert_eq!(key_of("p", Some(&k), &m(r#"{"id":7}"#)), Ok("p:#7".into()));
        assert_eq!(
            key_of("p", None, &m("raw")),
            Ok(format!("p:{}", hex::encode(Sha256::digest(b"raw"))))
        );
        for (data, why) in [
            (r#"{"other":1}"#, "has no value"),
            (r#"{"id":""}"#, "empty string"),
            (r#"{"id":null}"#, "is null"),
            ("not json", "has no value"),
        ] {
            let e = key_of("p", Some(&k), &m(data)).unwrap_err();
            assert!(
                e.contains(r#"object.source_key "id""#) && e.contains(why),
                "{data}: {e}"
            );
        }
    }

    #[test]
    fn the_ttl_counts_from_the_event_time_or_now() {
        let t = Key::parse("t").unwrap();
        let m = |d: &str| Message::new(d.as_bytes().to_vec());
        let now = 1_800_000_000_500;
        // Rounded up: the window is never shorter than the offset.
        assert_eq!(ttl_of(None, 60, &m("x"), now), Ok(1_800_000_061));
        assert_eq!(
            ttl_of(None, 60, &m("x"), 1_800_000_000_000),
            Ok(1_800_000_060)
        );
        assert_eq!(
            ttl_of(Some(&t), 60, &m(r#"{"t":1700000000}"#), now),
            Ok(1_700_000_060)
        );
        assert_eq!(
            ttl_of(Some(&t), 0, &m(r#"{"t":"1700000000123"}"#), now),
            Ok(1_700_000_000)
        );
        for bad in [r#"{"x":1}"#, r#"{"t":"soon"}"#, r#"{"t":-5}"#] {
            let e = ttl_of(Some(&t), 0, &m(bad), now).unwrap_err();
            assert!(e.contains(r#"object.ttl_key "t""#), "{e}");
        }
    }
}
