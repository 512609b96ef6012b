//! Go's regular expression syntax (RE2, as Go's `regexp` reads it) on Rust's `regex` crate.
//!
//! Substation configs carry Go patterns. Most of RE2 means the same in both engines, but a
//! handful of constructs do not, and a config must match what it matched under Substation:
//!
//! | Go pattern                 | Go's meaning                   | Rust's, untranslated        |
//! |----------------------------|--------------------------------|-----------------------------|
//! | `{` not starting `{n}`, `{n,}`, `{n,m}` (`^{.*}$`, `a{,3}`) | a literal `{` | an error      |
//! | `\Q…\E`                    | the text between, literally    | an error                    |
//! | `\d \D \w \W \s \S`        | ASCII classes                  | Unicode classes             |
//! | `\b \B`                    | ASCII word boundary            | Unicode word boundary       |
//! | `\<` `\>`                  | literal `<` and `>`            | start and end of a word     |
//! | `\0`, `\012` (octal)       | the character with that code   | an error                    |
//! | `[` inside a class (`[[]`) | a literal `[`                  | a nested class              |
//! | `&&` `--` `~~` in a class  | literal characters             | set operations              |
//!
//! Everything else (`(?P<n>…)`, `(?<n>…)`, `\z`, `\A`, POSIX classes, `\p{…}`, flags) is
//! shared and passes through unchanged; what Go rejects, Rust rejects too, with its own
//! message. [`translate`] rewrites a Go pattern into a Rust pattern with Go's meaning; every
//! regex setting is compiled through [`compile`] (or [`compile_bytes`]).

/// Compiles a Go pattern for matching text.
pub fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&translate(pattern))
}

/// Compiles a Go pattern for matching bytes (data that need not be UTF-8).
pub fn compile_bytes(pattern: &str) -> Result<regex::bytes::Regex, regex::Error> {
    regex::bytes::Regex::new(&translate(pattern))
}

/// Go's `\d`, `\w`, `\s` (ASCII only), as the inside of a class.
fn perl_class(c: char) -> Option<(&'static str, bool)> {
    match c {
        'd' => Some(("0-9", false)),
        'D' => Some(("0-9", true)),
        'w' => Some(("0-9A-Za-z_", false)),
        'W' => Some(("0-9A-Za-z_", true)),
        's' => Some((r"\t\n\x0C\r ", false)),
        'S' => Some((r"\t\n\x0C\r ", true)),
        _ => None,
    }
}

/// Rewrites a Go (RE2) pattern into a Rust `regex` pattern that means the same.
pub fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i = escape_outside(&chars, i, &mut out),
            '[' => i = class(&chars, i, &mut out),
            '{' => match repetition_len(&chars[i..]) {
                Some(n) => {
                    out.extend(&chars[i..i + n]);
                    i += n;
                }
                None => {
                    out.push_str(r"\{");
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The length of `{n}`, `{n,}` or `{n,m}` at the start of `s`, when it is one (Go reads any
/// other `{` as a literal).
fn repetition_len(s: &[char]) -> Option<usize> {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < s.len() && s[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if i < s.len() && s[i] == ',' {
        i += 1;
        digits(&mut i);
    }
    (i < s.len() && s[i] == '}').then_some(i + 1)
}

/// Octal escape `\0`, `\0NN`, `\NN` at `i` (the backslash): the code and the length.
fn octal(chars: &[char], i: usize) -> Option<(u32, usize)> {
    let first = *chars.get(i + 1)?;
    let next_is_octal = |k: usize| chars.get(k).is_some_and(|c| ('0'..='7').contains(c));
    // Go: `\1`..`\7` alone would be a backreference (unsupported); followed by an octal
    // digit it starts an octal escape. `\0` always does.
    if first == '0' || (('1'..='7').contains(&first) && next_is_octal(i + 2)) {
        let mut end = i + 2;
        while end < i + 4 && next_is_octal(end) {
            end += 1;
        }
        let code = chars[i + 1..end]
            .iter()
            .fold(0, |acc, c| acc * 8 + c.to_digit(8).unwrap_or(0));
        return Some((code, end - i));
    }
    None
}

/// Copies an escape outside a class, rewritten where Go and Rust differ; returns the index
/// after it.
fn escape_outside(chars: &[char], i: usize, out: &mut String) -> usize {
    let Some(&c) = chars.get(i + 1) else {
        // A trailing backslash: both engines reject it.
        out.push('\\');
        return i + 1;
    };
    if let Some((inner, negated)) = perl_class(c) {
        out.push_str(if negated { "[^" } else { "[" });
        out.push_str(inner);
        out.push(']');
        return i + 2;
    }
    if let Some((code, len)) = octal(chars, i) {
        push_code(out, code);
        return i + len;
    }
    match c {
        'Q' => {
            let mut j = i + 2;
            while j < chars.len() {
                if chars[j] == '\\' && chars.get(j + 1) == Some(&'E') {
                    return j + 2;
                }
                let mut buf = [0u8; 4];
                out.push_str(&regex::escape(chars[j].encode_utf8(&mut buf)));
                j += 1;
            }
            j
        }
        'b' | 'B' => {
            out.push_str(if c == 'b' { r"(?-u:\b)" } else { r"(?-u:\B)" });
            i + 2
        }
        '<' | '>' => {
            out.push(c);
            i + 2
        }
        'p' | 'P' | 'x' => copy_braced_escape(chars, i, out),
        _ => {
            out.push('\\');
            out.push(c);
            i + 2
        }
    }
}

/// Copies `\pL`, `\p{Greek}`, `\x7F`, `\x{263a}` as they are.
fn copy_braced_escape(chars: &[char], i: usize, out: &mut String) -> usize {
    out.push('\\');
    out.push(chars[i + 1]);
    let mut j = i + 2;
    if chars.get(j) == Some(&'{') {
        while j < chars.len() {
            out.push(chars[j]);
            j += 1;
            if chars[j - 1] == '}' {
                break;
            }
        }
    } else {
        // One character for \p, two hex digits for \x.
        let n = if chars[i + 1] == 'x' { 2 } else { 1 };
        for _ in 0..n {
            if let Some(&c) = chars.get(j) {
                out.push(c);
                j += 1;
            }
        }
    }
    j
}

/// A character by code, as a Rust escape.
fn push_code(out: &mut String, code: u32) {
    out.push_str(&format!(r"\x{{{code:X}}}"));
}

/// Copies a character class starting at `i` (the `[`); returns the index after it.
fn class(chars: &[char], i: usize, out: &mut String) -> usize {
    let mut j = i + 1;
    out.push('[');
    if chars.get(j) == Some(&'^') {
        out.push('^');
        j += 1;
    }
    // Go: a `]` first in the class is a literal.
    let mut first = true;
    while j < chars.len() {
        let c = chars[j];
        if c == ']' && !first {
            out.push(']');
            return j + 1;
        }
        first = false;
        // POSIX class `[:alpha:]`, `[:^alpha:]`: the same in both.
        if c == '['
            && chars.get(j + 1) == Some(&':')
            && let Some(end) = (j + 2..chars.len().saturating_sub(1))
                .find(|&k| chars[k] == ':' && chars[k + 1] == ']')
        {
            out.extend(&chars[j..end + 2]);
            j = end + 2;
            continue;
        }
        // A Perl class inside a class.
        if c == '\\'
            && let Some((inner, negated)) = chars.get(j + 1).and_then(|&n| perl_class(n))
        {
            if negated {
                out.push_str("[^");
                out.push_str(inner);
                out.push(']');
            } else {
                out.push_str(inner);
            }
            j += 2;
            continue;
        }
        // One item, then a range when `-` and another item follow.
        j = class_item(chars, j, out);
        if chars.get(j) == Some(&'-') && chars.get(j + 1).is_some_and(|&n| n != ']') {
            out.push('-');
            j = class_item(chars, j + 1, out);
        }
    }
    // Unclosed: Rust rejects it as Go does.
    j
}

/// Copies one character (or escape) of a class, escaping what Rust would read as syntax.
fn class_item(chars: &[char], j: usize, out: &mut String) -> usize {
    let c = chars[j];
    if c == '\\' {
        if let Some((code, len)) = octal(chars, j) {
            push_code(out, code);
            return j + len;
        }
        return match chars.get(j + 1) {
            Some('p' | 'P' | 'x') => copy_braced_escape(chars, j, out),
            Some(&n) => {
                out.push('\\');
                out.push(n);
                j + 2
            }
            None => {
                out.push('\\');
                j + 1
            }
        };
    }
    if matches!(c, '[' | ']' | '&' | '-' | '~') {
        out.push('\\');
    }
    out.push(c);
    j + 1
}

#[cfg(test)]
mod tests {
    use super::{compile, translate};

    /// Go pattern, text, whether Go's regexp matches it (from Go's documented syntax).
    #[test]
    fn go_semantics() {
        let cases: &[(&str, &str, bool)] = &[
            // `{` that cannot start a repetition is a literal.
            (r"^{.*}$", r#"{"a":1}"#, true),
            (r"^{.*}$", "a", false),
            (r"a{", "a{", true),
            (r"a{,3}", "a{,3}", true),
            (r"a{,3}", "aaa", false),
            (r"{}", "{}", true),
            (r"x{2}", "xx", true),
            (r"x{2,}", "xxx", true),
            (r"^x{1,2}$", "xxx", false),
            (r"a{b}", "a{b}", true),
            // \Q…\E quotes.
            (r"\Qa.b*c\E", "a.b*c", true),
            (r"\Qa.b\E", "axb", false),
            (r"x\Q(", "x(", true),
            // ASCII Perl classes.
            (r"^\d+$", "123", true),
            (r"^\d+$", "١٢٣", false),
            (r"^\w+$", "héllo", false),
            (r"^\w+$", "hello_1", true),
            (r"^\s$", "\u{85}", false),
            (r"^\s$", "\t", true),
            (r"^\S+$", "ab", true),
            (r"^[\d.]+$", "1.2", true),
            (r"^[\D]+$", "ab", true),
            (r"^[\D]+$", "a1", false),
            // ASCII word boundary.
            (r"\bé", "é", false),
            (r"\bab\b", "x ab y", true),
            // \< and \> are literals.
            (r"\<b\>", "<b>", true),
            (r"\<b\>", "b", false),
            // Octal escapes.
            (r"\101", "A", true),
            (r"\0", "\0", true),
            (r"\012", "\n", true),
            (r"[\101-\103]+", "ABC", true),
            // `[` inside a class, set-operation look-alikes.
            (r"[[]", "[", true),
            (r"^[a&&b]+$", "a&b", true),
            (r"^[a~~b]+$", "~", true),
            (r"^[+--]+$", ",", true),
            (r"^[-a]+$", "-", true),
            (r"^[a-]+$", "-", true),
            (r"[]a]", "]", true),
            (r"[^]a]", "b", true),
            // POSIX classes.
            (r"^[[:alpha:]]+$", "abc", true),
            (r"^[[:^alpha:]]+$", "123", true),
            (r"^[[:digit:]x]+$", "1x", true),
            // Shared syntax passes through.
            (r"(?P<n>a)(?<m>b)", "ab", true),
            (r"a\z", "a", true),
            (r"\Aa", "a", true),
            (r"\pL+", "é", true),
            (r"\p{Greek}", "α", true),
            (r"\x41\x{42}", "AB", true),
            (r"(?i)ABC", "abc", true),
            (r"(?s)a.b", "a\nb", true),
            (r"a.b", "a\nb", false),
            (r"\.", ".", true),
            (r"\/", "/", true),
        ];
        for (pattern, text, want) in cases {
            let re = compile(pattern)
                .unwrap_or_else(|e| panic!("{pattern} ({}) rejected: {e}", translate(pattern)));
            assert_eq!(
                re.is_match(text),
                *want,
                "{pattern} (as {}) on {text:?}",
                translate(pattern)
            );
        }
    }

    /// What Go rejects is rejected.
    #[test]
    fn go_errors_stay_errors() {
        for pattern in [r"(", r"a)", r"[a", r"\", r"{2}", r"a**b\", r"\1", r"x{2,1}"] {
            assert!(compile(pattern).is_err(), "{pattern} accepted");
        }
    }

    /// Named groups keep their names, so captures by name work.
    #[test]
    fn group_names_kept() {
        let re = compile(r"(?P<year>\d{4})-(?<m>\d{2})").unwrap();
        let c = re.captures("2024-05").unwrap();
        assert_eq!(&c["year"], "2024");
        assert_eq!(&c["m"], "05");
    }
}
