//! An object changed since it was parsed, written as Substation's SJSON leaves it.
//!
//! SJSON changes JSON text in place: setting a key replaces its value's text, a new key is
//! appended before the closing brace (`,"key":value`, after any white space that was
//! there), and deleting one cuts it out with the comma before it (or, for the first member,
//! the comma after it). Everything else keeps the input's spacing. [`super::Map`] keeps its
//! text and, once it changes, which of its original members ([`Member`]) were changed or
//! deleted; new keys are the entries without a member. [`write_spliced`] rebuilds the text
//! SJSON would hold from that. Deletions in any order give the same text, and so do appends
//! before or after them, except when every original member is deleted: the spacing left
//! inside the braces then depends on the order SJSON was called in, which is not kept (the
//! values are the same either way).

use bytes::Bytes;
use smallvec::SmallVec;

use super::Map;
use super::map::tag;
use super::write::{write_json, write_str};

/// One member of the object as its text has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Member {
    /// The key's tag (see `map.rs`): keys with escapes are not kept, so the text between
    /// the quotes is the key.
    pub(super) tag: u64,
    /// The key's opening quote.
    key_start: u32,
    /// Just past the key's closing quote.
    key_end: u32,
    value_start: u32,
    value_end: u32,
    pub(super) state: State,
}

/// What became of a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Its value is the one parsed from its text.
    Unchanged,
    /// Its value may have changed: written anew, in its place.
    Changed,
    /// Removed from the object (a key added again later is a new key, appended).
    Deleted,
}

impl Member {
    /// The key as the text has it.
    pub(super) fn key<'t>(&self, text: &'t [u8]) -> &'t [u8] {
        &text[self.key_start as usize + 1..self.key_end as usize - 1]
    }
}

/// The members of the object whose text is `text` (valid JSON, as the parser read it), or
/// `None` when a key has an escape (its text is not the key) or the text is too large to
/// index with `u32`.
pub(super) fn members(text: &[u8]) -> Option<Vec<Member>> {
    u32::try_from(text.len()).ok()?;
    let mut out = Vec::new();
    let mut i = skip_space(text, 1);
    while text.get(i) == Some(&b'"') {
        let key_start = i;
        let key_end = skip_string(text, i);
        if text[key_start..key_end].contains(&b'\\') {
            return None;
        }
        i = skip_space(text, key_end);
        // The colon.
        i = skip_space(text, i + 1);
        let value_start = i;
        let value_end = skip_value(text, i);
        out.push(Member {
            tag: tag(&text[key_start + 1..key_end - 1]),
            key_start: key_start as u32,
            key_end: key_end as u32,
            value_start: value_start as u32,
            value_end: value_end as u32,
            state: State::Unchanged,
        });
        i = skip_space(text, value_end);
        if text.get(i) == Some(&b',') {
            i = skip_space(text, i + 1);
        }
    }
    Some(out)
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_space(text: &[u8], mut i: usize) -> usize {
    while text.get(i).is_some_and(|&b| is_space(b)) {
        i += 1;
    }
    i
}

/// Past the string that starts at `i`.
fn skip_string(text: &[u8], mut i: usize) -> usize {
    i += 1;
    while let Some(&b) = text.get(i) {
        match b {
            b'"' => return i + 1,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    i
}

/// Past the value that starts at `i`.
fn skip_value(text: &[u8], mut i: usize) -> usize {
    match text.get(i) {
        Some(b'"') => skip_string(text, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            while let Some(&b) = text.get(i) {
                match b {
                    b'"' => {
                        i = skip_string(text, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i
        }
        _ => {
            while text
                .get(i)
                .is_some_and(|&b| !matches!(b, b',' | b'}' | b']') && !is_space(b))
            {
                i += 1;
            }
            i
        }
    }
}

/// Writes `m`, whose text is `text` and whose original members are `members`, as SJSON
/// would have changed the text; `false` (nothing written) when the object's order is not
/// one SJSON's changes can give (keys sorted, say), and it is to be written compact.
pub(super) fn write_spliced(out: &mut Vec<u8>, m: &Map, text: &Bytes, members: &[Member]) -> bool {
    // Which entry each member is, in order; entries without one were added.
    let mut entry_of: SmallVec<[Option<usize>; 32]> = SmallVec::from_elem(None, members.len());
    let mut added: SmallVec<[usize; 8]> = SmallVec::new();
    let mut next = 0;
    for (j, slot) in m.entries.iter().enumerate() {
        let found = members.iter().position(|mem| {
            mem.state != State::Deleted
                && mem.tag == slot.tag
                && mem.key(text) == slot.key.as_bytes()
        });
        match found {
            Some(k) if k >= next && added.is_empty() => {
                entry_of[k] = Some(j);
                next = k + 1;
            }
            Some(_) => return false,
            None => added.push(j),
        }
    }
    if members
        .iter()
        .zip(&entry_of)
        .any(|(mem, e)| (mem.state == State::Deleted) == e.is_some())
    {
        // A member neither present nor deleted: not a state the map's changes leave.
        return false;
    }
    let mut buf = text.to_vec();
    // From the last member to the first, so that the places before stay where they were.
    for (mem, e) in members.iter().zip(&entry_of).rev() {
        let (ks, vs, ve) = (
            mem.key_start as usize,
            mem.value_start as usize,
            mem.value_end as usize,
        );
        match (mem.state, e) {
            (State::Changed, Some(j)) => {
                let mut v = Vec::new();
                write_json(&mut v, &m.entries[*j].value);
                buf.splice(vs..ve, v);
            }
            (State::Deleted, _) => {
                // The comma before the key goes with it; the first member takes the white
                // space before it and the comma after it instead.
                let before = buf[..ks].iter().rposition(|&b| !is_space(b)).unwrap_or(0);
                if buf[before] == b',' {
                    buf.drain(before..ve);
                } else {
                    let after = skip_space(&buf, ve);
                    let end = if buf.get(after) == Some(&b',') {
                        after + 1
                    } else {
                        ve
                    };
                    buf.drain(before + 1..end);
                }
            }
            _ => {}
        }
    }
    if !added.is_empty() {
        let close = buf.len() - 1;
        let mut comma = buf[1..close].iter().any(|&b| !is_space(b));
        buf.truncate(close);
        for j in added {
            if comma {
                buf.push(b',');
            }
            write_str(&mut buf, &m.entries[j].key);
            buf.push(b':');
            write_json(&mut buf, &m.entries[j].value);
            comma = true;
        }
        buf.push(b'}');
    }
    out.extend_from_slice(&buf);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse::from_slice;
    use crate::json::{Value, write_compact};

    fn written(v: &Value) -> String {
        let mut out = Vec::new();
        write_json(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    fn object(text: &str) -> Map {
        match from_slice(text.as_bytes()) {
            Some(Value::Object(m)) => m,
            other => panic!("{text}: {other:?}"),
        }
    }

    type Edit = fn(&mut Map);

    #[test]
    fn changes_are_spliced_as_sjson_splices_them_table() {
        let cases: &[(&str, &str, Edit, &str)] = &[
            (
                "append",
                r#"{"a": 1, "b": 2}"#,
                |m| {
                    m.insert("c", Value::from(3));
                },
                r#"{"a": 1, "b": 2,"c":3}"#,
            ),
            (
                "append after the space before the brace",
                r#"{"a": 1 }"#,
                |m| {
                    m.insert("c", Value::from(3));
                },
                r#"{"a": 1 ,"c":3}"#,
            ),
            (
                "append to an empty object",
                "{ }",
                |m| {
                    m.insert("a", Value::from(1));
                },
                r#"{ "a":1}"#,
            ),
            (
                "replace in place",
                r#"{"a": 1, "b": 2}"#,
                |m| {
                    m.insert("a", Value::from(9));
                },
                r#"{"a": 9, "b": 2}"#,
            ),
            (
                "delete the last",
                r#"{"a": 1, "b": 2}"#,
                |m| {
                    m.remove("b");
                },
                r#"{"a": 1}"#,
            ),
            (
                "delete the first",
                r#"{ "a" : 1 , "b" : 2 }"#,
                |m| {
                    m.remove("a");
                },
                r#"{ "b" : 2 }"#,
            ),
            (
                "delete and add again: appended",
                r#"{ "a" : 1 , "b" : 2 }"#,
                |m| {
                    m.remove("a");
                    m.insert("a", Value::from(5));
                },
                r#"{ "b" : 2 ,"a":5}"#,
            ),
            (
                "a change inside a member",
                r#"{"a": {"y": 1}, "b": [1, 2]}"#,
                |m| {
                    if let Some(Value::Object(a)) = m.get_mut("a") {
                        a.insert("x", Value::Bool(true));
                    }
                },
                r#"{"a": {"y": 1,"x":true}, "b": [1, 2]}"#,
            ),
            (
                "a copied object keeps its text",
                r#"{"a": {"y" : 1.50}}"#,
                |m| {
                    let a = m.get("a").cloned().unwrap();
                    m.insert("b", a);
                },
                r#"{"a": {"y" : 1.50},"b":{"y" : 1.50}}"#,
            ),
            (
                "every value touched: written anew",
                r#"{"a": 1.50, "b" : "\u00e9"}"#,
                |m| {
                    m.values_mut().for_each(|_| {});
                },
                r#"{"a": 1.5, "b" : "é"}"#,
            ),
            (
                "keys sorted: compact",
                r#"{"b": 1, "a": 2}"#,
                Map::sort_keys,
                r#"{"a":2,"b":1}"#,
            ),
            (
                "a key with an escape: compact",
                r#"{"\u0061": 1}"#,
                |m| {
                    m.insert("b", Value::from(2));
                },
                r#"{"a":1,"b":2}"#,
            ),
            (
                "a key twice: compact",
                r#"{"a": 1, "a": 2}"#,
                |m| {
                    m.insert("b", Value::from(3));
                },
                r#"{"a":2,"b":3}"#,
            ),
            (
                "a new key moved first: compact",
                r#"{"a": 1}"#,
                |m| {
                    m.insert("b", Value::from(2));
                    let a = m.remove("a").unwrap();
                    m.insert("a", a);
                    m.sort_keys();
                },
                r#"{"a":1,"b":2}"#,
            ),
        ];
        for (name, text, edit, want) in cases {
            let mut m = object(text);
            edit(&mut m);
            let v = Value::Object(m);
            assert_eq!(written(&v), *want, "{name}");
            assert_eq!(
                from_slice(written(&v).as_bytes()),
                Some(v),
                "{name}: the same value"
            );
        }
    }

    #[test]
    fn agrees_with_a_model_of_sjson_on_generated_cases() {
        #[derive(serde::Deserialize)]
        struct Case {
            text: String,
            ops: Vec<Vec<serde_json::Value>>,
            sjson: String,
        }
        let cases: Vec<Case> =
            serde_json::from_str(include_str!("testdata/splice_cases.json")).unwrap();
        assert_eq!(cases.len(), 400);
        for c in cases {
            let mut m = object(&c.text);
            for op in &c.ops {
                let key = op[1].as_str().unwrap();
                match (op[0].as_str().unwrap(), op.get(2).and_then(|n| n.as_i64())) {
                    ("delete", None) => {
                        m.remove(key);
                    }
                    ("set", Some(n)) => {
                        m.insert(key, Value::from(n));
                    }
                    other => panic!("{other:?}"),
                }
            }
            let v = Value::Object(m);
            assert_eq!(written(&v), c.sjson, "{} {:?}", c.text, c.ops);
        }
    }

    /// xorshift, so that a failure reproduces.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Random changes, nested ones included, through every way to change a map: what is
    /// written always reads back as the value changed (the text never goes stale).
    #[test]
    fn whatever_changes_what_is_written_is_the_value() {
        let texts = [
            r#"{ "a" : 1 , "b" : { "c" : [1, {"d": 2}] , "e" : "x" } , "f" : {} }"#,
            r#"{"a":{"a":{"a":1}},"b":2}"#,
            "{ }",
            r#"{"k": [ {"x": 1 }, {"y" : 2} ], "n": null}"#,
        ];
        let keys = ["a", "b", "c", "d", "e", "f", "k", "n", "x", "new"];
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        for round in 0..4000 {
            let text = texts[round % texts.len()];
            let mut v = from_slice(text.as_bytes()).unwrap();
            for _ in 0..1 + r.below(6) {
                // A path to an object, then down it as a set goes (`get_mut` at each step).
                let mut path = Vec::new();
                let mut at = &v;
                for _ in 0..r.below(3) {
                    let k = keys[r.below(keys.len())];
                    match at.get(k) {
                        Some(next @ Value::Object(_)) => {
                            path.push(k);
                            at = next;
                        }
                        _ => break,
                    }
                }
                let mut cur = &mut v;
                for k in path {
                    let Value::Object(m) = cur else {
                        unreachable!()
                    };
                    cur = m.get_mut(k).unwrap();
                }
                let Value::Object(m) = cur else { continue };
                let k = keys[r.below(keys.len())];
                match r.below(8) {
                    0 => {
                        m.insert(k, Value::from(r.below(100) as i64));
                    }
                    1 => {
                        m.remove(k);
                    }
                    2 => {
                        *m.get_or_insert_null(&k.into()) = Value::from("s");
                    }
                    3 => {
                        m.entry(k).or_insert(Value::Bool(false));
                    }
                    4 => m.values_mut().for_each(|x| *x = Value::Null),
                    5 => m.retain(|key, _| key != k),
                    6 => {
                        let copy = from_slice(br#"{ "copied" : [1, 2] }"#).unwrap();
                        m.insert(k, copy);
                    }
                    _ => m.extend([(k, Value::from(1.5))]),
                }
            }
            let out = written(&v);
            let mut compact = Vec::new();
            write_compact(&mut compact, &v);
            assert_eq!(
                from_slice(out.as_bytes()),
                Some(v.clone()),
                "round {round}: {out} is not {}",
                String::from_utf8_lossy(&compact)
            );
        }
    }
}
