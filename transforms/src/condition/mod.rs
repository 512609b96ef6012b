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

pub mod format;
pub mod meta;
pub mod network;
pub mod number;
pub mod string;
pub mod utility;

use std::borrow::Cow;

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Key, Message, Registry, Value, value};

use crate::cnd_ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.condition("meta_all", cnd_ctor!(meta::all::MetaAll));
    r.condition("all", cnd_ctor!(meta::all::MetaAll));
    r.condition("meta_any", cnd_ctor!(meta::any::MetaAny));
    r.condition("any", cnd_ctor!(meta::any::MetaAny));
    r.condition("meta_none", cnd_ctor!(meta::none::MetaNone));
    r.condition("none", cnd_ctor!(meta::none::MetaNone));

    r.condition("format_json", cnd_ctor!(format::json::FormatJson));
    r.condition("format_mime", cnd_ctor!(format::mime::FormatMime));

    r.condition(
        "network_ip_global_unicast",
        cnd_ctor!(network::global_unicast::NetworkIpGlobalUnicast),
    );
    r.condition(
        "network_ip_link_local_multicast",
        cnd_ctor!(network::link_local_multicast::NetworkIpLinkLocalMulticast),
    );
    r.condition(
        "network_ip_link_local_unicast",
        cnd_ctor!(network::link_local_unicast::NetworkIpLinkLocalUnicast),
    );
    r.condition(
        "network_ip_loopback",
        cnd_ctor!(network::loopback::NetworkIpLoopback),
    );
    r.condition(
        "network_ip_multicast",
        cnd_ctor!(network::multicast::NetworkIpMulticast),
    );
    r.condition(
        "network_ip_private",
        cnd_ctor!(network::private::NetworkIpPrivate),
    );
    r.condition(
        "network_ip_unicast",
        cnd_ctor!(network::unicast::NetworkIpUnicast),
    );
    r.condition(
        "network_ip_unspecified",
        cnd_ctor!(network::unspecified::NetworkIpUnspecified),
    );
    r.condition(
        "network_ip_valid",
        cnd_ctor!(network::valid::NetworkIpValid),
    );

    r.condition(
        "number_equal_to",
        cnd_ctor!(number::equal_to::NumberEqualTo),
    );
    r.condition(
        "number_greater_than",
        cnd_ctor!(number::greater_than::NumberGreaterThan),
    );
    r.condition(
        "number_less_than",
        cnd_ctor!(number::less_than::NumberLessThan),
    );
    r.condition(
        "number_bitwise_and",
        cnd_ctor!(number::bitwise_and::NumberBitwiseAnd),
    );
    r.condition(
        "number_bitwise_or",
        cnd_ctor!(number::bitwise_or::NumberBitwiseOr),
    );
    r.condition(
        "number_bitwise_xor",
        cnd_ctor!(number::bitwise_xor::NumberBitwiseXor),
    );
    r.condition(
        "number_bitwise_not",
        cnd_ctor!(number::bitwise_not::NumberBitwiseNot),
    );
    r.condition(
        "number_length_equal_to",
        cnd_ctor!(number::length_equal_to::NumberLengthEqualTo),
    );
    r.condition(
        "number_length_greater_than",
        cnd_ctor!(number::length_greater_than::NumberLengthGreaterThan),
    );
    r.condition(
        "number_length_less_than",
        cnd_ctor!(number::length_less_than::NumberLengthLessThan),
    );

    r.condition(
        "string_contains",
        cnd_ctor!(string::contains::StringContains),
    );
    r.condition(
        "string_ends_with",
        cnd_ctor!(string::ends_with::StringEndsWith),
    );
    r.condition(
        "string_equal_to",
        cnd_ctor!(string::equal_to::StringEqualTo),
    );
    r.condition(
        "string_greater_than",
        cnd_ctor!(string::greater_than::StringGreaterThan),
    );
    r.condition(
        "string_less_than",
        cnd_ctor!(string::less_than::StringLessThan),
    );
    r.condition(
        "string_starts_with",
        cnd_ctor!(string::starts_with::StringStartsWith),
    );
    r.condition("string_match", cnd_ctor!(string::r#match::StringMatch));

    r.condition("utility_random", cnd_ctor!(utility::random::UtilityRandom));
}

/// The `object` settings of a leaf condition: where the input is read and, for the
/// conditions that compare dynamically, where the comparand is read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SourceSettings {
    /// Where the input value is read; absent means the raw data.
    pub source_key: Option<String>,
}

/// `object` for the conditions with a dynamic comparand.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CompareSettings {
    /// Where the input value is read; absent means the raw data.
    pub source_key: Option<String>,
    /// Where a comparand is read that replaces `value` when present in the message.
    pub target_key: Option<String>,
}

/// What a leaf condition reads: the raw data, or the value at `object.source_key`.
#[derive(Debug, Clone)]
pub struct Source(Option<Key>);

/// One input of a leaf condition.
pub enum Input<'m> {
    /// The raw data (data mode).
    Data(&'m [u8]),
    /// The value at the source key (object mode).
    Value(Cow<'m, Value>),
}

impl Input<'_> {
    /// The input as bytes: the data, or the value's GJSON text.
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Input::Data(d) => Cow::Borrowed(d),
            Input::Value(v) => match value::to_text(v) {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
        }
    }

    /// The input as text (non-UTF-8 data is replaced, as a string view of it).
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Input::Data(d) => String::from_utf8_lossy(d),
            Input::Value(v) => value::to_text(v),
        }
    }
}

impl Source {
    /// Compiles `object.source_key` (an empty string counts as absent).
    pub fn new(b: &Build<'_>, source_key: &Option<String>) -> Result<Source, ConfigError> {
        b.opt_key("object.source_key", source_key).map(Source)
    }

    /// Whether the condition reads the raw data.
    pub fn is_data(&self) -> bool {
        self.0.is_none()
    }

    /// The input, or `None` for a ctrl message or a missing source value.
    pub fn read<'m>(&self, msg: &'m Message) -> Option<Input<'m>> {
        if msg.is_ctrl() {
            return None;
        }
        match &self.0 {
            None => Some(Input::Data(&msg.data()[..])),
            Some(k) => msg.get(k).map(Input::Value),
        }
    }
}

/// The value at an optional dynamic-comparand key, when the message has it.
pub fn comparand<'m>(target: &Option<Key>, msg: &'m Message) -> Option<Cow<'m, Value>> {
    target.as_ref().and_then(|k| msg.get(k))
}

#[cfg(test)]
pub(crate) mod tests {
    //! The table runner every condition file uses.

    use crate::registry;
    use sluice_engine::{Message, Value, json};

    /// What a case expects.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Want {
        /// The condition holds.
        T,
        /// It does not.
        F,
        /// Evaluating it fails.
        Err,
    }

    /// One case: name, settings, message, expectation.
    pub type Case = (&'static str, Value, Message, Want);

    /// A data message.
    pub fn data(d: &str) -> Message {
        Message::new(d.as_bytes().to_vec())
    }

    /// A data message with metadata.
    pub fn with_meta(d: &str, meta: Value) -> Message {
        let mut m = data(d);
        m.set_metadata_value(meta);
        m
    }

    /// Builds `ty` with each case's settings through the registry and checks the outcome.
    pub fn run_table(ty: &str, cases: Vec<Case>) {
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
    pub fn ctrl_is_false(ty: &str, settings: Value) {
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
    pub fn build_error(ty: &str, settings: Value) -> sluice_engine::ConfigError {
        registry()
            .build_condition(
                &json!({"type": ty, "settings": settings}),
                "tests[0].condition",
            )
            .err()
            .unwrap_or_else(|| panic!("{ty}: {settings} must not build"))
    }

    /// Asserts that building `ty` with `settings` fails, naming `field`.
    pub fn config_error(ty: &str, settings: Value, field: &str) {
        let err = build_error(ty, settings);
        assert_eq!(err.field.as_deref(), Some(field), "{ty}: {err}");
        let text = err.to_string();
        assert!(text.starts_with("tests[0].condition"), "{text}");
        assert!(text.contains(field), "{text}");
    }
}
