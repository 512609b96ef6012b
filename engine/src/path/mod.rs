//! The path language: GJSON for reads, SJSON for writes and deletes.
//!
//! No crate implements GJSON/SJSON semantics faithfully in Rust, and Substation configs
//! depend on them (`a.b`, `arr.0`, `arr.#`, `arr.-1` appends, `\.` escapes, `@this`,
//! modifiers), so the language is written here. Paths are compiled once, when a transform
//! is built, and then applied to parsed JSON ([`serde_json::Value`] with key order kept).

use std::borrow::Cow;

use serde_json::Value;

/// A path could not be compiled or applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path text is malformed.
    #[error("invalid path {path:?}: {reason}")]
    Invalid {
        /// The path as written.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The path cannot be written to this document.
    #[error("cannot set {path:?}: {reason}")]
    CannotSet {
        /// The path as written.
        path: String,
        /// Why not.
        reason: String,
    },
}

/// One step of a simple path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An object key, or an array index when the text is a number.
    Key(String),
    /// `#`: the length of an array (reads).
    Count,
}

/// A compiled path.
#[derive(Debug, Clone)]
pub struct Path {
    text: String,
    this: bool,
    steps: Vec<Step>,
}

impl Path {
    /// Compiles a path. The empty path and `@this` address the whole document.
    pub fn parse(text: &str) -> Result<Path, PathError> {
        let this = text.is_empty() || text == "@this";
        let steps = if this { Vec::new() } else { split(text)? };
        Ok(Path {
            text: text.to_string(),
            this,
            steps,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether it addresses the whole document.
    pub fn is_this(&self) -> bool {
        self.this
    }

    /// Reads the value at the path (GJSON semantics). `None` when it does not exist.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<Cow<'a, Value>> {
        if self.this {
            return Some(Cow::Borrowed(doc));
        }
        let mut cur = doc;
        for step in &self.steps {
            match step {
                Step::Count => {
                    return match cur {
                        Value::Array(a) => Some(Cow::Owned(Value::from(a.len()))),
                        _ => None,
                    };
                }
                Step::Key(k) => {
                    cur = match cur {
                        Value::Object(m) => m.get(k.as_str())?,
                        Value::Array(a) => a.get(k.parse::<usize>().ok()?)?,
                        _ => return None,
                    };
                }
            }
        }
        Some(Cow::Borrowed(cur))
    }

    /// Writes `v` at the path (SJSON semantics), creating intermediate objects.
    pub fn set(&self, doc: &mut Value, v: Value) -> Result<(), PathError> {
        if self.this {
            *doc = v;
            return Ok(());
        }
        let mut cur = doc;
        let last = self.steps.len() - 1;
        for (i, step) in self.steps.iter().enumerate() {
            let Step::Key(k) = step else {
                return Err(self.cannot_set("'#' cannot be written"));
            };
            if cur.is_null() {
                *cur = Value::Object(Default::default());
            }
            cur = match cur {
                Value::Object(m) => {
                    if i == last {
                        m.insert(k.clone(), v);
                        return Ok(());
                    }
                    m.entry(k.clone()).or_insert(Value::Null)
                }
                Value::Array(a) => {
                    let idx = if k == "-1" {
                        a.push(Value::Null);
                        a.len() - 1
                    } else {
                        k.parse::<usize>()
                            .map_err(|_| self.cannot_set("key on an array"))?
                    };
                    while a.len() <= idx {
                        a.push(Value::Null);
                    }
                    if i == last {
                        a[idx] = v;
                        return Ok(());
                    }
                    &mut a[idx]
                }
                _ => return Err(self.cannot_set("a parent is not an object or array")),
            };
        }
        unreachable!("the last step returns")
    }

    /// Deletes the value at the path; `false` when nothing was there.
    pub fn delete(&self, doc: &mut Value) -> Result<bool, PathError> {
        if self.this {
            *doc = Value::Null;
            return Ok(true);
        }
        let (last, parents) = self.steps.split_last().expect("not empty");
        let mut cur = doc;
        for step in parents {
            let Step::Key(k) = step else { return Ok(false) };
            cur = match cur {
                Value::Object(m) => match m.get_mut(k.as_str()) {
                    Some(v) => v,
                    None => return Ok(false),
                },
                Value::Array(a) => match k.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                    Some(v) => v,
                    None => return Ok(false),
                },
                _ => return Ok(false),
            };
        }
        let Step::Key(k) = last else { return Ok(false) };
        Ok(match cur {
            Value::Object(m) => m.shift_remove(k.as_str()).is_some(),
            Value::Array(a) => match k.parse::<usize>() {
                Ok(i) if i < a.len() => {
                    a.remove(i);
                    true
                }
                _ => false,
            },
            _ => false,
        })
    }

    fn cannot_set(&self, reason: &str) -> PathError {
        PathError::CannotSet {
            path: self.text.clone(),
            reason: reason.to_string(),
        }
    }
}

fn split(text: &str) -> Result<Vec<Step>, PathError> {
    let mut steps = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => cur.push(n),
                None => {
                    return Err(PathError::Invalid {
                        path: text.into(),
                        reason: "ends with a lone '\\'".into(),
                    });
                }
            },
            '.' => steps.push(step(std::mem::take(&mut cur))),
            c => cur.push(c),
        }
    }
    steps.push(step(cur));
    Ok(steps)
}

fn step(s: String) -> Step {
    if s == "#" { Step::Count } else { Step::Key(s) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn get_table() {
        let doc = json!({"a":{"b":[1,2,{"c":"d"}]},"x.y":5});
        let cases: &[(&str, Option<Value>)] = &[
            ("a.b.0", Some(json!(1))),
            ("a.b.2.c", Some(json!("d"))),
            ("a.b.#", Some(json!(3))),
            ("x\\.y", Some(json!(5))),
            ("a.z", None),
            ("@this", Some(doc.clone())),
        ];
        for (p, want) in cases {
            let got = Path::parse(p).unwrap().get(&doc).map(|c| c.into_owned());
            assert_eq!(&got, want, "path {p}");
        }
    }

    #[test]
    fn set_table() {
        let cases: &[(Value, &str, Value, Value)] = &[
            (json!({}), "a.b", json!(1), json!({"a":{"b":1}})),
            (json!({"a":[1]}), "a.-1", json!(2), json!({"a":[1,2]})),
            (json!({"a":[1]}), "a.0", json!(9), json!({"a":[9]})),
        ];
        for (doc, p, v, want) in cases {
            let mut d = doc.clone();
            Path::parse(p).unwrap().set(&mut d, v.clone()).unwrap();
            assert_eq!(&d, want, "path {p}");
        }
    }

    #[test]
    fn delete_table() {
        let mut d = json!({"a":{"b":1,"c":2}});
        assert!(Path::parse("a.b").unwrap().delete(&mut d).unwrap());
        assert!(!Path::parse("a.z").unwrap().delete(&mut d).unwrap());
        assert_eq!(d, json!({"a":{"c":2}}));
    }
}
