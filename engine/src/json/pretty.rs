//! Pretty JSON text laid out as GJSON's `@pretty` lays it out (Go's `tidwall/pretty`), so a
//! Substation config that ends with `obj.cp({ obj: { src: '@pretty' } })` prints the same
//! lines.
//!
//! The layout: an object puts each member on its own line, `"key": value`, indented one
//! step per level; an array goes on one line (`[1, 2, [3, 4]]`) when it holds no object and
//! fits in `width` columns counted from the start of its line, else one element per line;
//! empty containers are `{}` and `[]`; the text ends with a newline.

use super::Value;
use super::write::write_compact;

/// The options of `@pretty`, with `tidwall/pretty`'s defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PrettyOptions {
    /// Sort object keys.
    pub sort_keys: bool,
    /// One indentation step.
    pub indent: String,
    /// Text at the start of every line.
    pub prefix: String,
    /// The widest line a one-line array may make.
    pub width: usize,
}

impl Default for PrettyOptions {
    fn default() -> Self {
        PrettyOptions {
            sort_keys: false,
            indent: "  ".into(),
            prefix: String::new(),
            width: 80,
        }
    }
}

/// The pretty text of `v`, newline-terminated.
pub fn to_pretty(v: &Value, opts: &PrettyOptions) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(opts.prefix.as_bytes());
    let mut line_start = 0;
    write_pretty(&mut out, v, opts, 0, &mut line_start);
    out.push(b'\n');
    out
}

fn newline(out: &mut Vec<u8>, opts: &PrettyOptions, depth: usize, line_start: &mut usize) {
    out.push(b'\n');
    *line_start = out.len();
    out.extend_from_slice(opts.prefix.as_bytes());
    for _ in 0..depth {
        out.extend_from_slice(opts.indent.as_bytes());
    }
}

fn write_pretty(
    out: &mut Vec<u8>,
    v: &Value,
    opts: &PrettyOptions,
    depth: usize,
    line_start: &mut usize,
) {
    match v {
        Value::Object(m) if m.is_empty() => out.extend_from_slice(b"{}"),
        Value::Array(a) if a.is_empty() => out.extend_from_slice(b"[]"),
        Value::Object(m) => {
            let mut members: Vec<_> = m.iter().collect();
            if opts.sort_keys {
                members.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push(b'{');
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, opts, depth + 1, line_start);
                super::write::write_str(out, k);
                out.extend_from_slice(b": ");
                write_pretty(out, x, opts, depth + 1, line_start);
            }
            newline(out, opts, depth, line_start);
            out.push(b'}');
        }
        Value::Array(a) => {
            if opts.width > 0 {
                let room = opts.width.saturating_sub(out.len() - *line_start);
                if room > 3 {
                    let mut one_line = Vec::new();
                    if one_line_array(&mut one_line, a) && one_line.len() <= room {
                        out.extend_from_slice(&one_line);
                        return;
                    }
                }
            }
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, opts, depth + 1, line_start);
                write_pretty(out, x, opts, depth + 1, line_start);
            }
            newline(out, opts, depth, line_start);
            out.push(b']');
        }
        scalar => write_compact(out, scalar),
    }
}

/// `[a, b, [c]]`, or `false` when the array holds an object (never put on one line).
fn one_line_array(out: &mut Vec<u8>, a: &[Value]) -> bool {
    out.push(b'[');
    for (i, x) in a.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        match x {
            // tidwall/pretty gives up on one line at any object, even `{}`.
            Value::Object(_) => return false,
            Value::Array(inner) if !inner.is_empty() => {
                if !one_line_array(out, inner) {
                    return false;
                }
            }
            other => write_compact(out, other),
        }
    }
    out.push(b']');
    true
}

#[cfg(test)]
mod tests {
    use super::{PrettyOptions, to_pretty};
    use crate::json;

    fn pretty(v: crate::Value) -> String {
        String::from_utf8(to_pretty(&v, &PrettyOptions::default())).unwrap()
    }

    /// The layouts Substation's examples print (their `stdout.txt`).
    #[test]
    fn layouts() {
        assert_eq!(
            pretty(json!({"a": [1, 2, 3, 4, 5, 6]})),
            "{\n  \"a\": [1, 2, 3, 4, 5, 6]\n}\n"
        );
        assert_eq!(
            pretty(json!({"product": "churro", "info": {"calories": "500", "price": "9.99"}})),
            "{\n  \"product\": \"churro\",\n  \"info\": {\n    \"calories\": \"500\",\n    \"price\": \"9.99\"\n  }\n}\n"
        );
        assert_eq!(
            pretty(json!({"a": [{"c": 2, "z": true}, {"c": 4}]})),
            "{\n  \"a\": [\n    {\n      \"c\": 2,\n      \"z\": true\n    },\n    {\n      \"c\": 4\n    }\n  ]\n}\n"
        );
        assert_eq!(
            pretty(json!({"kv_store": ["burger", "pizza"], "e": {}, "f": []})),
            "{\n  \"kv_store\": [\"burger\", \"pizza\"],\n  \"e\": {},\n  \"f\": []\n}\n"
        );
        assert_eq!(pretty(json!([1, [2, [3]], []])), "[1, [2, [3]], []]\n");
        assert_eq!(pretty(json!("s")), "\"s\"\n");
    }

    #[test]
    fn long_arrays_go_one_element_per_line() {
        let long: Vec<String> = (0..20).map(|i| format!("element{i}")).collect();
        let text = pretty(json!({ "a": long }));
        assert!(
            text.starts_with("{\n  \"a\": [\n    \"element0\",\n"),
            "{text}"
        );
        // Exactly at the width it still fits on one line.
        let opts = PrettyOptions {
            width: 9,
            ..PrettyOptions::default()
        };
        assert_eq!(
            String::from_utf8(to_pretty(&json!([1, 2, 3]), &opts)).unwrap(),
            "[1, 2, 3]\n"
        );
        let opts = PrettyOptions {
            width: 8,
            ..PrettyOptions::default()
        };
        assert_eq!(
            String::from_utf8(to_pretty(&json!([1, 2, 3]), &opts)).unwrap(),
            "[\n  1,\n  2,\n  3\n]\n"
        );
    }

    #[test]
    fn options() {
        let opts = PrettyOptions {
            sort_keys: true,
            indent: "\t".into(),
            prefix: "> ".into(),
            width: 80,
        };
        assert_eq!(
            String::from_utf8(to_pretty(&json!({"b": 1, "a": 2}), &opts)).unwrap(),
            "> {\n> \t\"a\": 2,\n> \t\"b\": 1\n> }\n"
        );
    }
}
