//! An object or array changed since it was parsed, written as Substation's SJSON leaves it.
//!
//! SJSON changes JSON text in place: setting a key replaces its value's text, a new key is
//! appended before the closing brace (`,"key":value`, after any white space that was
//! there), and deleting one cuts it out with the comma before it (or, for the first member,
//! the white space before it and the comma after it). Everything else keeps the input's
//! spacing. [`super::Map`] keeps its text and, once it changes, which of its original
//! members ([`Member`]) were changed or deleted; new keys are the entries without a member.
//! [`write_spliced`] rebuilds the text SJSON would hold from that. Deletions in any order
//! give the same text, and so do appends before or after them, as long as an original
//! member is left; removing the last one, the spacing left depends on the order of the
//! calls, which the record does not keep, so the map first takes its text as it stands as
//! the text parsed (`Map::rebase`), and goes on from there.
//!
//! Arrays follow the same rules (an element set in place, `-1` appending before the
//! closing bracket, a deleted element cut with the comma before it; the first keeps the
//! white space before it and loses the comma after it), with one more: setting an index
//! at or past the end writes the array anew, each element's text joined by bare commas and
//! padded with nulls. [`super::Array`] keeps its elements' places ([`Element`]) and
//! whether that happened; [`write_spliced_array`] rebuilds the text.

use bytes::Bytes;
use smallvec::SmallVec;

use super::array::Text as ArrayText;
use super::write::{write_json, write_str};
use super::{Array, Map};

/// One member of the object as its text has it (offsets into the object's text; the
/// parser records them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Member {
    /// The key's opening quote.
    key_start: u32,
    value_start: u32,
    value_end: u32,
    pub(super) state: State,
    /// Whether the key is written with an escape (its text is not the key).
    escaped_key: bool,
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
    /// A later member of a key given twice: not an entry (the key reads as its first
    /// value, as GJSON reads it), kept in the text as SJSON keeps it, and cut out with the
    /// key.
    Shadowed,
}

impl State {
    /// Whether the member is an entry of the map: there, and not a key's later duplicate.
    #[inline]
    pub(super) fn is_entry(self) -> bool {
        matches!(self, State::Unchanged | State::Changed)
    }
}

impl Member {
    /// A member whose key starts at `key_start` and whose value spans
    /// `value_start..value_end` (the object's text is less than 4 GiB: the parser checks).
    pub(super) fn new(
        key_start: usize,
        value_start: usize,
        value_end: usize,
        escaped_key: bool,
    ) -> Member {
        Member {
            key_start: key_start as u32,
            value_start: value_start as u32,
            value_end: value_end as u32,
            state: State::Unchanged,
            escaped_key,
        }
    }

    /// Whether this is the (not deleted) member of `key` in `text`.
    pub(super) fn is(&self, text: &[u8], key: &str) -> bool {
        self.state != State::Deleted && self.key(text).is_some_and(|k| k == key)
    }

    /// Its key, as GJSON matches it: its text unescaped.
    fn key<'t>(&self, text: &'t [u8]) -> Option<std::borrow::Cow<'t, str>> {
        let start = self.key_start as usize;
        let mut close = start + 1;
        while *text.get(close)? != b'"' {
            close += if text[close] == b'\\' { 2 } else { 1 };
        }
        if self.escaped_key {
            serde_json::from_slice(&text[start..=close]).ok()
        } else {
            std::str::from_utf8(&text[start + 1..close])
                .ok()
                .map(std::borrow::Cow::Borrowed)
        }
    }
}

/// One element of an array as its text has it (offsets into the array's text; the parser
/// records them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Element {
    start: u32,
    end: u32,
    pub(super) state: State,
}

impl Element {
    /// An element spanning `start..end` (the array's text is less than 4 GiB: the parser
    /// checks).
    pub(super) fn new(start: usize, end: usize) -> Element {
        Element {
            start: start as u32,
            end: end as u32,
            state: State::Unchanged,
        }
    }

    fn span(&self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
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

/// Cuts the member or element at `span` out of `buf`, as SJSON deletes: with the comma
/// before it, or, for the first one, with the white space and comma after it, and the
/// white space before it unless `keep_space_before`.
fn delete(buf: &mut Vec<u8>, span: std::ops::Range<usize>, keep_space_before: bool) {
    let before = buf[..span.start]
        .iter()
        .rposition(|&b| !is_space(b))
        .unwrap_or(0);
    if buf[before] == b',' {
        buf.drain(before..span.end);
        return;
    }
    let after = skip_space(buf, span.end);
    let end = if buf.get(after) == Some(&b',') {
        after + 1
    } else {
        span.end
    };
    let start = if keep_space_before {
        span.start
    } else {
        before + 1
    };
    buf.drain(start..end);
}

/// Appends `items` as SJSON appends: before the closing bracket (the last byte of `buf`),
/// after any white space there, each after a comma unless the container was empty.
fn append<T>(
    buf: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    write: impl FnMut(&mut Vec<u8>, T),
) {
    append_from(buf, 0, items, write)
}

/// [`append`] for a text that starts at `start` in `buf` and ends with it.
fn append_from<T>(
    buf: &mut Vec<u8>,
    start: usize,
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut Vec<u8>, T),
) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        return;
    }
    let close = buf.len() - 1;
    let bracket = buf[close];
    let mut comma = buf[start + 1..close].iter().any(|&b| !is_space(b));
    buf.truncate(close);
    for item in items {
        if comma {
            buf.push(b',');
        }
        write(buf, item);
        comma = true;
    }
    buf.push(bracket);
}

/// Writes `m`, whose text is `text` and whose original members are `members`, as SJSON
/// would have changed the text; `false` (nothing written) when the two do not fit together
/// (not a state the map's changes leave), and it is to be written compact.
pub(super) fn write_spliced(out: &mut Vec<u8>, m: &Map, text: &Bytes, members: &[Member]) -> bool {
    let m = m.read();
    // Which entry each member is: entries keep the members' order (a change that reorders
    // drops the text), a removed key is a deleted member, added keys come last.
    let mut entry_of: SmallVec<[Option<usize>; 32]> = SmallVec::from_elem(None, members.len());
    let mut j = 0;
    for (mem, e) in members.iter().zip(entry_of.iter_mut()) {
        if mem.state.is_entry() {
            let Some(slot) = m.entries.get(j) else {
                return false;
            };
            debug_assert!(mem.is(text, &slot.key), "member and entry {j} differ");
            *e = Some(j);
            j += 1;
        }
    }
    let added = j..m.entries.len();
    let write_added = |buf: &mut Vec<u8>, j: usize| {
        write_str(buf, &m.entries[j].key);
        buf.push(b':');
        write_json(buf, &m.entries[j].value);
    };
    // Keys added and nothing else changed (the usual write): the text goes straight out,
    // the new members before its closing brace.
    if !members
        .iter()
        .any(|mem| matches!(mem.state, State::Changed | State::Deleted))
    {
        let start = out.len();
        out.extend_from_slice(text);
        append_from(out, start, added, write_added);
        return true;
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
            // The first member takes the white space before it too.
            (State::Deleted, _) => delete(&mut buf, ks..ve, false),
            _ => {}
        }
    }
    append(&mut buf, added, write_added);
    out.extend_from_slice(&buf);
    true
}

/// Writes `a`, whose text is `text`, as SJSON would have changed the text; `false`
/// (nothing written) when the two do not fit together, and it is to be written compact.
pub(super) fn write_spliced_array(out: &mut Vec<u8>, a: &Array, text: &ArrayText) -> bool {
    // Which item each element is, as for an object's members.
    let mut item_of: SmallVec<[Option<usize>; 32]> = SmallVec::from_elem(None, text.elements.len());
    let mut j = 0;
    for (el, e) in text.elements.iter().zip(item_of.iter_mut()) {
        if el.state != State::Deleted {
            if j >= a.len() {
                return false;
            }
            *e = Some(j);
            j += 1;
        }
    }
    let bytes = &text.bytes;
    if text.rejoined {
        // Written anew: the elements' own text (as it is now), joined by bare commas.
        let mut original: SmallVec<[Option<&Element>; 32]> = SmallVec::from_elem(None, a.len());
        for (el, e) in text.elements.iter().zip(&item_of) {
            if let (Some(j), State::Unchanged) = (e, el.state) {
                original[*j] = Some(el);
            }
        }
        out.push(b'[');
        for (j, v) in a.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            match original[j] {
                Some(el) => out.extend_from_slice(&bytes[el.span()]),
                None => write_json(out, v),
            }
        }
        out.push(b']');
        return true;
    }
    let added = j..a.len();
    let mut buf = bytes.to_vec();
    // From the last element to the first, so that the places before stay where they were.
    for (el, e) in text.elements.iter().zip(&item_of).rev() {
        let span = el.span();
        match (el.state, e) {
            (State::Changed, Some(j)) => {
                let mut v = Vec::new();
                write_json(&mut v, &a[*j]);
                buf.splice(span, v);
            }
            // The first element keeps the white space before it.
            (State::Deleted, _) => delete(&mut buf, span, true),
            _ => {}
        }
    }
    append(&mut buf, added, |buf, j| write_json(buf, &a[j]));
    out.extend_from_slice(&buf);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse::from_slice;
    use crate::json::tests::Rng;
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
                "emptied, first member first: the space before the comma went with it",
                "{  \"a\":1\n, \"b\":2}",
                |m| {
                    m.remove("a");
                    m.remove("b");
                },
                "{}",
            ),
            (
                "emptied, last member first: the space before its comma stays",
                "{  \"a\":1\n, \"b\":2}",
                |m| {
                    m.remove("b");
                    m.remove("a");
                },
                "{\n}",
            ),
            (
                "a key added, then the last original removed: taken with its comma",
                r#"{ "a" : 1 }"#,
                |m| {
                    m.insert("b", Value::from(2));
                    m.remove("a");
                },
                r#"{"b":2}"#,
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
                "an array element set in place",
                r#"{"a": [1, 2 ]}"#,
                |m| {
                    m.get_mut("a").and_then(Value::as_array_mut).unwrap()[1] = Value::from(9);
                },
                r#"{"a": [1, 9 ]}"#,
            ),
            (
                "an array appended to (`a.-1`)",
                r#"{"a": [1, 2 ]}"#,
                |m| {
                    let a = m.get_mut("a").and_then(Value::as_array_mut).unwrap();
                    a.push(Value::from(3));
                },
                r#"{"a": [1, 2 ,3]}"#,
            ),
            (
                "an array's first element deleted: the space before it stays",
                r#"{"a": [ 1 , 2 ]}"#,
                |m| {
                    m.get_mut("a")
                        .and_then(Value::as_array_mut)
                        .unwrap()
                        .remove(0);
                },
                r#"{"a": [  2 ]}"#,
            ),
            (
                "an index past the end: the array written anew, its elements kept",
                r#"{"a": [ 1.50 , {"b" : 2} ]}"#,
                |m| {
                    let a = m.get_mut("a").and_then(Value::as_array_mut).unwrap();
                    a.pad_to(4);
                    a[3] = Value::from(7);
                },
                r#"{"a": [1.50,{"b" : 2},null,7]}"#,
            ),
            (
                "a copied array keeps its text",
                r#"{"a": [1.50, 2]}"#,
                |m| {
                    let a = m.get("a").cloned().unwrap();
                    m.insert("b", a);
                },
                r#"{"a": [1.50, 2],"b":[1.50, 2]}"#,
            ),
            (
                "an array reordered: compact",
                r#"{"a": [1.50, 2]}"#,
                |m| {
                    let a = m.get_mut("a").and_then(Value::as_array_mut).unwrap();
                    a.as_mut_slice().reverse();
                },
                r#"{"a": [2,1.5]}"#,
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
                "a key with an escape: spliced as any other",
                r#"{"\u0061": 1, "c" : 2}"#,
                |m| {
                    m.insert("b", Value::from(2));
                    m.insert("a", Value::from(5));
                    m.remove("c");
                },
                r#"{"\u0061": 5,"b":2}"#,
            ),
            (
                "a key twice: its first member set, the later one kept (as SJSON)",
                r#"{"a": 1, "a": 2}"#,
                |m| {
                    m.insert("b", Value::from(3));
                    m.insert("a", Value::from(9));
                },
                r#"{"a": 9, "a": 2,"b":3}"#,
            ),
            (
                "a key twice, deleted: both members go (SJSON would uncover the later one)",
                r#"{"a": 1, "a": 2, "c": 3}"#,
                |m| {
                    m.remove("a");
                },
                r#"{ "c": 3}"#,
            ),
            (
                "a key twice, once written with an escape, deleted: both go",
                r#"{"a": 1, "\u0061": 2, "c": 3}"#,
                |m| {
                    m.remove("a");
                },
                r#"{ "c": 3}"#,
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

    /// A case of `testdata/splice_model.py`: a text, calls, and the text SJSON leaves.
    #[derive(serde::Deserialize)]
    struct ModelCase {
        text: String,
        ops: Vec<Vec<serde_json::Value>>,
        sjson: String,
    }

    fn model_cases(json: &str) -> Vec<ModelCase> {
        let cases: Vec<ModelCase> = serde_json::from_str(json).unwrap();
        assert_eq!(cases.len(), 400);
        cases
    }

    #[test]
    fn agrees_with_a_model_of_sjson_on_generated_cases() {
        for c in model_cases(include_str!("testdata/splice_cases.json")) {
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

    #[test]
    fn arrays_agree_with_a_model_of_sjson_on_generated_cases() {
        for c in model_cases(include_str!("testdata/splice_array_cases.json")) {
            // Through the paths a transform writes with (`a.2`, `a.-1`), inside an object.
            let mut doc = from_slice(format!(r#"{{"a":{}}}"#, c.text).as_bytes()).unwrap();
            for op in &c.ops {
                let n = |i: usize| op[i].as_i64().unwrap();
                let at = |index: i64| crate::path::Path::parse(&format!("a.{index}")).unwrap();
                match op[0].as_str().unwrap() {
                    "delete" => {
                        at(n(1)).delete(&mut doc).unwrap();
                    }
                    "set" => at(n(1)).set(&mut doc, Value::from(n(2))).unwrap(),
                    "append" => at(-1).set(&mut doc, Value::from(n(1))).unwrap(),
                    other => panic!("{other}"),
                }
            }
            let want = format!(r#"{{"a":{}}}"#, c.sjson);
            assert_eq!(written(&doc), want, "{} {:?}", c.text, c.ops);
        }
    }

    /// An object whose text only gained keys is written straight into the output, where it
    /// may follow other text (inside a new object): its commas are decided by its own text.
    #[test]
    fn keys_added_to_an_object_inside_new_text_are_spliced_by_its_own_text() {
        for (text, want) in [
            ("{ }", r#"{"w":1,"x":{ "c":3}}"#),
            (r#"{"a": 1 }"#, r#"{"w":1,"x":{"a": 1 ,"c":3}}"#),
            (r#"{"a":1,"a":2}"#, r#"{"w":1,"x":{"a":1,"a":2,"c":3}}"#),
        ] {
            let mut m = object(text);
            m.insert("c", Value::from(3));
            let mut outer = Map::new();
            outer.insert("w", Value::from(1));
            outer.insert("x", Value::Object(m));
            assert_eq!(written(&Value::Object(outer)), want, "{text}");
        }
    }

    /// Random changes, nested ones included, through every way to change a map or an
    /// array: what is written always reads back as the value changed (the text never goes
    /// stale).
    #[test]
    fn whatever_changes_what_is_written_is_the_value() {
        let texts = [
            r#"{ "a" : 1 , "b" : { "c" : [1, {"d": 2}] , "e" : "x" } , "f" : {} }"#,
            r#"{"a":{"a":{"a":1}},"b":2}"#,
            "{ }",
            r#"{"k": [ {"x": 1 }, {"y" : 2} ], "n": null}"#,
            r#"[ 1 , [ 2 , { "a" : [ ] } ] , "x" ]"#,
            r#"{"\u0061" : { "\u0062":1, "c": [ ] }, "n\u0065w": 2}"#,
            r#"{"a": 1, "b": {"c": 2, "c": [1]}, "a": {"x": 1}, "\u0061": 3}"#,
        ];
        let keys = ["a", "b", "c", "d", "e", "f", "k", "n", "x", "new"];
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        for round in 0..6000 {
            let text = texts[round % texts.len()];
            let mut v = from_slice(text.as_bytes()).unwrap();
            for _ in 0..1 + r.below(6) {
                // A path to an object or array, then down it as a set goes (`get_mut` at
                // each step).
                let mut path: Vec<Result<&str, usize>> = Vec::new();
                let mut at = &v;
                for _ in 0..r.below(4) {
                    let (step, next) = match at {
                        Value::Object(_) => {
                            let k = keys[r.below(keys.len())];
                            (Ok(k), at.get(k))
                        }
                        Value::Array(a) => {
                            let i = r.below(a.len() + 1);
                            (Err(i), a.get(i))
                        }
                        _ => break,
                    };
                    match next {
                        Some(next @ (Value::Object(_) | Value::Array(_))) => {
                            path.push(step);
                            at = next;
                        }
                        _ => break,
                    }
                }
                let mut cur = &mut v;
                for step in path {
                    cur = match (cur, step) {
                        (Value::Object(m), Ok(k)) => m.get_mut(k).unwrap(),
                        (Value::Array(a), Err(i)) => a.get_mut(i).unwrap(),
                        _ => unreachable!(),
                    };
                }
                let k = keys[r.below(keys.len())];
                let n = Value::from(r.below(100) as i64);
                match cur {
                    Value::Object(m) => match r.below(8) {
                        0 => {
                            m.insert(k, n);
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
                    },
                    Value::Array(a) => {
                        let i = r.below(a.len() + 3);
                        match r.below(9) {
                            0 if i < a.len() => a[i] = n,
                            1 if i < a.len() => {
                                a.remove(i);
                            }
                            2 => {
                                a.pop();
                            }
                            3 => a.push(n),
                            4 => {
                                a.pad_to(i + 1);
                                a[i] = n;
                            }
                            5 => a.iter_mut().for_each(|x| *x = Value::Null),
                            6 => a.as_mut_slice().reverse(),
                            7 => a.extend([n, from_slice(b"[ 1 ]").unwrap()]),
                            _ => {
                                if let Some(last) = a.last_mut() {
                                    *last = from_slice(br#"{ "copied" : [1, 2] }"#).unwrap();
                                }
                            }
                        }
                    }
                    _ => {}
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
