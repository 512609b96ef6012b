//! What each step of the step view changed: per message, the keys added, changed and removed
//! (as paths, nested ones too: `a.b`; metadata keys as `meta a.b`), and the messages dropped
//! or added when a transform changes their count.
//!
//! Messages before and after a step are paired
//! - by position when their counts are equal;
//! - when there are fewer after and those are messages from before, unchanged and in order (a
//!   filter): with those, and the others before are dropped, by position;
//! - when there are more after and the messages from before are among them, unchanged and in
//!   order: with those, and the others after are new;
//! - otherwise not at all: only the counts are told (an aggregate, a split).
//!
//! Two paired messages are compared data with data, metadata with metadata. Two JSON
//! objects (empty bytes count as `{}` beside an object, as a missing value is empty in
//! Substation) are compared key by key, objects inside them too; any other value (an array,
//! a string, a number) is compared whole at its path. Anything that is not a JSON object on
//! both sides is compared as bytes: changed or not.

use serde::Serialize;
use serde_json::{Map, Value};

/// A message's bytes, as the diff sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub data: Vec<u8>,
    pub metadata: Vec<u8>,
}

/// What changed in one message against the one it came from.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(super) struct Changes {
    /// Keys it has that the one before did not.
    pub added: Vec<String>,
    /// Keys both have, with another value.
    pub changed: Vec<String>,
    /// Keys the one before had that it has not.
    pub removed: Vec<String>,
    /// Its data changed, and is not a JSON object on both sides (compared as text).
    pub data_changed: bool,
    /// Its metadata changed, and is not a JSON object on both sides (compared as text).
    pub metadata_changed: bool,
}

/// What one step changed.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub(super) struct StepChanges {
    /// Data messages before the step.
    pub before: usize,
    /// Data messages after it.
    pub after: usize,
    /// Per message after the step, in order: what changed against the message it came from,
    /// or `None` when that cannot be told (a new message, or counts that changed otherwise
    /// than by dropping or adding messages).
    pub messages: Vec<Option<Changes>>,
    /// The positions (from 0) before the step of the messages that have no successor, when
    /// they can be told; `before - after` of them are gone in any case.
    pub dropped: Vec<usize>,
}

/// What the step from `before` to `after` changed (see the module documentation).
pub(super) fn step(before: &[Record], after: &[Record]) -> StepChanges {
    let mut messages: Vec<Option<Changes>> = Vec::with_capacity(after.len());
    let mut dropped = Vec::new();
    if before.len() == after.len() {
        messages.extend(before.iter().zip(after).map(|(b, a)| Some(message(b, a))));
    } else if after.len() < before.len() {
        match subsequence(after, before) {
            Some(kept) => {
                messages.extend(after.iter().map(|_| Some(Changes::default())));
                dropped.extend((0..before.len()).filter(|i| !kept[*i]));
            }
            None => messages.extend(after.iter().map(|_| None)),
        }
    } else {
        match subsequence(before, after) {
            Some(old) => messages.extend(old.iter().map(|o| o.then(Changes::default))),
            None => messages.extend(after.iter().map(|_| None)),
        }
    }
    StepChanges {
        before: before.len(),
        after: after.len(),
        messages,
        dropped,
    }
}

/// When `short` is `long` with some messages left out (in order, unchanged): which of
/// `long` are in `short`.
fn subsequence(short: &[Record], long: &[Record]) -> Option<Vec<bool>> {
    let mut found = vec![false; long.len()];
    let mut next = short.iter().peekable();
    for (i, r) in long.iter().enumerate() {
        if next.peek() == Some(&r) {
            found[i] = true;
            next.next();
        }
    }
    next.peek().is_none().then_some(found)
}

/// What changed from `before` to `after`.
pub(super) fn message(before: &Record, after: &Record) -> Changes {
    let mut c = Changes::default();
    let data_as_objects = compare(&before.data, &after.data, "", &mut c);
    let metadata_as_objects = compare(&before.metadata, &after.metadata, "meta ", &mut c);
    c.data_changed = !data_as_objects;
    c.metadata_changed = !metadata_as_objects;
    c
}

/// Compares two byte strings, as JSON objects when both are, recording key changes under
/// `prefix` into `c`; false when they are not both objects and differ (changed as text).
fn compare(before: &[u8], after: &[u8], prefix: &str, c: &mut Changes) -> bool {
    if before == after {
        return true;
    }
    match (object(before, after), object(after, before)) {
        (Some(b), Some(a)) => {
            keys(&b, &a, prefix, c);
            true
        }
        _ => false,
    }
}

/// `bytes` as a JSON object: empty bytes are `{}` when `other` is an object.
fn object(bytes: &[u8], other: &[u8]) -> Option<Map<String, Value>> {
    if bytes.is_empty() {
        return matches!(serde_json::from_slice(other), Ok(Value::Object(_))).then(Map::new);
    }
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn keys(before: &Map<String, Value>, after: &Map<String, Value>, prefix: &str, c: &mut Changes) {
    for (k, b) in before {
        let path = format!("{prefix}{}", escape(k));
        match (b, after.get(k)) {
            (_, None) => c.removed.push(path),
            (Value::Object(b), Some(Value::Object(a))) => keys(b, a, &format!("{path}."), c),
            (b, Some(a)) if a != b => c.changed.push(path),
            _ => {}
        }
    }
    for k in after.keys().filter(|k| !before.contains_key(*k)) {
        c.added.push(format!("{prefix}{}", escape(k)));
    }
}

/// A key as a path segment: the path language's special characters escaped.
fn escape(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for ch in key.chars() {
        if matches!(ch, '.' | '\\' | '*' | '?' | '|' | '#') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(data: &str) -> Record {
        Record {
            data: data.as_bytes().to_vec(),
            metadata: Vec::new(),
        }
    }

    fn changes(added: &[&str], changed: &[&str], removed: &[&str]) -> Changes {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
        Changes {
            added: v(added),
            changed: v(changed),
            removed: v(removed),
            ..Changes::default()
        }
    }

    #[test]
    fn message_table() {
        let text = || Changes {
            data_changed: true,
            ..Changes::default()
        };
        let cases = [
            // (before, after, want)
            (r#"{"a":1}"#, r#"{"a":1}"#, Changes::default()),
            (r#"{"a":1}"#, r#"{"a":1,"b":2}"#, changes(&["b"], &[], &[])),
            (
                r#"{"a":1,"b":2}"#,
                r#"{"b":3}"#,
                changes(&[], &["b"], &["a"]),
            ),
            (
                r#"{"a":{"b":1,"c":2},"d":[1]}"#,
                r#"{"a":{"b":2,"e":{"f":1}},"d":[1,2]}"#,
                changes(&["a.e"], &["a.b", "d"], &["a.c"]),
            ),
            // An object replaced by a string at its key: changed at that key.
            (
                r#"{"a":{"b":1}}"#,
                r#"{"a":"x"}"#,
                changes(&[], &["a"], &[]),
            ),
            // Keys with the path language's characters are escaped.
            (
                r#"{"a.b":1}"#,
                r#"{"a.b":2,"c*":1}"#,
                changes(&["c\\*"], &["a\\.b"], &[]),
            ),
            // The same object in another key order or spacing: no change.
            (
                r#"{"a":1,"b":2}"#,
                r#"{ "b": 2, "a": 1 }"#,
                Changes::default(),
            ),
            // Empty data beside an object is {}.
            ("", r#"{"a":1}"#, changes(&["a"], &[], &[])),
            (r#"{"a":1}"#, "", changes(&[], &[], &["a"])),
            // Not objects on both sides: text.
            ("ada", "ADA", text()),
            ("ada", "ada", Changes::default()),
            (r#"{"a":1}"#, "a", text()),
            ("[1]", "[1,2]", text()),
        ];
        for (before, after, want) in cases {
            assert_eq!(message(&r(before), &r(after)), want, "{before} -> {after}");
        }
        let with_meta = |m: &str| Record {
            data: b"x".to_vec(),
            metadata: m.as_bytes().to_vec(),
        };
        let got = message(&with_meta(""), &with_meta(r#"{"k":{"v":1}}"#));
        assert_eq!(got, changes(&["meta k"], &[], &[]));
        let got = message(
            &with_meta(r#"{"k":{"v":1}}"#),
            &with_meta(r#"{"k":{"v":2}}"#),
        );
        assert_eq!(got, changes(&[], &["meta k.v"], &[]));
        // Bytes that are not UTF-8 compare as bytes.
        let raw = |d: &[u8]| Record {
            data: d.to_vec(),
            metadata: Vec::new(),
        };
        assert!(message(&raw(b"\xff\x00"), &raw(b"\xff\x01")).data_changed);
        assert_eq!(message(&raw(b"\xff"), &raw(b"\xff")), Changes::default());
        let got = message(&with_meta("a"), &with_meta("b"));
        assert!(got.metadata_changed && !got.data_changed, "{got:?}");
    }

    #[test]
    fn step_table() {
        let unchanged = || Some(Changes::default());
        let rs = |s: &[&str]| s.iter().map(|d| r(d)).collect::<Vec<_>>();
        let cases = [
            // (before, after, messages, dropped)
            (
                rs(&[r#"{"a":1}"#, r#"{"a":2}"#]),
                rs(&[r#"{"a":1}"#, r#"{"a":3}"#]),
                vec![unchanged(), Some(changes(&[], &["a"], &[]))],
                vec![],
            ),
            // A filter: the second and fourth go, the rest are unchanged.
            (
                rs(&["1", "2", "3", "4"]),
                rs(&["1", "3"]),
                vec![unchanged(), unchanged()],
                vec![1, 3],
            ),
            // All dropped.
            (rs(&["1", "2"]), rs(&[]), vec![], vec![0, 1]),
            // An aggregate: three in, one out, not among them.
            (rs(&["1", "2", "3"]), rs(&["[1,2,3]"]), vec![None], vec![]),
            // New messages among the old ones.
            (
                rs(&["1", "2"]),
                rs(&["1", "x", "2"]),
                vec![unchanged(), None, unchanged()],
                vec![],
            ),
            // A split: more messages, none of them an old one.
            (rs(&["a b"]), rs(&["a", "b"]), vec![None, None], vec![]),
            (rs(&[]), rs(&[]), vec![], vec![]),
        ];
        for (before, after, messages, dropped) in cases {
            let got = step(&before, &after);
            assert_eq!(got.before, before.len());
            assert_eq!(got.after, after.len());
            assert_eq!(got.messages, messages, "{before:?} -> {after:?}");
            assert_eq!(got.dropped, dropped, "{before:?} -> {after:?}");
        }
    }
}
