//! The `condition` family: the predicates used by `meta_switch` cases, `meta_retry` and
//! config `tests`: all 32 of Substation's condition types.
//!
//! Conventions shared by every leaf condition (Substation's, with the differences noted):
//! * A ctrl message is never matched (false).
//! * Without `object.source_key` a condition reads the raw data; with it, the value at that
//!   key, as GJSON's `String()` text where text is needed (strings unquoted, objects and
//!   arrays as compact JSON).
//! * A missing source value is false for every leaf condition. Substation says so for the
//!   numeric and `string_equal_to` families; for the others it compares the empty string,
//!   which only differs when the configured `value` is itself empty (then Substation's
//!   `string_contains` with `value: ""` matches a message without the key; sluice does not).
//! * Where the reference lists `object.target_key`, its value, when present in the message,
//!   replaces the configured `value` as the comparand (a dynamic comparison).
//!
//! `format::sniff::sniff` is the media-type sniffer the CLI and the Lambda S3 handler share.

pub(crate) mod format;
pub(crate) mod meta;
pub(crate) mod network;
pub(crate) mod number;
pub(crate) mod string;
pub(crate) mod utility;

use std::borrow::Cow;

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Key, Message, Registry, Value, value};

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.condition(&meta::all::INFO, meta::all::MetaAll::build);
    r.condition(&meta::any::INFO, meta::any::MetaAny::build);
    r.condition(&meta::none::INFO, meta::none::MetaNone::build);

    r.condition(&format::json::INFO, format::json::FormatJson::build);
    r.condition(&format::mime::INFO, format::mime::FormatMime::build);

    r.condition(
        &network::global_unicast::INFO,
        network::global_unicast::NetworkIpGlobalUnicast::build,
    );
    r.condition(
        &network::link_local_multicast::INFO,
        network::link_local_multicast::NetworkIpLinkLocalMulticast::build,
    );
    r.condition(
        &network::link_local_unicast::INFO,
        network::link_local_unicast::NetworkIpLinkLocalUnicast::build,
    );
    r.condition(
        &network::loopback::INFO,
        network::loopback::NetworkIpLoopback::build,
    );
    r.condition(
        &network::multicast::INFO,
        network::multicast::NetworkIpMulticast::build,
    );
    r.condition(
        &network::private::INFO,
        network::private::NetworkIpPrivate::build,
    );
    r.condition(
        &network::unicast::INFO,
        network::unicast::NetworkIpUnicast::build,
    );
    r.condition(
        &network::unspecified::INFO,
        network::unspecified::NetworkIpUnspecified::build,
    );
    r.condition(&network::valid::INFO, network::valid::NetworkIpValid::build);

    r.condition(
        &number::equal_to::INFO,
        number::equal_to::NumberEqualTo::build,
    );
    r.condition(
        &number::greater_than::INFO,
        number::greater_than::NumberGreaterThan::build,
    );
    r.condition(
        &number::less_than::INFO,
        number::less_than::NumberLessThan::build,
    );
    r.condition(
        &number::bitwise_and::INFO,
        number::bitwise_and::NumberBitwiseAnd::build,
    );
    r.condition(
        &number::bitwise_or::INFO,
        number::bitwise_or::NumberBitwiseOr::build,
    );
    r.condition(
        &number::bitwise_xor::INFO,
        number::bitwise_xor::NumberBitwiseXor::build,
    );
    r.condition(
        &number::bitwise_not::INFO,
        number::bitwise_not::NumberBitwiseNot::build,
    );
    r.condition(
        &number::length_equal_to::INFO,
        number::length_equal_to::NumberLengthEqualTo::build,
    );
    r.condition(
        &number::length_greater_than::INFO,
        number::length_greater_than::NumberLengthGreaterThan::build,
    );
    r.condition(
        &number::length_less_than::INFO,
        number::length_less_than::NumberLengthLessThan::build,
    );

    r.condition(
        &string::contains::INFO,
        string::contains::StringContains::build,
    );
    r.condition(
        &string::ends_with::INFO,
        string::ends_with::StringEndsWith::build,
    );
    r.condition(
        &string::equal_to::INFO,
        string::equal_to::StringEqualTo::build,
    );
    r.condition(
        &string::greater_than::INFO,
        string::greater_than::StringGreaterThan::build,
    );
    r.condition(
        &string::less_than::INFO,
        string::less_than::StringLessThan::build,
    );
    r.condition(
        &string::starts_with::INFO,
        string::starts_with::StringStartsWith::build,
    );
    r.condition(&string::r#match::INFO, string::r#match::StringMatch::build);

    r.condition(
        &utility::random::INFO,
        utility::random::UtilityRandom::build,
    );
}

/// The `object` settings of a leaf condition: where the input is read and, for the
/// conditions that compare dynamically, where the comparand is read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SourceSettings {
    /// Where the input value is read; absent means the raw data.
    pub source_key: Option<String>,
}

/// `object` for the conditions with a dynamic comparand.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CompareSettings {
    /// Where the input value is read; absent means the raw data.
    pub source_key: Option<String>,
    /// Where a comparand is read that replaces `value` when present in the message.
    pub target_key: Option<String>,
}

/// What a leaf condition reads: the raw data, or the value at `object.source_key`.
#[derive(Debug, Clone)]
pub(crate) struct Source(Option<Key>);

/// One input of a leaf condition.
pub(crate) enum Input<'m> {
    /// The raw data (data mode).
    Data(&'m [u8]),
    /// The value at the source key (object mode).
    Value(Cow<'m, Value>),
    /// No value at the source key. As in Substation (GJSON's empty result), it reads as the
    /// empty value: text `""`, number 0, length 0. Only the `*_equal_to` conditions tell it
    /// apart (a missing value equals nothing).
    Missing,
}

impl Input<'_> {
    /// The input as bytes: the data, or the value's GJSON text.
    pub(crate) fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Input::Data(d) => Cow::Borrowed(d),
            Input::Value(v) => match value::to_text(v) {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
            Input::Missing => Cow::Borrowed(b""),
        }
    }

    /// The input as text (non-UTF-8 data is replaced, as a string view of it).
    pub(crate) fn text(&self) -> Cow<'_, str> {
        match self {
            Input::Data(d) => String::from_utf8_lossy(d),
            Input::Value(v) => value::to_text(v),
            Input::Missing => Cow::Borrowed(""),
        }
    }
}

impl Source {
    /// Compiles `object.source_key` (an empty string counts as absent).
    pub(crate) fn new(b: &Build<'_>, source_key: &Option<String>) -> Result<Source, ConfigError> {
        b.opt_key("object.source_key", source_key).map(Source)
    }

    /// The input, or `None` for a ctrl message (every leaf condition is false on ctrl).
    pub(crate) fn read<'m>(&self, msg: &'m Message) -> Option<Input<'m>> {
        if msg.is_ctrl() {
            return None;
        }
        Some(match &self.0 {
            None => Input::Data(&msg.data()[..]),
            Some(k) => msg.get(k).map_or(Input::Missing, Input::Value),
        })
    }
}

/// The value at an optional dynamic-comparand key, when the message has it.
pub(crate) fn comparand<'m>(target: &Option<Key>, msg: &'m Message) -> Option<Cow<'m, Value>> {
    target.as_ref().and_then(|k| msg.get(k))
}

#[cfg(test)]
pub(crate) mod tests {
    //! The table runner every condition file uses.

    use crate::registry;
    use sluice_engine::{Message, Value, json};

    /// What a case expects.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Want {
        /// The condition holds.
        T,
        /// It does not.
        F,
        /// Evaluating it fails.
        Err,
    }

    /// One case: name, settings, message, expectation.
    pub(crate) type Case = (&'static str, Value, Message, Want);

    /// A data message.
    pub(crate) fn data(d: &str) -> Message {
        Message::new(d.as_bytes().to_vec())
    }

    /// A data message with metadata.
    pub(crate) fn with_meta(d: &str, meta: Value) -> Message {
        let mut m = data(d);
        m.set_metadata_value(meta);
        m
    }

    /// Builds `ty` with each case's settings through the registry and checks the outcome.
    pub(crate) fn run_table(ty: &str, cases: Vec<Case>) {
        let r = registry();
        for (name, settings, msg, want) in cases {
            let c = r
                .build_condition(&json!({"type": ty, "settings": settings}), "condition")
                .unwrap_or_else(|e| panic!("{ty} {name}: build failed: {e}"))
                .value;
            let got = match c.test(&msg) {
                Ok(true) => Want::T,
                Ok(false) => Want::F,
                Err(_) => Want::Err,
            };
            assert_eq!(got, want, "{ty}: case {name:?}");
        }
    }

    /// Asserts that `ty` with `settings` is false on a ctrl message.
    pub(crate) fn ctrl_is_false(ty: &str, settings: Value) {
        let c = registry()
            .build_condition(&json!({"type": ty, "settings": settings}), "condition")
            .unwrap_or_else(|e| panic!("{ty}: build failed: {e}"))
            .value;
        assert!(
            !c.test(&Message::ctrl()).unwrap(),
            "{ty}: ctrl must be false"
        );
    }

    /// The error building `ty` with `settings` at `tests[0].condition` (panics if it builds).
    pub(crate) fn build_error(ty: &str, settings: Value) -> sluice_engine::ConfigError {
        registry()
            .build_condition(
                &json!({"type": ty, "settings": settings}),
                "tests[0].condition",
            )
            .err()
            .unwrap_or_else(|| panic!("{ty}: {settings} must not build"))
    }

    /// Asserts that building `ty` with `settings` fails, naming `field`.
    pub(crate) fn config_error(ty: &str, settings: Value, field: &str) {
        let err = build_error(ty, settings);
        assert_eq!(err.field.as_deref(), Some(field), "{ty}: {err}");
        let text = err.to_string();
        assert!(text.starts_with("tests[0].condition"), "{text}");
        assert!(text.contains(field), "{text}");
    }
}
