//! Jsonnet formatting for `sluice fmt`: the reference C++ formatter (the code behind the
//! `jsonnetfmt` command) through `jsonnet-sys`, with its defaults.
//!
//! Why this formatter: users and CI compare against `jsonnetfmt`, and the only Rust
//! formatter (`jrsonnet`'s) is a prototype that drops comments. On every config in
//! `examples/` and the Jsonnet library, this gives exactly what Debian's `jsonnetfmt`
//! 0.18 prints (tests/cli_fmt.rs checks it; the crate bundles 0.17's sources, whose one
//! difference, the newlines after a file's trailing comments, is evened out here). The
//! unsafe calls are here and nowhere else.
//!
//! The formatter recurses once per level of the syntax tree, so a text is first checked
//! against sluice's bounds ([`sluice_config::nesting`]): 5,000 `[` or `local x = 1;` would
//! otherwise abort the process (and `sluice play` with it). It then runs on a thread of its
//! own with a stack of [`STACK_BYTES`], whatever the caller's: the deepest text the bounds
//! allow needs a fraction of it (`the_deepest_texts_format`).

use std::ffi::{CStr, CString};

/// Why a file could not be formatted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// The text is not Jsonnet; the formatter's message, with the place.
    #[error("{0}")]
    Syntax(String),
    /// The text holds a NUL byte, which no Jsonnet file can.
    #[error("{0}: contains a NUL byte at offset {1}")]
    Nul(String, usize),
    /// The text nests brackets deeper than the formatter's stack allows.
    #[error("{0}:{1}")]
    TooDeep(String, sluice_config::nesting::TooDeep),
}

/// The stack of the thread the formatter runs on.
pub const STACK_BYTES: usize = 32 * 1024 * 1024;

/// `text` formatted as `jsonnetfmt` formats it; `name` is what errors call the file.
pub fn format(name: &str, text: &str) -> Result<String, FormatError> {
    sluice_config::nesting::check(text).map_err(|e| FormatError::TooDeep(name.into(), e))?;
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("jsonnetfmt".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || format_here(name, text));
        match thread {
            Ok(thread) => thread.join().unwrap_or_else(|_| {
                Err(FormatError::Syntax(format!(
                    "{name}: the formatter failed unexpectedly (see above)"
                )))
            }),
            // No thread to be had (a system out of memory): the caller's stack, which holds
            // what the bounds allow on any main thread.
            Err(_) => format_here(name, text),
        }
    })
}

/// [`format`] on the calling thread, once the text was checked.
fn format_here(name: &str, text: &str) -> Result<String, FormatError> {
    let c_name = CString::new(name).map_err(|e| FormatError::Nul(name.into(), e.nul_position()))?;
    let c_text = CString::new(text).map_err(|e| FormatError::Nul(name.into(), e.nul_position()))?;
    let mut error: libc::c_int = 0;
    // SAFETY: the VM is made, used by this thread only and destroyed here; the strings are
    // NUL-terminated and outlive the call; the result is a NUL-terminated buffer the VM
    // allocated, copied out before the VM frees it.
    let (out, failed) = unsafe {
        let vm = jsonnet_sys::jsonnet_make();
        let raw =
            jsonnet_sys::jsonnet_fmt_snippet(vm, c_name.as_ptr(), c_text.as_ptr(), &mut error);
        let out = if raw.is_null() {
            String::new()
        } else {
            CStr::from_ptr(raw).to_string_lossy().into_owned()
        };
        if !raw.is_null() {
            jsonnet_sys::jsonnet_realloc(vm, raw, 0);
        }
        jsonnet_sys::jsonnet_destroy(vm);
        (out, error != 0)
    };
    if failed {
        return Err(FormatError::Syntax(clean_error(&out)));
    }
    Ok(one_final_newline(&out))
}

/// The text ending in exactly one newline. The bundled jsonnet 0.17 sources add a newline
/// after the file's trailing comments, which already end in theirs (`{}  // c` becomes
/// `{}  // c` and two newlines); jsonnetfmt 0.18, the one users run, ends every file with
/// one. tests/cli_fmt.rs compares the two on such files.
fn one_final_newline(text: &str) -> String {
    let mut body = text.trim_end_matches('\n').to_string();
    body.push('\n');
    body
}

/// The formatter's error as one line: `STATIC ERROR: f.jsonnet:3:5: msg` becomes
/// `f.jsonnet:3:5: msg`, without the trailing newline.
fn clean_error(raw: &str) -> String {
    let first = raw.lines().next().unwrap_or("").trim();
    first
        .strip_prefix("STATIC ERROR: ")
        .unwrap_or(first)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_jsonnetfmt_and_keeps_comments() {
        let table: &[(&str, &str)] = &[
            ("{a:1}", "{ a: 1 }\n"),
            ("{\"a\": \"b\"}", "{ a: 'b' }\n"),
            (
                "// top\nlocal x = 1;  # hash comment\n{\n    a : x, /* inline */\n}",
                "// top\nlocal x = 1;  // hash comment\n{\n  a: x, /* inline */\n}\n",
            ),
            // A line break in an array keeps one element per line.
            ("[1,2,\n3]", "[\n  1,\n  2,\n  3,\n]\n"),
            // One newline at the end, after trailing comments too.
            ("{}  // c\n\n\n", "{}  // c\n"),
            ("{}\n/* a\n b */\n\n", "{}\n/* a\n b */\n"),
            // At most two blank lines.
            ("{\n\n\n\n  a: 1,\n}\n", "{\n\n\n  a: 1,\n}\n"),
        ];
        for (input, want) in table {
            let got = format("t.jsonnet", input).unwrap();
            assert_eq!(&got, want, "{input:?}");
            // Idempotent.
            assert_eq!(format("t.jsonnet", &got).unwrap(), got);
        }
    }

    /// The deepest texts the bounds allow, of each construct that nests the syntax tree,
    /// format (this runs on a test thread, whose stack is 2 MiB).
    #[test]
    fn the_deepest_texts_format() {
        let max = sluice_config::nesting::MAX_DEPTH;
        let units = [
            "+1",
            "-",
            "!",
            "local x = 1; ",
            "if a then 1 else ",
            "assert a; ",
            "error ",
            "function(x) ",
            "(1)",
            " {}",
            ".a",
            "[0]",
            "[",
        ];
        for unit in units {
            let text = |n: usize| {
                let body = unit.repeat(n);
                match unit {
                    "+1" => format!("1{body}"),
                    "(1)" | " {}" | ".a" | "[0]" => format!("o{body}"),
                    "[" => format!("{body}{}", "]".repeat(n)),
                    _ => format!("{body}1"),
                }
            };
            let mut n = max;
            while sluice_config::nesting::check(&text(n)).is_err() {
                n -= 1;
            }
            assert!(
                n * unit.len() >= max.min(sluice_config::nesting::MAX_NESTING),
                "{unit}"
            );
            let got = format("deep.jsonnet", &text(n));
            assert!(got.is_ok(), "{unit:?} x {n}: {got:?}");
            // One more is an error naming the place, not an abort.
            let e = format("deep.jsonnet", &text(n + 1))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("deep.jsonnet:1:"), "{e}");
        }
    }

    #[test]
    fn errors_name_the_place_in_one_line() {
        let e = format("bad.jsonnet", "{ a: }").unwrap_err();
        let FormatError::Syntax(text) = &e else {
            panic!("{e:?}")
        };
        assert!(text.starts_with("bad.jsonnet:1:"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert_eq!(
            format("nul.jsonnet", "{a:\0}").unwrap_err(),
            FormatError::Nul("nul.jsonnet".into(), 3)
        );
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let e = format("deep.jsonnet", &deep).unwrap_err().to_string();
        assert!(
            e.starts_with("deep.jsonnet:1:501: brackets nested more than 500 deep"),
            "{e}"
        );
    }
}
