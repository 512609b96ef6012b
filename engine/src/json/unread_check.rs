//! The reading that leaves a document's inner objects and arrays unread (`parse.rs`,
//! [`super::parse::from_bytes`]) against the one that builds everything at once: the same
//! documents accepted, and after the same reads and changes, equal values and the same text
//! written. The unit tests drive it with generated documents and changes, the `json_unread`
//! fuzz target with any bytes.

use super::parse::{DuplicateKeys, from_slice_all_read, from_slice_with};
use super::{Value, write_compact, write_json};

/// Whether `data` reads alike both ways and stays alike through the changes `ops` spells
/// (three bytes each: what, where, with what); the first difference, described, if not.
#[doc(hidden)]
pub fn unread_and_read_agree(data: &[u8], ops: &[u8]) -> Result<(), String> {
    for duplicates in [DuplicateKeys::First, DuplicateKeys::Last] {
        let unread = from_slice_with(data, duplicates);
        let whole = from_slice_all_read(data, duplicates);
        let (mut unread, mut whole) = match (unread, whole) {
            (None, None) => return Ok(()),
            (Some(u), Some(w)) => (u, w),
            (u, w) => {
                return Err(format!(
                    "accepted unread: {}, read whole: {}",
                    u.is_some(),
                    w.is_some()
                ));
            }
        };
        same(&unread, &whole, "as read")?;
        for (n, op) in ops.chunks_exact(3).enumerate() {
            let (what, at, arg) = (op[0], op[1], op[2]);
            let seen_unread = apply(&mut unread, what, at, arg);
            let seen_whole = apply(&mut whole, what, at, arg);
            if seen_unread != seen_whole {
                return Err(format!(
                    "change {n} ({what}, {at}, {arg}) saw {seen_unread:?} unread, \
                     {seen_whole:?} read whole"
                ));
            }
            same(
                &unread,
                &whole,
                &format!("after change {n} ({what}, {at}, {arg})"),
            )?;
        }
        if unread != whole {
            return Err("values differ at the end".into());
        }
    }
    Ok(())
}

/// Both written (keeping texts, and compact) alike.
fn same(unread: &Value, whole: &Value, when: &str) -> Result<(), String> {
    for (how, write) in [
        ("written", write_json as fn(&mut Vec<u8>, &Value)),
        ("written compact", write_compact),
    ] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write(&mut a, unread);
        write(&mut b, whole);
        if a != b {
            return Err(format!(
                "{when}, {how}: {} unread, {} read whole",
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b)
            ));
        }
    }
    Ok(())
}

/// One step down: a key of an object, an element of an array.
enum Step {
    Key(String),
    Element(usize),
}

/// The steps `at` leads down from `v` by: its low two bits say how many; each step takes
/// the member or element `arg + step` counts to (wrapping), through shared references.
fn path(v: &Value, at: u8, arg: u8) -> Vec<Step> {
    let mut v = v;
    let mut steps = Vec::new();
    for step in 0..at % 4 {
        let i = usize::from(arg.wrapping_add(step));
        match v {
            Value::Object(m) if !m.is_empty() => {
                let Some((k, x)) = m.iter().nth(i % m.len()) else {
                    break;
                };
                steps.push(Step::Key(k.to_string()));
                v = x;
            }
            Value::Array(a) if !a.is_empty() => {
                steps.push(Step::Element(i % a.len()));
                v = &a[i % a.len()];
            }
            _ => break,
        }
    }
    steps
}

/// The value `steps` lead to, for reading.
fn find<'v>(v: &'v Value, steps: &[Step]) -> Option<&'v Value> {
    steps.iter().try_fold(v, |v, step| match (v, step) {
        (Value::Object(m), Step::Key(k)) => m.get(k),
        (Value::Array(a), Step::Element(i)) => a.get(*i),
        _ => None,
    })
}

/// The value `steps` lead to, for changing.
fn find_mut<'v>(v: &'v mut Value, steps: &[Step]) -> Option<&'v mut Value> {
    let mut v = v;
    for step in steps {
        v = match (v, step) {
            (Value::Object(m), Step::Key(k)) => m.get_mut(k)?,
            (Value::Array(a), Step::Element(i)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// Does change `what` at the value `at` leads to; what it saw, written.
fn apply(root: &mut Value, what: u8, at: u8, arg: u8) -> String {
    let steps = path(root, at, arg);
    let mut seen = Vec::new();
    match what % 8 {
        // A read: the value there, written as it is kept.
        0 => {
            if let Some(v) = find(root, &steps) {
                write_json(&mut seen, v);
            }
        }
        // A key set (new, or one there), as a path's last step sets it.
        1 => {
            if let Some(Value::Object(m)) = find_mut(root, &steps) {
                let there = m.keys().nth(usize::from(arg) % m.len().max(1)).cloned();
                let key = match there {
                    Some(k) if arg % 2 == 1 => k.to_string(),
                    _ => format!("k{}", arg % 5),
                };
                m.insert(key, Value::from(u64::from(arg)));
            }
        }
        // A member or element removed.
        2 => match find_mut(root, &steps) {
            Some(Value::Object(m)) if !m.is_empty() => {
                let key = m.keys().nth(usize::from(arg) % m.len()).cloned();
                if let Some(k) = key {
                    m.shift_remove(&k);
                }
            }
            Some(Value::Array(a)) if !a.is_empty() => {
                let i = usize::from(arg) % a.len();
                a.remove(i);
            }
            _ => {}
        },
        // The value there replaced.
        3 => {
            if let Some(v) = find_mut(root, &steps) {
                *v = Value::from(format!("r{arg}"));
            }
        }
        // An element appended.
        4 => {
            if let Some(Value::Array(a)) = find_mut(root, &steps) {
                a.push(Value::from(i64::from(arg)));
            }
        }
        // A copy put at the top (as `object_copy` to a new key copies a subtree).
        5 => {
            let copy = find(root, &steps).cloned();
            if let (Some(copy), Value::Object(m)) = (copy, &mut *root) {
                m.insert("copy", copy);
            }
        }
        // Its text dropped: written compact from now on.
        6 => {
            if let Some(v) = find_mut(root, &steps) {
                v.forget_text();
            }
        }
        // An iteration: its keys or length.
        _ => match find(root, &steps) {
            Some(Value::Object(m)) => {
                for k in m.keys() {
                    seen.extend_from_slice(k.as_bytes());
                    seen.push(b',');
                }
            }
            Some(Value::Array(a)) => seen.extend_from_slice(a.len().to_string().as_bytes()),
            _ => {}
        },
    }
    String::from_utf8_lossy(&seen).into_owned()
}
