//! Compiling path text into components: GJSON syntax for reads, SJSON syntax for writes.
//!
//! Reads are compiled into a list of [`Comp`]s, each remembering whether it followed a `.`
//! or a `|` (the two differ after `#` and `#(...)#`, see [`super::get`]). Nested pieces
//! (query operands, multipath members) are cut out of the text first and compiled
//! recursively.

use crate::json::Value;

use super::syntax::{
    Comp, Kind, Member, Modifier, Multi, NAMES, Op, ParseResult, Pattern, Query, Rhs, Tilde, WStep,
};

/// Compiles a read path.
pub(crate) fn parse_read(text: &str) -> ParseResult<Vec<Comp>> {
    let mut comps = Vec::new();
    if text.is_empty() {
        return Ok(comps);
    }
    let b = text.as_bytes();
    let mut pos = 0;
    let mut pipe = false;
    loop {
        let (kind, end) = parse_comp(text, pos)?;
        comps.push(Comp { pipe, kind });
        if end >= b.len() {
            break;
        }
        match b[end] {
            b'.' => pipe = false,
            b'|' => pipe = true,
            _ => {
                return Err(format!(
                    "unexpected {:?} at offset {end}",
                    &text[end..end + utf8_len(b[end])]
                ));
            }
        }
        pos = end + 1;
        if pos >= b.len() {
            // A trailing separator: GJSON reads it as an empty key.
            comps.push(Comp {
                pipe,
                kind: Kind::Key {
                    name: "".into(),
                    index: None,
                    hint: crate::json::KeyHint::new(""),
                },
            });
            break;
        }
    }
    Ok(comps)
}

fn utf8_len(first: u8) -> usize {
    match first {
        0..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Parses the component starting at `pos`; returns it and the offset just after it (a
/// separator or the end).
fn parse_comp(text: &str, pos: usize) -> ParseResult<(Kind, usize)> {
    let b = text.as_bytes();
    match b.get(pos) {
        Some(b'@') if is_modifier(text, pos) => parse_modifier(text, pos),
        Some(b'[') | Some(b'{') => {
            let end = scan_balanced(text, pos)?;
            let multi = parse_multi(&text[pos..end])?;
            Ok((Kind::Multi(Box::new(multi)), end))
        }
        Some(b'!') => {
            let (v, used) = json_prefix(&text[pos + 1..])
                .ok_or_else(|| format!("invalid literal after '!' at offset {pos}"))?;
            Ok((Kind::Literal(Box::new(v)), pos + 1 + used))
        }
        Some(b'#') if b.get(pos + 1) == Some(&b'(') => {
            let close = scan_balanced(text, pos + 1)?;
            let inner = &text[pos + 2..close - 1];
            let query = parse_query(inner)?;
            let (all, end) = if b.get(close) == Some(&b'#') {
                (true, close + 1)
            } else {
                (false, close)
            };
            Ok((
                Kind::Query {
                    query: Box::new(query),
                    all,
                },
                end,
            ))
        }
        _ => parse_key(text, pos),
    }
}

/// A plain key (with escapes and wildcards) or `#`.
fn parse_key(text: &str, pos: usize) -> ParseResult<(Kind, usize)> {
    let b = text.as_bytes();
    let mut end = pos;
    let mut wild = false;
    let mut escaped = false;
    while end < b.len() {
        match b[end] {
            b'\\' => {
                escaped = true;
                end += 1;
                if end >= b.len() {
                    return Err("ends with a lone '\\'".into());
                }
                end += utf8_len(b[end]);
                continue;
            }
            b'.' | b'|' => break,
            b'*' | b'?' => wild = true,
            _ => {}
        }
        end += 1;
    }
    let raw = &text[pos..end];
    if raw == "#" {
        return Ok((Kind::Count, end));
    }
    if wild {
        return Ok((Kind::Wild(Pattern::new(raw)), end));
    }
    let name: Box<str> = if escaped {
        unescape(raw).into()
    } else {
        raw.into()
    };
    let index = parse_index(&name);
    let hint = crate::json::KeyHint::new(&name);
    Ok((Kind::Key { name, index, hint }, end))
}

/// The index a key addresses in an array: all ASCII digits.
pub(crate) fn parse_index(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Removes `\` escapes.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the `@` at `pos` starts a known modifier; otherwise it is part of a key, as
/// GJSON does when no modifier has that name.
fn is_modifier(text: &str, pos: usize) -> bool {
    let b = text.as_bytes();
    let mut end = pos + 1;
    while end < b.len() && !matches!(b[end], b'.' | b'|' | b':') {
        end += 1;
    }
    NAMES.contains(&&text[pos + 1..end])
}

fn parse_modifier(text: &str, pos: usize) -> ParseResult<(Kind, usize)> {
    let b = text.as_bytes();
    let mut end = pos + 1;
    while end < b.len() && !matches!(b[end], b'.' | b'|' | b':') {
        end += 1;
    }
    let name = &text[pos + 1..end];
    let mut arg = None;
    if b.get(end) == Some(&b':') {
        let start = end + 1;
        if matches!(b.get(start), Some(b'{' | b'[' | b'"')) {
            let (_, used) = json_prefix(&text[start..])
                .ok_or_else(|| format!("invalid argument for @{name}"))?;
            end = start + used;
        } else {
            end = start;
            while end < b.len() && !matches!(b[end], b'.' | b'|') {
                if b[end] == b'\\' {
                    end += 1;
                }
                end += 1;
            }
            end = end.min(b.len());
        }
        arg = Some(&text[start..end]);
    }
    let m = parse_modifier_args(name, arg)?;
    Ok((Kind::Modifier(Box::new(m)), end))
}

/// Parses `[a,b]` or `{a,"k":b}` (the whole text, brackets included).
fn parse_multi(text: &str) -> ParseResult<Multi> {
    let object = text.starts_with('{');
    let inner = &text[1..text.len() - 1];
    let mut members = Vec::new();
    for item in split_top(inner, b',')? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (key, path) = if object {
            split_member_key(item)?
        } else {
            (None, item)
        };
        let comps = parse_read(path)?;
        let key = match key {
            Some(k) => k.into(),
            None => default_key(&comps),
        };
        let keys_only = keys_only(&comps);
        members.push(Member {
            key,
            comps,
            keys_only,
        });
    }
    Ok(Multi { object, members })
}

/// An explicit `"key":` or `key:` prefix of an object multipath member.
fn split_member_key(item: &str) -> ParseResult<(Option<String>, &str)> {
    if item.starts_with('"') {
        let end = scan_string(item, 0)?;
        let key: String = serde_json::from_str(&item[..end])
            .map_err(|e| format!("bad multipath key {}: {e}", &item[..end]))?;
        let rest = item[end..].trim_start();
        return match rest.strip_prefix(':') {
            Some(path) => Ok((Some(key), path.trim())),
            None => Err(format!("expected ':' after multipath key {key:?}")),
        };
    }
    let b = item.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b':' if i > 0 => return Ok((Some(unescape(&item[..i])), item[i + 1..].trim())),
            b'.' | b'|' | b'@' | b'#' | b'(' | b'[' | b'{' | b'!' | b'"' | b'*' | b'?' => break,
            _ => {}
        }
        i += 1;
    }
    Ok((None, item))
}

/// The key GJSON gives a multipath member without an explicit one: its last plain key.
fn default_key(comps: &[Comp]) -> Box<str> {
    match comps.last().map(|c| &c.kind) {
        Some(Kind::Key { name, .. }) => name.clone(),
        _ => "_".into(),
    }
}

/// Splits at `sep` bytes that are outside strings, brackets and parentheses.
pub(crate) fn split_top(text: &str, sep: u8) -> ParseResult<Vec<&str>> {
    let b = text.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => {
                i = scan_string(text, i)?;
                continue;
            }
            b'(' | b'[' | b'{' => {
                i = scan_balanced(text, i)?;
                continue;
            }
            c if c == sep => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&text[start..]);
    Ok(parts)
}

/// The offset just after the JSON string starting at `pos` (a `"`).
pub(crate) fn scan_string(text: &str, pos: usize) -> ParseResult<usize> {
    let b = text.as_bytes();
    let mut i = pos + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(format!("unterminated string at offset {pos}"))
}

/// The offset just after the bracketed group (`(`, `[` or `{`) starting at `pos`.
pub(crate) fn scan_balanced(text: &str, pos: usize) -> ParseResult<usize> {
    let b = text.as_bytes();
    let mut stack: smallvec::SmallVec<[u8; 8]> = smallvec::SmallVec::new();
    let mut i = pos;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => {
                i = scan_string(text, i)?;
                continue;
            }
            b'(' => stack.push(b')'),
            b'[' => stack.push(b']'),
            b'{' => stack.push(b'}'),
            c @ (b')' | b']' | b'}') => {
                if stack.pop() != Some(c) {
                    return Err(format!("unbalanced {:?} at offset {i}", c as char));
                }
                if stack.is_empty() {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(format!(
        "unclosed {:?} at offset {pos}",
        text[pos..].chars().next().unwrap_or(' ')
    ))
}

/// Parses one JSON value at the start of `text`; returns it and the bytes it used.
pub(crate) fn json_prefix(text: &str) -> Option<(Value, usize)> {
    let first = *text.as_bytes().first()?;
    let end = match first {
        b'"' => scan_string(text, 0).ok()?,
        b'{' | b'[' => scan_balanced(text, 0).ok()?,
        _ => {
            // A number or a bare word: up to a separator (a `.` inside a number is kept).
            let b = text.as_bytes();
            let mut i = 0;
            while i < b.len() {
                match b[i] {
                    b'|' | b',' | b')' | b']' | b'}' => break,
                    b'.' if !(i > 0
                        && b[i - 1].is_ascii_digit()
                        && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
                    {
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            i
        }
    };
    let v = serde_json::from_str(&text[..end]).ok()?;
    Some((v, end))
}

/// Compiles a write path; `Err` says why the path cannot be written to.
pub(crate) fn parse_write(text: &str) -> ParseResult<Vec<WStep>> {
    let b = text.as_bytes();
    let mut steps = Vec::new();
    let mut start = 0;
    loop {
        let mut end = start;
        let mut escaped = false;
        while end < b.len() {
            match b[end] {
                b'\\' => {
                    escaped = true;
                    end += 1;
                    if end >= b.len() {
                        return Err("ends with a lone '\\'".into());
                    }
                }
                b'.' => break,
                b'|' => return Err("a '|' pipe cannot be written to".into()),
                b'*' | b'?' => return Err("a wildcard cannot be written to".into()),
                _ => {}
            }
            end += 1;
        }
        let raw = &text[start..end];
        match raw.as_bytes().first() {
            Some(b'#') => return Err("'#' (count or query) cannot be written to".into()),
            Some(b'@') if raw.len() > 1 && NAMES.contains(&&raw[1..]) => {
                return Err("a modifier cannot be written to".into());
            }
            Some(b'[' | b'{') => return Err("a multipath cannot be written to".into()),
            Some(b'!') => return Err("a literal cannot be written to".into()),
            _ => {}
        }
        let (forced, raw) = match raw.strip_prefix(':') {
            Some(r) => (true, r),
            None => (false, raw),
        };
        let name: compact_str::CompactString = if escaped {
            unescape(raw).into()
        } else {
            raw.into()
        };
        let (index, append) = if forced || escaped {
            (None, false)
        } else if &*name == "-1" {
            (None, true)
        } else if !name.is_empty() && name.bytes().all(|c| c.is_ascii_digit()) {
            let i = name
                .parse::<usize>()
                .map_err(|_| format!("index {name} is too large"))?;
            (Some(i), false)
        } else {
            (None, false)
        };
        let hint = crate::json::KeyHint::new(&name);
        steps.push(WStep {
            name,
            index,
            append,
            hint,
        });
        if end >= b.len() {
            break;
        }
        start = end + 1;
    }
    Ok(steps)
}

/// Compiles the text between `#(` and `)`.
pub(crate) fn parse_query(text: &str) -> ParseResult<Query> {
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

/// A right-hand side: a JSON value, or (unquoted text that is not JSON) a string.
fn parse_rhs_value(t: &str) -> Value {
    match json_prefix(t) {
        Some((v, used)) if used == t.len() => v,
        _ => Value::String(t.into()),
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
                i = scan_string(text, i)?;
                continue;
            }
            b'(' | b'[' | b'{' => {
                i = scan_balanced(text, i)?;
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

/// Compiles `@name` with its optional argument text.
fn parse_modifier_args(name: &str, arg: Option<&str>) -> ParseResult<Modifier> {
    Ok(match name {
        "this" => Modifier::This,
        "reverse" => Modifier::Reverse,
        "ugly" => Modifier::Ugly,
        "pretty" => Modifier::Pretty(pretty_options(arg)?),
        "valid" => Modifier::Valid,
        "flatten" => Modifier::Flatten {
            deep: opt_bool(arg, "deep")?,
        },
        // `preserve` keeps duplicate keys in GJSON's text output; a parsed object
        // cannot hold duplicates, so both forms give the same value.
        "join" => {
            opt_bool(arg, "preserve")?;
            Modifier::Join
        }
        "keys" => Modifier::Keys,
        "values" => Modifier::Values,
        "tostr" => Modifier::ToStr,
        "fromstr" => Modifier::FromStr,
        "group" => Modifier::Group,
        "dig" => match arg {
            Some(a) if !a.is_empty() => {
                let key = match serde_json::from_str::<Value>(a) {
                    Ok(Value::String(s)) => s.into_string(),
                    _ => unescape(a),
                };
                Modifier::Dig(key)
            }
            _ => return Err("@dig needs a key: @dig:name".into()),
        },
        "dedupe" => Modifier::Dedupe,
        other => return Err(format!("unknown modifier @{other}")),
    })
}

/// Reads a boolean option from a JSON object argument.
/// `@pretty`'s argument: `sortKeys`, `indent`, `prefix`, `width` (GJSON's names).
fn pretty_options(arg: Option<&str>) -> ParseResult<crate::json::pretty::PrettyOptions> {
    let mut opts = crate::json::pretty::PrettyOptions::default();
    let Some(arg) = arg else { return Ok(opts) };
    let v: Value =
        serde_json::from_str(arg).map_err(|e| format!("modifier argument {arg}: {e}"))?;
    if let Some(b) = v.get("sortKeys").and_then(Value::as_bool) {
        opts.sort_keys = b;
    }
    if let Some(s) = v.get("indent").and_then(Value::as_str) {
        opts.indent = s.to_string();
    }
    if let Some(s) = v.get("prefix").and_then(Value::as_str) {
        opts.prefix = s.to_string();
    }
    if let Some(n) = v.get("width").and_then(Value::as_u64) {
        opts.width = usize::try_from(n).unwrap_or(usize::MAX);
    }
    Ok(opts)
}

fn opt_bool(arg: Option<&str>, key: &str) -> ParseResult<bool> {
    let Some(arg) = arg else { return Ok(false) };
    let v: Value =
        serde_json::from_str(arg).map_err(|e| format!("modifier argument {arg}: {e}"))?;
    Ok(v.get(key).and_then(Value::as_bool).unwrap_or(false))
}

/// Whether `comps` are plain keys and indexes only, with no pipe: such a path reads by
/// walking borrowed values ([`super::get::walk`]).
pub(super) fn keys_only(comps: &[Comp]) -> bool {
    comps
        .iter()
        .all(|c| !c.pipe && matches!(c.kind, Kind::Key { .. }))
}
