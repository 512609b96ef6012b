//! Evaluating a compiled read path (GJSON semantics).
//!
//! `#` followed by `.` and `#(...)#` followed by `.` map the rest of the path over the array
//! elements, up to the next `|`, keeping the results that exist; a `|` applies what follows
//! to the whole previous result. Nested maps give nested arrays (`a.#.b.#.c` is an array of
//! arrays), as GJSON does.

use std::borrow::Cow;

use crate::json::{Array, KeyHint, Map, Value};

use super::syntax::{Comp, Kind, Member, Multi, Op, Query, Rhs, Tilde};

/// Evaluates `comps` on `cur`; `None` when the result does not exist.
pub(crate) fn eval<'a>(comps: &[Comp], cur: Cow<'a, Value>) -> Option<Cow<'a, Value>> {
    let mut cur = cur;
    let mut i = 0;
    while i < comps.len() {
        match &comps[i].kind {
            Kind::Key { name, index, hint } => {
                cur = child(cur, |v| key_child(v, name, hint, *index))?;
            }
            Kind::Wild(p) => {
                cur = child(cur, |v| match v {
                    Value::Object(m) => m.iter().find(|(k, _)| p.matches(k)).map(|(_, x)| x),
                    _ => None,
                })?;
            }
            Kind::Count => {
                let Value::Array(a) = cur.as_ref() else {
                    return None;
                };
                let end = scope_end(comps, i + 1);
                if end > i + 1 {
                    let out = map(a.iter(), &comps[i + 1..end]);
                    cur = Cow::Owned(Value::Array(out.into()));
                    i = end;
                    continue;
                }
                cur = Cow::Owned(Value::from(a.len()));
            }
            Kind::Query { query, all: false } => {
                cur = child(cur, |v| match v {
                    Value::Array(a) => a.iter().find(|e| matches(query, e)),
                    _ => None,
                })?;
            }
            Kind::Query { query, all: true } => {
                let Value::Array(a) = cur.as_ref() else {
                    return None;
                };
                let hits = a.iter().filter(|e| matches(query, e));
                let end = scope_end(comps, i + 1);
                let out = if end > i + 1 {
                    map(hits, &comps[i + 1..end])
                } else {
                    hits.cloned().collect()
                };
                cur = Cow::Owned(Value::Array(out.into()));
                i = end;
                continue;
            }
            Kind::Modifier(m) => {
                if !m.is_identity() {
                    cur = Cow::Owned(m.apply(cur)?);
                }
            }
            Kind::Multi(multi) => cur = Cow::Owned(eval_multi(multi, cur.as_ref())),
            Kind::Literal(v) => cur = Cow::Owned(Value::clone(v)),
        }
        i += 1;
    }
    Some(cur)
}

/// The value at `comps`, plain keys and indexes only ([`super::parse::keys_only`]),
/// borrowed from `doc`.
#[inline]
pub(crate) fn walk<'v>(comps: &[Comp], doc: &'v Value) -> Option<&'v Value> {
    let mut cur = doc;
    for c in comps {
        let Kind::Key { name, index, hint } = &c.kind else {
            unreachable!("a keys-only path holds keys only")
        };
        cur = key_child(cur, name, hint, *index)?;
    }
    Some(cur)
}

/// The value under a key of an object, or an index of an array.
#[inline]
pub(crate) fn key_child<'v>(
    v: &'v Value,
    name: &str,
    hint: &KeyHint,
    index: Option<usize>,
) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m.get_hinted(name, hint),
        Value::Array(a) => a.get(index?),
        _ => None,
    }
}

/// Steps into a child, borrowing when the parent is borrowed.
fn child<'a>(
    cur: Cow<'a, Value>,
    f: impl for<'v> Fn(&'v Value) -> Option<&'v Value>,
) -> Option<Cow<'a, Value>> {
    match cur {
        Cow::Borrowed(v) => f(v).map(Cow::Borrowed),
        Cow::Owned(v) => f(&v).cloned().map(Cow::Owned),
    }
}

/// The end of the map scope starting at `start`: the next component after a `|`.
fn scope_end(comps: &[Comp], start: usize) -> usize {
    comps[start..]
        .iter()
        .position(|c| c.pipe)
        .map_or(comps.len(), |p| start + p)
}

/// Evaluates `scope` on every element, keeping the results that exist.
fn map<'v>(elems: impl Iterator<Item = &'v Value>, scope: &[Comp]) -> Vec<Value> {
    elems
        .filter_map(|e| eval(scope, Cow::Borrowed(e)).map(Cow::into_owned))
        .collect()
}

/// Builds the array or object of a multipath; members that do not exist are left out.
fn eval_multi(multi: &Multi, cur: &Value) -> Value {
    if multi.object {
        let mut out = Map::new();
        for m in &multi.members {
            if let Some(v) = member(m, cur) {
                out.insert(m.key.to_string(), v);
            }
        }
        Value::Object(out)
    } else {
        let mut out = Array::with_capacity(multi.members.len());
        for m in &multi.members {
            if let Some(v) = member(m, cur) {
                out.push(v);
            }
        }
        Value::Array(out)
    }
}

/// The value of a multipath member on `cur`, copied out of it.
#[inline]
fn member(m: &Member, cur: &Value) -> Option<Value> {
    member_in(m, cur).map(Cow::into_owned)
}

/// The value of a multipath member on `cur`, borrowed from it where it can be.
#[inline]
pub(super) fn member_in<'a>(m: &Member, cur: &'a Value) -> Option<Cow<'a, Value>> {
    if m.keys_only {
        return walk(&m.comps, cur).map(Cow::Borrowed);
    }
    eval(&m.comps, Cow::Borrowed(cur))
}

/// The members of `comps` when they are one array multipath and nothing else.
pub(super) fn array_multi(comps: &[Comp]) -> Option<&[Member]> {
    match comps {
        [
            Comp {
                kind: Kind::Multi(multi),
                ..
            },
        ] if !multi.object => Some(&multi.members),
        _ => None,
    }
}

/// Whether an array element matches `query`.
fn matches(query: &Query, elem: &Value) -> bool {
    let got: Option<Cow<'_, Value>> = if query.lhs.is_empty() {
        Some(Cow::Borrowed(elem))
    } else {
        eval(&query.lhs, Cow::Borrowed(elem))
    };
    let Some((op, rhs)) = &query.test else {
        return got.is_some();
    };
    match rhs {
        Rhs::Tilde(t) => {
            let hit = match t {
                Tilde::True => got.as_deref().is_some_and(truthy),
                Tilde::False => !got.as_deref().is_some_and(truthy),
                Tilde::Null => got.as_deref().is_none_or(Value::is_null),
                Tilde::Any => got.is_some(),
            };
            hit == (*op == Op::Eq)
        }
        Rhs::Pattern(p) => match got.as_deref() {
            Some(Value::String(s)) => p.matches(s) == (*op == Op::Like),
            _ => false,
        },
        Rhs::Value(want) => match got.as_deref() {
            Some(v) => compare(v, *op, want),
            None => false,
        },
    }
}

/// GJSON's truthiness: `true`, a non-zero number, or a string that reads as true.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => matches!(s.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"),
        _ => false,
    }
}

fn compare(got: &Value, op: Op, want: &Value) -> bool {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (got, want) {
        (Value::String(a), Value::String(b)) => Some(a.as_str().cmp(b.as_str())),
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => None,
        },
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (Value::Null, Value::Null) => Some(Ordering::Equal),
        _ => None,
    };
    let Some(ord) = ord else { return false };
    match op {
        Op::Eq => ord == Ordering::Equal,
        Op::Ne => ord != Ordering::Equal,
        Op::Lt => ord == Ordering::Less,
        Op::Le => ord != Ordering::Greater,
        Op::Gt => ord == Ordering::Greater,
        Op::Ge => ord != Ordering::Less,
        Op::Like | Op::NotLike => false,
    }
}
