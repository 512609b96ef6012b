//! Array queries: `#(lhs op rhs)`.
//!
//! The left side is a path evaluated on each element (empty: the element itself); the
//! right side is a JSON literal, a `~` truthiness test (`~true`, `~false`, `~null`, `~*`),
//! or a pattern for `%` / `!%`. Values of different JSON types never compare equal or
//! ordered, as in GJSON. Without an operator the query tests that the left side exists.

use std::borrow::Cow;

use crate::json::Value;

use super::get::eval;
use super::parse::{Comp, ParseResult, Pattern, json_prefix, parse_read};

/// A compiled query.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    lhs: Vec<Comp>,
    test: Option<(Op, Rhs)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Like,
    NotLike,
}

#[derive(Debug, Clone)]
enum Rhs {
    Value(Value),
    Pattern(Pattern),
    Tilde(Tilde),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tilde {
    True,
    False,
    Null,
    Any,
}

impl Query {
    /// Compiles the text between `#(` and `)`.
    pub fn parse(text: &str) -> ParseResult<Query> {
        let (pos, op, len) = match find_op(text)? {
            Some(found) => found,
            None => {
                return Ok(Query {
                    lhs: parse_read(text.trim())?,
                    test: None,
                });
            }
        };
        let lhs = parse_read(text[..pos].trim())?;
        let rhs_text = text[pos + len..].trim();
        let rhs = match op {
            Op::Like | Op::NotLike => {
                let v: Value = parse_rhs_value(rhs_text);
                match v {
                    Value::String(s) => Rhs::Pattern(Pattern::new(&s)),
                    _ => return Err(format!("'%' needs a string pattern, not {rhs_text}")),
                }
            }
            _ => match rhs_text {
                "~true" => Rhs::Tilde(Tilde::True),
                "~false" => Rhs::Tilde(Tilde::False),
                "~null" => Rhs::Tilde(Tilde::Null),
                "~*" => Rhs::Tilde(Tilde::Any),
                t if t.starts_with('~') => return Err(format!("unknown '~' value {t}")),
                t => Rhs::Value(parse_rhs_value(t)),
            },
        };
        if matches!(rhs, Rhs::Tilde(_)) && !matches!(op, Op::Eq | Op::Ne) {
            return Err("'~' values only go with == and !=".into());
        }
        Ok(Query {
            lhs,
            test: Some((op, rhs)),
        })
    }

    /// Whether an array element matches.
    pub fn matches(&self, elem: &Value) -> bool {
        let got: Option<Cow<'_, Value>> = if self.lhs.is_empty() {
            Some(Cow::Borrowed(elem))
        } else {
            eval(&self.lhs, Cow::Borrowed(elem))
        };
        let Some((op, rhs)) = &self.test else {
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
}

/// A right-hand side: a JSON value, or (unquoted text that is not JSON) a string.
fn parse_rhs_value(t: &str) -> Value {
    match json_prefix(t) {
        Some((v, used)) if used == t.len() => v,
        _ => Value::String(t.to_string()),
    }
}

/// Finds the operator outside strings, brackets and parentheses: (offset, op, length).
fn find_op(text: &str) -> ParseResult<Option<(usize, Op, usize)>> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => {
                i = super::parse::scan_string(text, i)?;
                continue;
            }
            b'(' | b'[' | b'{' => {
                i = super::parse::scan_balanced(text, i)?;
                continue;
            }
            b'=' => {
                let len = if b.get(i + 1) == Some(&b'=') { 2 } else { 1 };
                return Ok(Some((i, Op::Eq, len)));
            }
            b'!' => match b.get(i + 1) {
                Some(b'=') => return Ok(Some((i, Op::Ne, 2))),
                Some(b'%') => return Ok(Some((i, Op::NotLike, 2))),
                _ => {}
            },
            b'<' => {
                return Ok(Some(if b.get(i + 1) == Some(&b'=') {
                    (i, Op::Le, 2)
                } else {
                    (i, Op::Lt, 1)
                }));
            }
            b'>' => {
                return Ok(Some(if b.get(i + 1) == Some(&b'=') {
                    (i, Op::Ge, 2)
                } else {
                    (i, Op::Gt, 1)
                }));
            }
            b'%' => return Ok(Some((i, Op::Like, 1))),
            _ => {}
        }
        i += 1;
    }
    Ok(None)
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
