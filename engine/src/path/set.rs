//! Writing and deleting (SJSON semantics).
//!
//! Missing parents are created: an array when the next key is an index (`a.2` pads with
//! nulls, at most [`MAX_PADDING`] of them; `a.-1` appends), otherwise an object. A numeric key on an existing object is an
//! object key; `:` forces an object key (`a.:1`). A parent that is null is replaced like a
//! missing one, and so is one that is a string, a number or a boolean below the top, as SJSON
//! does (`{"a":"x"}` with `a.b` set to 1 becomes `{"a":{"b":1}}`); a document that is itself
//! a scalar cannot be written into (SJSON would drop it). An array parent needs an index.

use crate::json::{Array, CREATED_OBJECT_ROOM, Map, Value};

use super::syntax::WStep;

/// The most nulls a write pads an array with to reach its index (SJSON pads without limit,
/// so `a.100000000` would write a hundred million nulls).
const MAX_PADDING: usize = 1 << 16;

/// Why a write failed (the caller adds the path).
pub(crate) type WriteResult<T> = Result<T, String>;

/// Sets `v` at `steps` in `doc` (no steps: `v` replaces `doc`, as `@this`).
#[inline]
pub(crate) fn set(steps: &[WStep], doc: &mut Value, v: Value) -> WriteResult<()> {
    let Some((last, parents)) = steps.split_last() else {
        *doc = v;
        return Ok(());
    };
    // Only an index past MAX_PADDING can pad too far: check before anything is changed.
    if steps
        .iter()
        .any(|s| s.index.is_some_and(|i| i > MAX_PADDING))
    {
        check_padding(steps, doc)?;
    }
    let cur = parent(parents, doc)?;
    place(cur, last, parents.len(), v)
}

/// The value at `parents` (the steps before a write's last) in `doc`, each created or
/// replaced on the way as [`set`] does.
#[inline]
pub(crate) fn parent<'v>(parents: &[WStep], doc: &'v mut Value) -> WriteResult<&'v mut Value> {
    let mut cur = doc;
    for (i, step) in parents.iter().enumerate() {
        cur = slot(cur, step, i)?;
    }
    Ok(cur)
}

/// Puts `v` at the last step, `depth` steps down: into an object's entry directly, else
/// into its slot.
#[inline]
pub(crate) fn place(cur: &mut Value, step: &WStep, depth: usize, v: Value) -> WriteResult<()> {
    if let Value::Object(m) = cur {
        m.insert_hinted(&step.name, &step.hint, v);
        return Ok(());
    }
    *slot(cur, step, depth)? = v;
    Ok(())
}

/// Puts `v` at the last step in `m`, which the caller knows does not hold its key (see
/// [`Map::push_absent_hinted`]): what [`place`] does then, without looking for it first.
#[inline]
pub(crate) fn place_absent(m: &mut Map, step: &WStep, v: Value) {
    m.push_absent_hinted(&step.name, &step.hint, v);
}

/// Makes `cur`, `depth` steps down, what a write of `step` into it finds or creates: a null
/// becomes an empty array (`step` an index or `-1`) or object, and so does a string, a
/// number or a boolean below the top; an object or array stays as it is.
#[inline]
pub(crate) fn make_container(cur: &mut Value, step: &WStep, depth: usize) {
    // SJSON replaces a scalar on the way to the key; the document itself must be an object
    // or array (or null), or the write would silently drop it.
    let replace = match cur {
        Value::Null => true,
        Value::Object(_) | Value::Array(_) => false,
        _ => depth > 0,
    };
    if replace {
        *cur = if step.index.is_some() || step.append {
            Value::Array(Array::new())
        } else {
            Value::Object(Map::with_capacity(CREATED_OBJECT_ROOM))
        };
    }
}

/// Refuses a write whose index lies more than [`MAX_PADDING`] past the end of its array
/// (an array the write would create has length 0), walking the document without changing it.
fn check_padding(steps: &[WStep], doc: &Value) -> WriteResult<()> {
    let mut cur = Some(doc);
    for (depth, step) in steps.iter().enumerate() {
        let len = match cur {
            Some(Value::Array(a)) => a.len(),
            _ => 0,
        };
        if let Some(idx) = step.index
            && !matches!(cur, Some(Value::Object(_)))
            && idx > len + MAX_PADDING
        {
            return Err(format!(
                "index {idx} (step {}) is more than {MAX_PADDING} past the end of the array (length {len}): that many nulls would be written",
                depth + 1
            ));
        }
        cur = match cur {
            Some(Value::Object(m)) => m.get(&step.name),
            Some(Value::Array(a)) => step.index.and_then(|i| a.get(i)),
            _ => None,
        };
    }
    Ok(())
}

/// The slot for `step` under `cur`, created (as null) when missing.
#[inline]
fn slot<'v>(cur: &'v mut Value, step: &WStep, depth: usize) -> WriteResult<&'v mut Value> {
    make_container(cur, step, depth);
    match cur {
        Value::Object(m) => Ok(m.get_or_insert_null_hinted(&step.name, &step.hint)),
        Value::Array(a) => {
            let idx = if step.append {
                a.push(Value::Null);
                a.len() - 1
            } else {
                let idx = step.index.ok_or_else(|| {
                    format!(
                        "key {:?} (step {}) is not an index, and the parent is an array",
                        step.name,
                        depth + 1
                    )
                })?;
                // SJSON writes an array anew to set an index at or past its end.
                a.pad_to(idx + 1);
                idx
            };
            Ok(&mut a[idx])
        }
        other => Err(format!(
            "the parent of {:?} (step {}) is {}, not an object or array",
            step.name,
            depth + 1,
            kind(other)
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Deletes the value at `steps`; `false` when nothing was there. No steps delete the whole
/// document (it becomes null), as `@this`.
pub(crate) fn delete(steps: &[WStep], doc: &mut Value) -> bool {
    let Some((last, parents)) = steps.split_last() else {
        *doc = Value::Null;
        return true;
    };
    let mut cur = doc;
    for step in parents {
        let next = match cur {
            Value::Object(m) => m.get_mut(&step.name),
            Value::Array(a) => match (step.index, step.append) {
                (Some(i), _) => a.get_mut(i),
                (None, true) => a.last_mut(),
                _ => None,
            },
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match cur {
        Value::Object(m) => m.shift_remove(&last.name).is_some(),
        Value::Array(a) => match (last.index, last.append) {
            (Some(i), _) if i < a.len() => {
                a.remove(i);
                true
            }
            (None, true) => a.pop().is_some(),
            _ => false,
        },
        _ => false,
    }
}
