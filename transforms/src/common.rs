//! What many transforms share: Substation's "object mode vs data mode" and reading a value
//! as text or number.
//!
//! Most single-value transforms read from `object.source_key` and write to
//! `object.target_key` when both are set, or read and replace the whole data when neither
//! is; setting only one is a configuration error. A missing source value passes the message
//! through unchanged.

use std::borrow::Cow;

use sluice_engine::settings::ObjectSettings;
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, Value, value};

/// Where a single-value transform reads and writes.
#[derive(Debug, Clone)]
pub(crate) enum Io {
    /// The whole data.
    Data,
    /// A value inside the data or metadata.
    Object {
        /// Read from here.
        source: Box<Key>,
        /// Write here.
        target: Box<Key>,
    },
}

impl Io {
    /// Resolves the mode from `object`: both keys, or neither.
    pub(crate) fn new(b: &Build<'_>, object: &ObjectSettings) -> Result<Io, ConfigError> {
        let src = b.opt_key("object.source_key", &object.source_key)?;
        let trg = b.opt_key("object.target_key", &object.target_key)?;
        match (src, trg) {
            (Some(source), Some(target)) => Ok(Io::Object {
                source: Box::new(source),
                target: Box::new(target),
            }),
            (None, None) => Ok(Io::Data),
            (Some(_), None) => Err(b.field_error(
                "object.target_key",
                "missing required option: target_key must be set when source_key is (or set neither to work on the whole data)",
            )),
            (None, Some(_)) => Err(b.field_error(
                "object.source_key",
                "missing required option: source_key must be set when target_key is (or set neither to work on the whole data)",
            )),
        }
    }

    /// The source and target keys, in object mode: for [`Registry::computing`].
    pub(crate) fn keys(&self) -> Option<(Key, Key)> {
        match self {
            Io::Object { source, target } => Some(((**source).clone(), (**target).clone())),
            Io::Data => None,
        }
    }

    /// The input value: the value at the source key, or the data as a string (non-UTF-8
    /// bytes are replaced, as a string view of them). `None` when the source is missing.
    pub(crate) fn read<'m>(&self, msg: &'m Message) -> Option<Cow<'m, Value>> {
        match self {
            Io::Object { source, .. } => msg.get(source),
            Io::Data => Some(Cow::Owned(Value::String(
                String::from_utf8_lossy(msg.data()).into(),
            ))),
        }
    }

    /// The input as text: GJSON's `String()` of the value, or the data.
    pub(crate) fn read_text<'m>(&self, msg: &'m Message) -> Option<Cow<'m, str>> {
        match self {
            Io::Object { source, .. } => {
                let v = msg.get(source)?;
                Some(match v {
                    Cow::Borrowed(v) => value::to_text(v),
                    Cow::Owned(v) => Cow::Owned(value::to_text(&v).into_owned()),
                })
            }
            Io::Data => Some(String::from_utf8_lossy(msg.data())),
        }
    }

    /// The input as bytes: the data, or the value's text.
    pub(crate) fn read_bytes<'m>(&self, msg: &'m Message) -> Option<Cow<'m, [u8]>> {
        match self {
            Io::Object { .. } => self.read_text(msg).map(|t| match t {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            }),
            Io::Data => Some(Cow::Borrowed(&msg.data()[..])),
        }
    }

    /// Writes the result: at the target key, or as the new data (strings raw, other values
    /// as JSON).
    pub(crate) fn write(&self, msg: &mut Message, v: Value) -> Result<(), TransformError> {
        match self {
            Io::Object { target, .. } => msg.set(target, v),
            Io::Data => {
                match v {
                    Value::String(s) => msg.set_data(s.into_string().into_bytes()),
                    other => msg.set_data_value(other),
                }
                Ok(())
            }
        }
    }

    /// Writes raw bytes: at the target key with SJSON's typing rules, or as the new data.
    pub(crate) fn write_bytes(&self, msg: &mut Message, b: Vec<u8>) -> Result<(), TransformError> {
        match self {
            Io::Object { target, .. } => msg.set(target, value::from_bytes(&b)),
            Io::Data => {
                msg.set_data(b);
                Ok(())
            }
        }
    }
}
