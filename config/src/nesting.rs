//! A bound on how deeply a Jsonnet text nests brackets, checked before it is parsed.
//!
//! Why: jrsonnet's parser and the C++ formatter behind `sluice fmt` recurse once per level
//! of `[`, `{` or `(`, on the thread's own stack, and a text nested a few thousand levels
//! deep (2 KB of `[`) overflows it: the process aborts (exit 134), which for `sluice play`
//! is the whole server. jrsonnet's own limit (its call depth, 200) only counts evaluation
//! frames, after parsing. Counting the brackets of the text (outside strings and
//! comments) is linear, needs no stack, and catches the case before anything recursive
//! runs. No real config comes near the limit: the library's deepest line nests about 15.

/// The deepest bracket nesting a Jsonnet text may have (`[`, `{` and `(` together).
pub const MAX_NESTING: usize = 500;

/// A text nests its brackets deeper than [`MAX_NESTING`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{line}:{column}: brackets nested more than {max} deep (sluice's limit for Jsonnet, which \
     keeps a deeply nested text from overflowing the stack; no option raises it)",
    max = MAX_NESTING
)]
pub struct TooDeep {
    /// The line (from 1) of the bracket that went past the limit.
    pub line: usize,
    /// Its column (from 1, in characters).
    pub column: usize,
}

/// Checks that `text` nests `[`, `{` and `(` at most [`MAX_NESTING`] deep, not counting
/// those in strings, text blocks and comments. Unbalanced or malformed text passes: the
/// parser reports it better.
pub fn check(text: &str) -> Result<(), TooDeep> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'[' | b'{' | b'(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    let before = &text[..i];
                    let line = before.matches('\n').count() + 1;
                    let start = before.rfind('\n').map_or(0, |n| n + 1);
                    let column = text[start..i].chars().count() + 1;
                    return Err(TooDeep { line, column });
                }
                i += 1;
            }
            b']' | b'}' | b')' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'#' => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = find(b, i + 2, b"*/").map_or(b.len(), |e| e + 2);
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
            }
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
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
            ("[[]]".repeat(10_000), None),
            // Unbalanced text is the parser's to report.
            ("]]]][".into(), None),
            ("'unterminated [".into(), None),
        ];
        for (text, want) in cases {
            let got = check(&text).err().map(|e| (e.line, e.column));
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
}
