//! The event an invocation's body is read into, and the helpers the handlers share to read
//! theirs: a payload as a handler's event, base64 data kept with its reason, a message.

use std::sync::OnceLock;

use serde_json::Value;
use sluice_engine::Message;

use super::{HandlerError, HandlerKind, kinesis};

/// The handler the bootstrap's events are parsed for (set once, before the runtime loop).
pub(super) static EVENT_KIND: OnceLock<HandlerKind> = OnceLock::new();

/// An invocation's event as the runtime API's body is parsed: a Kinesis event straight
/// into its records (a batch can be many megabytes: parsing it into JSON values first
/// would hold it twice over), every other event as JSON. Which one depends on the
/// handler [`main`] runs; without one set (in-process callers and the autoscaler), JSON.
///
/// Reading it never fails: a body that is not the event is [`Event::Invalid`], answered by
/// the handler as `InvalidEvent`. Had the deserializer failed, lambda_runtime would answer
/// the invocation itself, with a Rust type name as `errorType`, a message ending in a
/// newline and a Debug dump in the log.
pub enum Event {
    /// A Kinesis event.
    Kinesis(kinesis::KinesisEvent),
    /// Any other event.
    Json(Value),
    /// A body that is not the event (for JSON: not JSON at all); why.
    Invalid(String),
}

impl Event {
    /// Reads the event of handler `kind` (`None`: JSON) from `d`.
    pub(crate) fn read<'de, D: serde::Deserializer<'de>>(kind: Option<HandlerKind>, d: D) -> Event {
        use serde::Deserialize as _;
        match kind {
            Some(HandlerKind::KinesisDataStream) => kinesis::KinesisEvent::deserialize(d)
                .map_or_else(|e| Event::Invalid(e.to_string()), Event::Kinesis),
            _ => Value::deserialize(d).map_or_else(|e| Event::Invalid(e.to_string()), Event::Json),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // lambda_runtime reads the body with nothing after this (no check of trailing
        // characters), so a failure part way through can be kept as the reason.
        Ok(Event::read(EVENT_KIND.get().copied(), d))
    }
}

/// Parses an event payload as `T`, with an error naming the handler.
pub(crate) fn parse_event<T: serde::de::DeserializeOwned>(
    kind: HandlerKind,
    payload: Value,
) -> Result<T, HandlerError> {
    serde_json::from_value(payload).map_err(|e| HandlerError::invalid_event(kind, e))
}

/// Decodes a base64 string as it is read. What cannot be decoded is kept as the reason, so
/// that one bad record does not make the whole event unreadable.
pub(crate) fn base64_or_reason<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Result<Vec<u8>, String>, D::Error> {
    struct Visitor;
    type Decoded = Result<Vec<u8>, String>;
    fn not_a_string<E>(what: &str) -> Result<Decoded, E> {
        Ok(Err(format!("data is {what}, not a base64 string")))
    }
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Decoded;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("base64 data")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Decoded, E> {
            use base64::Engine;
            Ok(base64::engine::general_purpose::STANDARD
                .decode(v)
                .map_err(|e| format!("data is not base64: {e}")))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Decoded, E> {
            not_a_string("a boolean")
        }
        fn visit_i64<E>(self, _: i64) -> Result<Decoded, E> {
            not_a_string("a number")
        }
        fn visit_u64<E>(self, _: u64) -> Result<Decoded, E> {
            not_a_string("a number")
        }
        fn visit_f64<E>(self, _: f64) -> Result<Decoded, E> {
            not_a_string("a number")
        }
        fn visit_unit<E>(self) -> Result<Decoded, E> {
            not_a_string("null")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Decoded, A::Error> {
            while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            not_a_string("an array")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Decoded, A::Error> {
            while a
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            not_a_string("an object")
        }
    }
    d.deserialize_any(Visitor)
}

/// A message with `data` and `metadata` (a JSON object).
pub(crate) fn message(data: impl Into<bytes::Bytes>, metadata: &Value) -> Message {
    let mut m = Message::new(data);
    if !metadata.is_null() {
        m.set_metadata(serde_json::to_vec(metadata).unwrap_or_default());
    }
    m
}
