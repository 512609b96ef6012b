//! A message's lock key and TTL.
//!
//! The key is `prefix:` (when a prefix is set) followed by the key text: the value at
//! `object.source_key`, or the SHA-256 (hex) of the data when no `source_key` is set. Values
//! keep their type: a string is its text as it is (Substation's key, so a table shared with
//! Substation's lock keeps deduplicating string keys), any other value is `#` followed by
//! its JSON text (`#1`, `#true`, `#{"a":1}`), and a string that itself begins with `#` gets
//! one more (`#a` → `##a`), so `1` and `"1"`, `true` and `"true"` are different keys and no
//! string can pass for another type.
//!
//! The key text is kept as it is when it is at most [`MAX_TEXT_BYTES`] (1,024) bytes long
//! and `prefix:` + text is at most [`MAX_KEY_BYTES`] (2,048) bytes; otherwise it is
//! replaced by `#sha256:` and the hex SHA-256 of the text ([`HASHED_TEXT_BYTES`], 72 bytes).
//! The prefix itself is at most [`MAX_PREFIX_BYTES`] (1,975) bytes, refused at build
//! otherwise, so every key is at most 2,048 bytes: DynamoDB refuses a longer partition key
//! with a `ValidationException` that fails the whole call, every key of the batch in it.
//! The rule is the same whatever the store: a key does not depend on where it is kept.
//!
//! Upgrades: every key that was at most 2,048 bytes under the earlier rule (which hashed a
//! text over 1,024 bytes, whatever the prefix) is byte-identical under this one, so a table
//! already holding locks keeps deduplicating. Only keys that DynamoDB could not store (a
//! long prefix with a long text) changed: they are now hashed.
//!
//! A missing value, `null` and the empty string are no key at all: an error for that
//! message alone (Substation falls back to one shared key or to the data's hash, which
//! silently drops or duplicates).

use sha2::{Digest, Sha256};
use sluice_engine::{Key, Message, Value, value};

use crate::kv_store::truncate_to_seconds;

/// The longest key text kept as it is.
pub(crate) const MAX_TEXT_BYTES: usize = 1024;
/// The longest lock key, prefix included: DynamoDB's limit on a partition key.
pub(crate) const MAX_KEY_BYTES: usize = 2048;
/// The length of a hashed key text: `#sha256:` and 64 hex digits.
pub(crate) const HASHED_TEXT_BYTES: usize = "#sha256:".len() + 64;
/// The longest `prefix`: `prefix:` and a hashed key text fit in [`MAX_KEY_BYTES`].
pub(crate) const MAX_PREFIX_BYTES: usize = MAX_KEY_BYTES - 1 - HASHED_TEXT_BYTES;

/// The key text of a value, as the module documentation says, before it is fitted to the
/// prefix ([`key_with_prefix`]); `Err` says why there is none.
pub(crate) fn key_text(v: &Value) -> Result<String, &'static str> {
    match v {
        Value::Null => Err("is null"),
        Value::String(s) if s.is_empty() => Err("is an empty string"),
        Value::String(s) if s.starts_with('#') => Ok(format!("#{s}")),
        Value::String(s) => Ok(s.to_string()),
        other => Ok(format!("#{}", value::to_text(other))),
    }
}

/// The lock key of key text `text` under `prefix`: `prefix:` (none when the prefix is
/// empty) and the text, or `#sha256:` and the text's hex SHA-256 when the text is longer
/// than [`MAX_TEXT_BYTES`] or the key would be longer than [`MAX_KEY_BYTES`].
pub(crate) fn key_with_prefix(prefix: &str, text: String) -> String {
    let before = match prefix.len() {
        0 => 0,
        n => n + 1,
    };
    let text = if text.len() > MAX_TEXT_BYTES || before + text.len() > MAX_KEY_BYTES {
        format!("#sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    } else {
        text
    };
    if prefix.is_empty() {
        text
    } else {
        format!("{prefix}:{text}")
    }
}

/// Why `prefix` cannot be a lock's prefix, if it cannot: a key under it could be longer
/// than DynamoDB takes.
pub(crate) fn prefix_problem(prefix: &str) -> Option<String> {
    (prefix.len() > MAX_PREFIX_BYTES).then(|| {
        format!(
            "is {} bytes long, over the limit of {MAX_PREFIX_BYTES} bytes: a lock key is the prefix, a colon and up to {HASHED_TEXT_BYTES} bytes of key text, and must fit in {MAX_KEY_BYTES} bytes (DynamoDB's limit on a partition key); shorten the prefix",
            prefix.len()
        )
    })
}

/// The lock key of a data message: `source_key`'s value (or the data's hash) with the
/// prefix. `Err` is the message's own error, naming the setting.
pub(crate) fn key_of(
    prefix: &str,
    source_key: Option<&Key>,
    msg: &Message,
) -> Result<String, String> {
    let text = match source_key {
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
    Ok(key_with_prefix(prefix, text))
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
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
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
            // Long texts are fitted to the prefix later (`key_with_prefix`).
            (json!(long.clone()), Ok(long)),
        ];
        for (v, want) in cases {
            assert_eq!(key_text(&v), want.map(|s: String| s), "{v:?}");
        }
    }

    fn hashed(text: &str) -> String {
        format!("#sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    }

    #[test]
    fn a_text_is_kept_when_it_and_the_key_are_short_enough_else_hashed() {
        assert_eq!(MAX_PREFIX_BYTES, 1975);
        assert_eq!(hashed("x").len(), HASHED_TEXT_BYTES);
        // (prefix, text, kept); the key lengths are in the comments.
        let p = |n: usize| "p".repeat(n);
        let x = |n: usize| "x".repeat(n);
        let cases: Vec<(String, String, bool)> = vec![
            (p(0), x(1024), true),     // 1,024
            (p(0), x(1025), false),    // the text over 1,024
            (p(1), x(1024), true),     // 1,026
            (p(1), x(1025), false),    // the text over 1,024
            (p(1023), x(1024), true),  // 2,048
            (p(1024), x(1024), false), // 2,049
            (p(1100), x(947), true),   // 2,048
            (p(1100), x(948), false),  // 2,049
            (p(1975), x(72), true),    // 2,048
            (p(1975), x(73), false),   // 2,049 → 2,048 hashed
            // Bytes, not characters: 550 two-byte characters are 1,100 bytes.
            ("é".repeat(550), x(947), true),
            ("é".repeat(550), x(948), false),
            (p(10), "€".repeat(341), true),  // 1,023 bytes of text
            (p(10), "€".repeat(342), false), // 1,026 bytes of text
        ];
        for (prefix, text, kept) in cases {
            let key = key_with_prefix(&prefix, text.clone());
            let want_text = if kept { text.clone() } else { hashed(&text) };
            let want = match prefix.is_empty() {
                true => want_text,
                false => format!("{prefix}:{want_text}"),
            };
            assert_eq!(
                key,
                want,
                "prefix {} B, text {} B",
                prefix.len(),
                text.len()
            );
            assert!(key.len() <= MAX_KEY_BYTES, "{} B", key.len());
        }
    }

    #[test]
    fn every_key_that_fitted_before_is_unchanged_and_every_key_fits() {
        // The rule before: the text hashed when over 1,024 bytes, whatever the prefix.
        let before = |prefix: &str, text: &str| {
            let t = match text.len() > 1024 {
                true => hashed(text),
                false => text.to_string(),
            };
            match prefix.is_empty() {
                true => t,
                false => format!("{prefix}:{t}"),
            }
        };
        for prefix_len in [0, 1, 72, 500, 975, 976, 1023, 1024, 1100, 1974, 1975] {
            for text_len in [1, 64, 72, 73, 947, 948, 1023, 1024, 1025, 2048, 3000] {
                let prefix = "p".repeat(prefix_len);
                let text = "x".repeat(text_len);
                let old = before(&prefix, &text);
                let new = key_with_prefix(&prefix, text);
                assert!(new.len() <= MAX_KEY_BYTES, "{prefix_len}/{text_len}");
                if old.len() <= MAX_KEY_BYTES {
                    assert_eq!(new, old, "{prefix_len}/{text_len}");
                }
            }
        }
    }

    #[test]
    fn a_prefix_longer_than_1975_bytes_is_a_problem() {
        for (prefix, problem) in [
            (String::new(), false),
            ("p".repeat(1975), false),
            ("p".repeat(1976), true),
            ("é".repeat(988), true), // 1,976 bytes in 988 characters
            ("p".repeat(3000), true),
        ] {
            let got = prefix_problem(&prefix);
            assert_eq!(got.is_some(), problem, "{} B", prefix.len());
            if let Some(why) = got {
                assert!(
                    why.contains(&format!("is {} bytes long", prefix.len()))
                        && why.contains("limit of 1975 bytes"),
                    "{why}"
                );
            }
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
        // A long prefix with a long value: the value's text is hashed to fit 2,048 bytes.
        let long = "p".repeat(1100);
        let value = "x".repeat(1000);
        assert_eq!(
            key_of(&long, Some(&k), &m(&format!(r#"{{"id":"{value}"}}"#))),
            Ok(format!("{long}:{}", hashed(&value)))
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
