//! The `string_*` family: append, capture, replace, split, change case, make UUIDs.

pub(crate) mod append;
pub(crate) mod capture;
pub(crate) mod replace;
pub(crate) mod split;
pub(crate) mod to_lower;
pub(crate) mod to_snake;
pub(crate) mod to_upper;
pub(crate) mod uuid;

use compact_str::CompactString;
use sluice_engine::{Message, Registry, TransformError, Value};

use crate::common::Io;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.stateless(&append::INFO, append::StringAppend::build);
    r.stateless(&capture::INFO, capture::StringCapture::build);
    r.map(&replace::INFO, replace::StringReplace::build);
    r.map(&split::INFO, split::StringSplit::build);
    r.computing(&to_lower::INFO, to_lower::StringToLower::build, |t| {
        t.io.keys()
    });
    r.computing(&to_upper::INFO, to_upper::StringToUpper::build, |t| {
        t.io.keys()
    });
    r.computing(&to_snake::INFO, to_snake::StringToSnake::build, |t| {
        t.io.keys()
    });
    r.map(&uuid::INFO, uuid::StringUuid::build);
}

/// Replaces the input text (the value's text, or the data) with `f` of it; a missing
/// source passes the message through.
pub(crate) fn map_text(
    io: &Io,
    msg: &mut Message,
    f: impl Fn(&str) -> CompactString,
) -> Result<(), TransformError> {
    if let Some(s) = io.read_text(msg).map(|t| f(&t)) {
        io.write(msg, Value::String(s))?;
    }
    Ok(())
}

/// What [`map_text`] writes at the target from the value read at the source (`read`: it,
/// or nothing when it is missing): the string `f` makes of its text.
pub(crate) fn compute_text(
    read: &[&Value],
    f: impl Fn(&str) -> CompactString,
) -> Result<Option<Value>, TransformError> {
    Ok(match read {
        [v] => Some(Value::String(f(&sluice_engine::value::to_text(v)))),
        _ => None,
    })
}

/// Maps each character with a one-to-one case mapping, as Go's `unicode.ToUpper` /
/// `ToLower` do: a character whose full mapping has several characters (`ß` to `SS`) is
/// kept as it is.
pub(crate) fn simple_case<I: Iterator<Item = char> + ExactSizeIterator>(
    s: &str,
    map: impl Fn(char) -> I,
) -> CompactString {
    let mut out = CompactString::with_capacity(s.len());
    for c in s.chars() {
        let mut m = map(c);
        match (m.len(), m.next()) {
            (1, Some(one)) => out.push(one),
            _ => out.push(c),
        }
    }
    out
}
