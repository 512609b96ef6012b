//! Modifiers: `@name` or `@name:arg` path components that transform the current value.
//!
//! Values here are parsed JSON, so the text-only modifiers `@pretty` and `@valid` leave the
//! value as it is inside a path, and `@ugly` only drops the text objects were parsed from; a path that *ends* with `@pretty` reads as the
//! pretty text (see [`super::Path::get`]). `@dedupe` is
//! Substation's: it drops array elements whose compact JSON text was seen before.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::json::{Array, Map, Value};

use super::syntax::Modifier;

impl Modifier {
    /// Whether the modifier returns its input unchanged.
    pub(crate) fn is_identity(&self) -> bool {
        matches!(self, Modifier::This | Modifier::Valid | Modifier::Pretty(_))
    }

    /// Applies the modifier; `None` when the result does not exist.
    pub(crate) fn apply(&self, v: Cow<'_, Value>) -> Option<Value> {
        Some(match self {
            Modifier::This | Modifier::Valid => v.into_owned(),
            Modifier::Ugly => {
                // Written compact from here on, whatever text it was parsed from.
                let mut v = v.into_owned();
                v.forget_text();
                v
            }
            Modifier::Pretty(_) => v.into_owned(),
            Modifier::Reverse => match v.into_owned() {
                Value::Array(mut a) => {
                    a.as_mut_slice().reverse();
                    Value::Array(a)
                }
                Value::Object(m) => Value::Object(m.into_iter().rev().collect()),
                other => other,
            },
            Modifier::Flatten { deep } => match v.into_owned() {
                Value::Array(a) => {
                    let mut out = Vec::with_capacity(a.len());
                    flatten_into(a.into_vec(), *deep, &mut out);
                    Value::Array(out.into())
                }
                other => other,
            },
            Modifier::Join => {
                let Value::Array(a) = v.as_ref() else {
                    return None;
                };
                let mut out = Map::new();
                for e in a {
                    if let Value::Object(m) = e {
                        for (k, x) in m {
                            out.insert(k.clone(), x.clone());
                        }
                    }
                }
                Value::Object(out)
            }
            Modifier::Keys => match v.as_ref() {
                Value::Object(m) => {
                    Value::Array(m.keys().map(|k| Value::from(k.as_str())).collect())
                }
                _ => Value::Array(Array::new()),
            },
            Modifier::Values => match v.into_owned() {
                Value::Object(m) => Value::Array(m.into_iter().map(|(_, x)| x).collect()),
                a @ Value::Array(_) => a,
                _ => Value::Array(Array::new()),
            },
            Modifier::ToStr => Value::String(crate::value::to_json_text(&v).into()),
            Modifier::FromStr => match v.into_owned() {
                Value::String(s) => crate::json::parse::from_slice(s.as_bytes())?,
                other => other,
            },
            Modifier::Group => {
                let Value::Object(m) = v.as_ref() else {
                    return None;
                };
                let mut rows: Vec<Map> = Vec::new();
                for (k, x) in m {
                    if let Value::Array(a) = x {
                        for (i, e) in a.iter().enumerate() {
                            if rows.len() <= i {
                                rows.resize_with(i + 1, Map::new);
                            }
                            rows[i].insert(k.clone(), e.clone());
                        }
                    }
                }
                Value::Array(rows.into_iter().map(Value::Object).collect())
            }
            Modifier::Dig(key) => {
                let mut out = Vec::new();
                dig(v.as_ref(), key, &mut out);
                Value::Array(out.into())
            }
            Modifier::Dedupe => match v.into_owned() {
                Value::Array(a) => {
                    let mut seen = HashSet::with_capacity(a.len());
                    Value::Array(
                        a.into_iter()
                            .filter(|e| seen.insert(e.to_string()))
                            .collect(),
                    )
                }
                other => other,
            },
        })
    }
}

fn flatten_into(a: Vec<Value>, deep: bool, out: &mut Vec<Value>) {
    for e in a {
        match e {
            Value::Array(inner) if deep => flatten_into(inner.into_vec(), true, out),
            Value::Array(inner) => out.extend(inner),
            other => out.push(other),
        }
    }
}

/// Every value under `key`, at any depth, in document order (parents before children).
fn dig(v: &Value, key: &str, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == key {
                    out.push(x.clone());
                }
                dig(x, key, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| dig(x, key, out)),
        _ => {}
    }
}
