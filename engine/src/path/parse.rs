//! Compiling path text into components: GJSON syntax for reads, SJSON syntax for writes.
//!
//! Reads are compiled into a list of [`Comp`]s, each remembering whether it followed a `.`
//! or a `|` (the two differ after `#` and `#(...)#`, see [`super::get`]). Nested pieces
//! (query operands, multipath members) are cut out of the text first and compiled
//! recursively.

use crate::json::Value;

use super::modifiers::Modifier;
use super::query::Query;

/// One component of a read path.
#[derive(Debug, Clone)]
pub(crate) struct Comp {
    /// The component followed a `|` (not a `.`).
    pub pipe: bool,
    pub kind: Kind,
}

/// What a component does.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// An object key, or an array index when `index` is set (the text is all digits).
    Key {
        name: Box<str>,
        index: Option<usize>,
        /// The key's tag ([`crate::json::key_tag`]), computed once here.
        tag: u64,
    },
    /// A key with `*` / `?` wildcards: the first matching object key.
    Wild(Pattern),
    /// `#`: the length of an array, or (followed by `.`) a map over its elements.
    Count,
    /// `#(...)` (first match) or `#(...)#` (all matches).
    Query { query: Box<Query>, all: bool },
    /// `@name[:arg]`.
    Modifier(Box<Modifier>),
    /// `[a,b]` or `{a,"k":b}`.
    Multi(Box<Multi>),
    /// `!json`: a literal value.
    Literal(Box<Value>),
}

/// A multipath: a new array or object built from several paths.
#[derive(Debug, Clone)]
pub(crate) struct Multi {
    pub object: bool,
    pub members: Vec<Member>,
}

/// One member of a multipath.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// The key in an object multipath (explicit, or the path's last key, or `_`).
    pub key: Box<str>,
    pub comps: Vec<Comp>,
}

/// A key pattern with `*` (any run) and `?` (any one character); escaped characters are
/// literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern(Vec<Tok>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Lit(char),
    Any,
    One,
}

impl Pattern {
    /// Compiles glob text where `\` escapes the next character.
    pub fn new(text: &str) -> Pattern {
        let mut toks = Vec::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            toks.push(match c {
                '\\' => Tok::Lit(chars.next().unwrap_or('\\')),
                '*' => Tok::Any,
                '?' => Tok::One,
                c => Tok::Lit(c),
            });
        }
        Pattern(toks)
    }

    /// Whether `s` matches the whole pattern.
    pub fn matches(&self, s: &str) -> bool {
        let text: smallvec::SmallVec<[char; 64]> = s.chars().collect();
        let pat = &self.0;
        // Iterative glob matching with backtracking to the last `*`.
        let (mut p, mut t) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match pat.get(p) {
                Some(Tok::Any) => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(Tok::One) => {
                    p += 1;
                    t += 1;
                }
                Some(Tok::Lit(c)) if *c == text[t] => {
                    p += 1;
                    t += 1;
                }
                _ => match star {
                    Some((sp, st)) => {
                        p = sp + 1;
                        t = st + 1;
                        star = Some((sp, st + 1));
                    }
                    None => return false,
                },
            }
        }
        pat[p..].iter().all(|t| *t == Tok::Any)
    }
}

/// A parse failure: the reason (the caller adds the path text).
pub(crate) type ParseResult<T> = Result<T, String>;

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
                    tag: crate::json::key_tag(""),
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
            let query = Query::parse(inner)?;
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
    let tag = crate::json::key_tag(&name);
    Ok((Kind::Key { name, index, tag }, end))
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
    super::modifiers::NAMES.contains(&&text[pos + 1..end])
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
    let m = Modifier::parse(name, arg)?;
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
        members.push(Member { key, comps });
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

/// One step of a write path (SJSON).
#[derive(Debug, Clone)]
pub(crate) struct WStep {
    /// The key as an object key (escapes removed, `:` prefix removed); stored as the map's
    /// key type so inserting it is a copy of one word-sized value, not a new string.
    pub name: compact_str::CompactString,
    /// The array index, when the key is all digits and not forced to be an object key.
    pub index: Option<usize>,
    /// `-1` (not forced): append on set, the last element on delete.
    pub append: bool,
    /// The key's tag ([`crate::json::key_tag`]), computed once here.
    pub tag: u64,
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
            Some(b'@') if raw.len() > 1 && super::modifiers::NAMES.contains(&&raw[1..]) => {
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
        let tag = crate::json::key_tag(&name);
        steps.push(WStep {
            name,
            index,
            append,
            tag,
        });
        if end >= b.len() {
            break;
        }
        start = end + 1;
    }
    Ok(steps)
}
