//! Bounds on how deeply a Jsonnet text nests, checked before it is parsed.
//!
//! Why: jrsonnet's parser, its static analysis, its evaluator and the C++ formatter behind
//! `sluice fmt` all recurse once per level of the syntax tree, on the thread's own stack,
//! and a text nested a few thousand levels deep overflows it: the process aborts (exit
//! 134), which for `sluice play` is the whole server. Two things nest the tree:
//!
//! - brackets (`[`, `{`, `(`): 2 KB of `[` was enough;
//! - everything else that has an operand: a flat chain of binary operators (`1+1+…`, a
//!   left-associative chain of N operators is a tree N deep), unary operators (`----1`),
//!   `local …;`, `if … else`, `function (…)`, `assert …;` and `error` chains, calls
//!   (`f(1)(1)…`) and object extensions (`o {} {}`). 20,000 terms (40 KB) aborted.
//!   (`.field` and `[index]` chains, which jrsonnet keeps flat, are counted all the same:
//!   600 of them is no real config either.)
//!
//! jrsonnet's own limit (its call depth, 200) counts only calls, not these levels. Both
//! bounds are found in one linear pass over the text (outside strings and comments) that
//! needs no stack, before anything recursive runs.
//!
//! The expression depth is an upper bound on the tree's depth: every node of the tree that
//! has a child stands on a token of its own (an operator character, a keyword or name, a
//! `.`, an opening bracket), so a node's depth is at most the number of such tokens on its
//! way from the root. Within one bracket, the tokens of an element (between commas) are
//! counted, and after a `;` (the end of `local …;` or `assert …;`, whose body the rest is)
//! counting goes on from the most its binds had; a bracket adds its own deepest element to
//! the element it stands in. Strings, numbers, `self`-like leaves cost nothing; names and
//! two-character operators are counted as if each were a level, which only makes the bound
//! safer. No real config comes near either limit: the library's deepest expression counts
//! about [`LIBRARY_DEPTH`] (checked by a test), a real config nests about 15 brackets.

/// The deepest bracket nesting a Jsonnet text may have (`[`, `{` and `(` together).
pub const MAX_NESTING: usize = 500;

/// The deepest a Jsonnet expression may be, as counted by [`check`] (see the module
/// documentation): the syntax tree is at most this deep. The evaluation of sluice's configs
/// runs on a thread whose stack holds this depth with a wide margin (`jsonnet::STACK_BYTES`).
pub const MAX_DEPTH: usize = 600;

/// The depth [`check`] counts for the embedded library's deepest expression (a test keeps
/// it current), far below [`MAX_DEPTH`].
pub const LIBRARY_DEPTH: usize = 150;

/// What a text nests too deeply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deep {
    /// Brackets, past [`MAX_NESTING`].
    Brackets,
    /// An expression, past [`MAX_DEPTH`].
    Expression,
}

/// A text nests deeper than [`MAX_NESTING`] brackets or [`MAX_DEPTH`] levels of expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{line}:{column}: {} (sluice's limit for Jsonnet, which keeps a deeply nested text from \
     overflowing the stack; no option raises it){}",
    match .what {
        Deep::Brackets => format!("brackets nested more than {MAX_NESTING} deep"),
        Deep::Expression => format!(
            "expression nested more than {MAX_DEPTH} deep (a chain of operators, `local`s, \
             `if`s, calls or the like)"
        ),
    },
    match .what {
        Deep::Brackets => "",
        Deep::Expression => "; split it into bracketed parts, or into functions",
    }
)]
pub struct TooDeep {
    /// The line (from 1) of the token that went past the limit.
    pub line: usize,
    /// Its column (from 1, in characters).
    pub column: usize,
    /// What nests too deeply.
    pub what: Deep,
}

/// The expression depth counted inside one bracket (or the whole text): see the module
/// documentation.
#[derive(Default, Clone, Copy)]
struct Level {
    /// The depth of the enclosing elements as far as they were read when the bracket
    /// opened (what it holds is deeper): to report a text too deep at the first token that
    /// shows it.
    base: usize,
    /// What the element being read starts from, within the bracket: the tokens of the
    /// `local …;` and `assert …;` it is the body of.
    floor: usize,
    /// The tokens of the element being read (since the last `,` or `;`).
    tokens: usize,
    /// The most tokens of one bind since the last `;` (`local a = …, b = …;`).
    binds: usize,
    /// The deepest bracket closed in the element being read.
    inner: usize,
    /// The deepest element already read.
    deepest: usize,
}

impl Level {
    /// The depth of the element being read, from the bracket.
    fn depth(&self) -> usize {
        self.floor + self.tokens + self.inner
    }
    /// What is known of the depth of the element being read, from the top.
    fn known(&self) -> usize {
        self.base + self.depth()
    }
    fn end_element(&mut self) {
        self.deepest = self.deepest.max(self.depth());
        self.binds = self.binds.max(self.tokens);
        self.tokens = 0;
        self.inner = 0;
    }
    fn end_binds(&mut self) {
        self.end_element();
        self.floor += self.binds;
        self.binds = 0;
    }
    fn close(mut self) -> usize {
        self.end_element();
        self.deepest
    }
}

/// Checks that `text` nests `[`, `{` and `(` at most [`MAX_NESTING`] deep and its
/// expressions at most [`MAX_DEPTH`] deep, not counting what is in strings, text blocks and
/// comments. Unbalanced or malformed text is counted as far as it goes: the parser reports
/// it better.
pub fn check(text: &str) -> Result<(), TooDeep> {
    depth(text).map(|_| ())
}

/// The expression depth of `text` as [`check`] counts it, or why it is too deep.
pub fn depth(text: &str) -> Result<usize, TooDeep> {
    scan(text, &mut Imports::default())
}

/// The paths a Jsonnet text imports (the string literal after each `import`, `importstr` and
/// `importbin`), by how: what `import` reads is Jsonnet, parsed and so bounded; what
/// `importstr` and `importbin` read is data, never parsed (a word list may well hold more
/// than [`MAX_DEPTH`] names), which the caller need not check.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Imports {
    /// After `import`.
    pub jsonnet: Vec<String>,
    /// After `importstr` or `importbin`.
    pub data: Vec<String>,
}

/// [`check`], and the paths `text` imports.
pub fn check_and_list_imports(text: &str) -> Result<Imports, TooDeep> {
    let mut imports = Imports::default();
    scan(text, &mut imports)?;
    Ok(imports)
}

/// The value of the string literal `lit` (quotes included; `verbatim` for `@'…'`).
fn literal(lit: &str, verbatim: bool) -> String {
    let Some(q) = lit.chars().next() else {
        return String::new();
    };
    let inner = lit
        .get(1..lit.len().saturating_sub(1).max(1))
        .unwrap_or_default();
    if verbatim {
        return inner.replace(&format!("{q}{q}"), &q.to_string());
    }
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// [`depth`], listing what `text` imports in `imports`.
fn scan(text: &str, imports: &mut Imports) -> Result<usize, TooDeep> {
    let b = text.as_bytes();
    // `levels[0]` is the text outside any bracket; one more per open bracket.
    let mut levels = vec![Level::default()];
    // After `import` (true) or `importstr`/`importbin` (false), until the next token.
    let mut importing: Option<bool> = None;
    let mut i = 0;
    while i < b.len() {
        let at = i;
        let mut token = false;
        let was_importing = importing.take();
        match b[i] {
            b'[' | b'{' | b'(' => {
                if levels.len() > MAX_NESTING {
                    return Err(too_deep(text, at, Deep::Brackets));
                }
                token = true;
                i += 1;
            }
            b']' | b'}' | b')' => {
                if levels.len() > 1 {
                    let closed = levels.pop().map_or(0, Level::close);
                    let top = last(&mut levels);
                    top.inner = top.inner.max(closed);
                    if top.known() > MAX_DEPTH {
                        return Err(too_deep(text, at, Deep::Expression));
                    }
                }
                i += 1;
            }
            b',' => {
                last(&mut levels).end_element();
                i += 1;
            }
            b';' => {
                last(&mut levels).end_binds();
                i += 1;
            }
            b'#' => {
                i = line_end(b, i);
                importing = was_importing;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = line_end(b, i);
                importing = was_importing;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = find(b, i + 2, b"*/").map_or(b.len(), |e| e + 2);
                importing = was_importing;
            }
            c if c.is_ascii_whitespace() => {
                i += 1;
                importing = was_importing;
            }
            b'|' if b[i..].starts_with(b"|||") => {
                i = find(b, i + 3, b"|||").map_or(b.len(), |e| e + 3);
            }
            b'@' if matches!(b.get(i + 1), Some(b'\'' | b'"')) => {
                // A verbatim string: no escapes but the quote doubled.
                let q = b[i + 1];
                i += 2;
                while i < b.len() {
                    if b[i] == q {
                        if b.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
                if let Some(jsonnet) = was_importing {
                    let lit = literal(text.get(at + 1..i.min(b.len())).unwrap_or_default(), true);
                    imports_push(imports, jsonnet, lit);
                }
            }
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                if let Some(jsonnet) = was_importing {
                    let lit = literal(text.get(at..i.min(b.len())).unwrap_or_default(), false);
                    imports_push(imports, jsonnet, lit);
                }
            }
            // Operators, each character a level (`&&` is one node, counted as two).
            b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'&' | b'|' | b'^'
            | b'~' | b'?' | b'.' => {
                token = true;
                i += 1;
            }
            // A name or keyword (`local`, `if`, `function`, `in`, ...).
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                token = true;
                importing = match &text[at..i] {
                    "import" => Some(true),
                    "importstr" | "importbin" => Some(false),
                    _ => None,
                };
            }
            // A number (its `.` and exponent with it): a leaf.
            c if c.is_ascii_digit() => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
            }
            _ => i += 1,
        }
        if token {
            let top = last(&mut levels);
            top.tokens += 1;
            if top.known() > MAX_DEPTH {
                return Err(too_deep(text, at, Deep::Expression));
            }
            if matches!(b[at], b'[' | b'{' | b'(') {
                // What the bracket holds is below all this element holds (its tokens
                // after the bracket too: `[x] + 1` adds to `x`'s depth when it closes).
                let base = top.known();
                levels.push(Level {
                    base,
                    ..Level::default()
                });
            }
        }
    }
    let mut deepest = 0;
    while let Some(level) = levels.pop() {
        deepest = deepest.max(level.base + level.close());
    }
    Ok(deepest)
}

fn imports_push(imports: &mut Imports, jsonnet: bool, path: String) {
    if jsonnet {
        imports.jsonnet.push(path);
    } else {
        imports.data.push(path);
    }
}

/// The level being read: `levels` is never empty.
fn last(levels: &mut Vec<Level>) -> &mut Level {
    if levels.is_empty() {
        levels.push(Level::default());
    }
    let n = levels.len() - 1;
    &mut levels[n]
}

/// The error for the token at byte `at` of `text`.
fn too_deep(text: &str, at: usize, what: Deep) -> TooDeep {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |n| n + 1);
    let column = text[start..at].chars().count() + 1;
    TooDeep { line, column, what }
}

fn line_end(b: &[u8], from: usize) -> usize {
    b[from..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| from + p)
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, n: usize) -> String {
        let close = match open {
            "[" => "]",
            "{" => "}",
            _ => ")",
        };
        format!("{}{}", open.repeat(n), close.repeat(n))
    }

    #[test]
    fn nesting_table() {
        let deep = MAX_NESTING + 1;
        let cases: Vec<(String, Option<(usize, usize)>)> = vec![
            (nested("[", MAX_NESTING), None),
            (nested("[", deep), Some((1, deep))),
            (nested("(", 5000), Some((1, deep))),
            (
                format!("{{a:\n  {}}}", nested("[", deep)),
                Some((2, deep + 1)),
            ),
            // Brackets in strings, text blocks and comments do not count.
            (format!("'{}'", "[".repeat(deep)), None),
            (format!("\"{}\\\"{}\"", "[".repeat(deep), "{"), None),
            (format!("@'{}'''", "[".repeat(deep)), None),
            (format!("|||\n  {}\n|||", "[".repeat(deep)), None),
            (format!("// {}\n1", "[".repeat(deep)), None),
            (format!("# {}\n1", "[".repeat(deep)), None),
            (format!("/* {} */ 1", "[".repeat(deep)), None),
            // Siblings do not add up.
            (format!("[{}]", "[[]],".repeat(10_000)), None),
            // Unbalanced text is the parser's to report.
            ("]]]][".into(), None),
            ("'unterminated [".into(), None),
        ];
        for (text, want) in cases {
            let got = check(&text).err().map(|e| {
                assert_eq!(e.what, Deep::Brackets, "{:.60}", text);
                (e.line, e.column)
            });
            assert_eq!(got, want, "{:.60}", text);
        }
    }

    #[test]
    fn the_error_names_the_limit() {
        let e = check(&nested("[", 1000)).unwrap_err().to_string();
        assert!(
            e.starts_with("1:501: brackets nested more than 500 deep"),
            "{e}"
        );
    }

    /// Every construct that nests the syntax tree without brackets, `MAX_DEPTH` and past
    /// it: `(text, whether it is within the bound, the line and column of the error)`.
    #[test]
    fn expression_depth_table() {
        let n = MAX_DEPTH;
        let over = n + 1;
        /// (what, the text, the line and column of the error)
        type Case = (&'static str, String, Option<(usize, usize)>);
        let cases: Vec<Case> = vec![
            ("a chain of +", format!("1{}", "+1".repeat(n)), None),
            (
                "one + more",
                format!("1{}", "+1".repeat(over)),
                Some((1, 2 * over)),
            ),
            (
                "&&",
                format!("a{}", "&&a".repeat(over / 2 + 1)),
                Some((1, over)),
            ),
            (
                "strings",
                format!("'a'{}", "+'a'".repeat(over)),
                Some((1, 4 * over)),
            ),
            ("unary -", format!("{}1", "-".repeat(over)), Some((1, over))),
            (
                "unary !",
                format!("{}true", "!".repeat(over)),
                Some((1, over)),
            ),
            (
                "a chain on its own line",
                format!("{{\n  a: 1{}\n}}", "+1".repeat(over)),
                Some((2, 2 * (n - 1) + 5)),
            ),
            // The unit's first token past the bound: `local` (column 1), `x` (7) or `=` (9).
            (
                "locals",
                format!("{}1", "local x = 1; ".repeat(over / 3 + 1)),
                Some((1, 13 * (n / 3) + [1, 7, 9][n % 3])),
            ),
            (
                "local binds",
                format!("{}1", "local x = 1, y = 2; ".repeat(over / 3 + 1)),
                Some((1, 20 * (n / 3) + [1, 7, 9][n % 3])),
            ),
            (
                "ifs",
                format!("{}1", "if a then 1 else ".repeat(over / 4 + 1)),
                Some((1, 17 * (n / 4) + 1)),
            ),
            (
                "functions",
                format!("{}1", "function(x) ".repeat(over / 2 + 1)),
                Some((1, 12 * (n / 2 - 1) + 9)),
            ),
            (
                "asserts",
                format!("{}1", "assert a; ".repeat(over / 2 + 1)),
                Some((1, 10 * (over / 2) + 1)),
            ),
            (
                "errors",
                format!("{}1", "error ".repeat(over)),
                Some((1, 6 * (over - 1) + 1)),
            ),
            (
                "calls",
                format!("f{}", "(1)".repeat(over)),
                Some((1, 3 * (over - 2) + 2)),
            ),
            (
                "extensions",
                format!("o{}", " {}".repeat(over)),
                Some((1, 3 * (over - 2) + 3)),
            ),
            (
                "fields",
                format!("o{}", ".a".repeat(over / 2 + 1)),
                Some((1, over)),
            ),
            (
                "indexes",
                format!("x{}", "[0]".repeat(over)),
                Some((1, 3 * (over - 2) + 2)),
            ),
            // What follows a bracket is above what it holds.
            (
                "after a bracket",
                format!("[1{}] {}", "+1".repeat(n / 2), "+1".repeat(n / 2 + 1)),
                Some((1, n + 4 + n - 1)),
            ),
            // Elements, binds and fields are siblings; a `local`'s body is below its binds.
            ("elements", format!("[{}]", "1+1+1, ".repeat(10 * n)), None),
            (
                "fields",
                format!("{{{}}}", "a: 1+1+1, ".repeat(10 * n)),
                None,
            ),
            (
                "binds",
                format!("local {} x = 1; x", "a = 1+1, ".repeat(10 * n)),
                None,
            ),
            // Strings, comments and numbers cost nothing.
            (
                "quoted",
                format!(
                    "'{0}' + \"{0}\" + @'{0}' + |||\n  {0}\n||| // {0}\n",
                    "+1".repeat(over)
                ),
                None,
            ),
            ("numbers", format!("[{}]", "1.5e+3, ".repeat(10 * n)), None),
        ];
        let mut wrong = Vec::new();
        for (name, text, want) in cases {
            let got = check(&text).err().map(|e| {
                assert_eq!(e.what, Deep::Expression, "{name}");
                (e.line, e.column)
            });
            if got != want {
                wrong.push(format!("{name}: got {got:?}, want {want:?}: {:.60}", text));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn imports_are_listed_by_kind() {
        let text = "local a = import 'lib/a.libsonnet';\n\
                    local b = importstr \"words.txt\";\n\
                    local c = importbin // a comment\n  @'bin''s.dat';\n\
                    local d = import /* x */ \"esc\\\\aped.jsonnet\";\n\
                    local e = 'import'; local f = 'x.txt';\n\
                    { imports: import 'x' + 'y' }";
        let got = check_and_list_imports(text).unwrap();
        assert_eq!(got.jsonnet, ["lib/a.libsonnet", "esc\\aped.jsonnet", "x"]);
        assert_eq!(got.data, ["words.txt", "bin's.dat"]);
    }

    #[test]
    fn the_library_is_far_below_the_bound() {
        let d = depth(crate::library()).unwrap();
        assert!(d <= LIBRARY_DEPTH, "the library's depth is {d}");
    }

    #[test]
    fn an_expression_error_names_the_limit() {
        let e = check(&format!("1{}", "+1".repeat(20_000)))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("1:1202: expression nested more than 600 deep"),
            "{e}"
        );
    }
}
