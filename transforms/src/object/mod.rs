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
    r.transform("object_copy", |b| {
        copy::ObjectCopy::build(b).map(copy::ObjectCopy::into_transform)
    });
    r.map("object_delete", delete::ObjectDelete::build);
    r.transform("object_insert", |b| {
        insert::ObjectInsert::build(b).map(insert::ObjectInsert::into_transform)
    });
    r.map("object_jq", jq::ObjectJq::build);
    r.map("object_to_boolean", to_boolean::ObjectToBoolean::build);
    r.map("object_to_float", to_float::ObjectToFloat::build);
    r.map("object_to_integer", to_integer::ObjectToInteger::build);
    r.map("object_to_string", to_string::ObjectToString::build);
    r.map(
        "object_to_unsigned_integer",
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
