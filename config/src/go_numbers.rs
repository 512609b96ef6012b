//! `std.toString` as go-jsonnet writes it, for the library's automatic ids.
//!
//! A transform's automatic id is `md5(type)[0:8] + '-' + md5(std.toString(settings))[0:8]`.
//! Substation evaluates its library with go-jsonnet, which writes a number that is not
//! whole with `%.17g` (`-1.1` as `-1.1000000000000001`); jrsonnet writes the shortest text
//! that reads back the same (`-1.1`). Every other character of the two texts is the same, so
//! the library calls `std.native('sluice_go_to_string')`, which takes jrsonnet's text and
//! rewrites its numbers as go-jsonnet would, and a setting like `value: -1.1` gets
//! Substation's id.

use jrsonnet_evaluator::{Result, Val, function::builtin};

/// The native function's name, as the library calls it.
pub(crate) const NATIVE_NAME: &str = "sluice_go_to_string";

/// `std.toString(v)` with go-jsonnet's number text.
#[builtin]
pub(crate) fn builtin_go_to_string(v: Val) -> Result<String> {
    let text = v.to_string()?;
    Ok(match v {
        // A string's text is the string itself: nothing in it is a JSON number.
        Val::Str(_) => text.to_string(),
        _ => rewrite_numbers(&text),
    })
}

/// Rewrites every number token outside string literals of JSON-like text.
fn rewrite_numbers(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                out.push_str(&text[start..i]);
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let token = &text[start..i];
                match token.parse::<f64>() {
                    Ok(v) => out.push_str(&go_number(v)),
                    Err(_) => out.push_str(token),
                }
            }
            _ => {
                // Copy one whole character.
                let ch = text[i..].chars().next().unwrap_or('\u{fffd}');
                out.push(ch);
                i += ch.len_utf8().max(1);
            }
        }
    }
    out
}

/// go-jsonnet's number text: `%.0f` for a whole number, `%.17g` for any other.
fn go_number(v: f64) -> String {
    if v == v.floor() {
        return format!("{v:.0}");
    }
    let sci = format!("{v:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_fraction(mantissa), exp.abs())
    } else {
        let decimals = usize::try_from(16 - exp).unwrap_or(0);
        trim_fraction(&format!("{v:.decimals$}")).to_string()
    }
}

/// `%g` drops trailing zeros of the fraction, and the point when nothing is left.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::{go_number, rewrite_numbers};

    /// What C's and Go's `%.17g` / `%.0f` print.
    #[test]
    fn numbers_as_go_prints_them() {
        let cases = [
            (-1.1, "-1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (1.5, "1.5"),
            (2.25, "2.25"),
            (1.0, "1"),
            (-3.0, "-3"),
            (1e21, "1000000000000000000000"),
            (1.5e-7, "1.4999999999999999e-07"),
            (0.0001, "0.0001"),
            (123456.789, "123456.789"),
            (1.2345678901234567e20, "123456789012345667584"),
            (1e-300, "1e-300"),
        ];
        for (v, want) in cases {
            assert_eq!(go_number(v), want, "{v:e}");
        }
    }

    #[test]
    fn only_numbers_outside_strings_change() {
        assert_eq!(
            rewrite_numbers(r#"{"a": -1.1, "b": "-1.1", "c": [0.1, 2], "d\"1.1": 1}"#),
            r#"{"a": -1.1000000000000001, "b": "-1.1", "c": [0.10000000000000001, 2], "d\"1.1": 1}"#
        );
        assert_eq!(rewrite_numbers("ü 1.1"), "ü 1.1000000000000001");
    }
}
