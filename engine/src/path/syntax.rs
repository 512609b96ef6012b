//! The compiled form of a path: what [`super::parse`] makes of path text and what
//! [`super::get`], [`super::set`] and [`super::modifiers`] work on. Types only (and the
//! key pattern's matching), so that the parser and the evaluator, each recursive in
//! itself, depend on it and not on each other.

use crate::json::{KeyHint, Value};

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
        /// The key's tag and last place ([`crate::json::KeyHint`]), computed once here.
        hint: KeyHint,
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
    /// Plain keys and indexes only (no pipe): read by walking borrowed values, as a
    /// simple path is.
    pub keys_only: bool,
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
    pub(crate) fn new(text: &str) -> Pattern {
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
    pub(crate) fn matches(&self, s: &str) -> bool {
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

/// A compiled query.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub lhs: Vec<Comp>,
    pub test: Option<(Op, Rhs)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
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
pub(crate) enum Rhs {
    Value(Value),
    Pattern(Pattern),
    Tilde(Tilde),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tilde {
    True,
    False,
    Null,
    Any,
}

/// A compiled modifier.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Modifier {
    This,
    Reverse,
    Ugly,
    Pretty(crate::json::pretty::PrettyOptions),
    Valid,
    Flatten { deep: bool },
    Join,
    Keys,
    Values,
    ToStr,
    FromStr,
    Group,
    Dig(String),
    Dedupe,
}

/// The modifier names sluice knows. As in GJSON, `@name` with any other name is a plain
/// key (so `@timestamp` reads the key `@timestamp`).
pub(crate) const NAMES: &[&str] = &[
    "this", "reverse", "ugly", "pretty", "valid", "flatten", "join", "keys", "values", "tostr",
    "fromstr", "group", "dig", "dedupe",
];

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
    /// The key's tag and last place ([`crate::json::KeyHint`]), computed once here.
    pub hint: KeyHint,
}
