//! The `object_*` family: copy, delete, insert and convert values by key, and reshape the
//! data with jq.

pub(crate) mod copy;
pub(crate) mod delete;
pub(crate) mod insert;
pub(crate) mod jq;
pub(crate) mod to_boolean;
pub(crate) mod to_float;
pub(crate) mod to_integer;
pub(crate) mod to_string;
pub(crate) mod to_unsigned_integer;

use std::borrow::Cow;

use sluice_engine::{Message, Registry, Value};

use crate::common::Io;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.transform(&copy::INFO, |b| {
        copy::ObjectCopy::build(b).map(copy::ObjectCopy::into_transform)
    });
    r.map(&delete::INFO, delete::ObjectDelete::build);
    r.transform(&insert::INFO, |b| {
        insert::ObjectInsert::build(b).map(insert::ObjectInsert::into_transform)
    });
    r.map(&jq::INFO, jq::ObjectJq::build);
    r.map(&to_boolean::INFO, to_boolean::ObjectToBoolean::build);
    r.map(&to_float::INFO, to_float::ObjectToFloat::build);
    r.map(&to_integer::INFO, to_integer::ObjectToInteger::build);
    r.map(&to_string::INFO, to_string::ObjectToString::build);
    r.map(
        &to_unsigned_integer::INFO,
        to_unsigned_integer::ObjectToUnsignedInteger::build,
    );
}

/// The input as a JSON value, for transforms that need structure (arrays): the value at
/// the source key, or the data parsed as JSON. `None` when the source is missing or the
/// data is not JSON.
pub(crate) fn read_json<'m>(io: &Io, msg: &'m Message) -> Option<Cow<'m, Value>> {
    match io {
        Io::Object { source, .. } => msg.get(source),
        Io::Data => msg.data_value().map(Cow::Borrowed),
    }
}

/// The input as a JSON value where any data will do: the value at the source key, or the
/// data parsed as JSON, or else the data as a string (non-UTF-8 bytes replaced).
pub(crate) fn read_any<'m>(io: &Io, msg: &'m Message) -> Option<Cow<'m, Value>> {
    match io {
        Io::Object { source, .. } => msg.get(source),
        Io::Data => Some(match msg.data_value() {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned(Value::String(String::from_utf8_lossy(msg.data()).into())),
        }),
    }
}
