//! `aggregate_from_string`: splits the data on `separator` into one message per piece.
//!
//! Substation compatibility: the same setting (`separator`, required) and output; every
//! piece becomes a message, empty pieces included (so `a\nb\n` split on `\n` gives `a`, `b`
//! and an empty message, as in Substation). Outputs keep the input's metadata and
//! acknowledgement tokens. Empty data produces one empty message, like splitting any other
//! data without a separator in it.

use bytes::Bytes;
use serde::Deserialize;
use sluice_engine::{
    Body, Build, ConfigError, Message, StatelessTransform, TransformError, async_trait,
};

/// Settings of `aggregate_from_string`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// Where to split (required).
    pub separator: String,
}

/// The `aggregate_from_string` transform.
pub(crate) struct AggregateFromString {
    separator: Vec<u8>,
}

impl AggregateFromString {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.separator.is_empty() {
            return Err(b.field_error(
                "separator",
                "missing required option: separator (e.g. \"\\n\")",
            ));
        }
        Ok(AggregateFromString {
            separator: s.separator.into_bytes(),
        })
    }
}

#[async_trait]
impl StatelessTransform for AggregateFromString {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let data: Bytes = msg.data().clone();
        let sep = &self.separator[..];
        let mut start = 0;
        while let Some(pos) = find(&data[start..], sep) {
            out.push(msg.derive(Body::from_bytes(data.slice(start..start + pos))));
            start += pos + sep.len();
        }
        out.push(msg.derive(Body::from_bytes(data.slice(start..))));
        Ok(())
    }
}

/// The first index of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() == 1 {
        return hay.iter().position(|&c| c == needle[0]);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What registers the `aggregate_from_string` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "aggregate_from_string",
    aliases: &[],
    library: "sub.tf.agg.from.str",
    summary: "one message per piece of the data split on `separator`",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"separator": "\n"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{Message, json, testing};

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            ("newline", "\n", "a\nb", vec!["a", "b"]),
            ("trailing separator", "\n", "a\nb\n", vec!["a", "b", ""]),
            ("multi-byte", "||", "a||b|c", vec!["a", "b|c"]),
            ("no separator", ",", "abc", vec!["abc"]),
            ("empty data", ",", "", vec![""]),
        ];
        for (name, sep, input, want) in cases {
            let t = testing::build(
                &r,
                json!({"type": "aggregate_from_string", "settings": {"separator": sep}}),
            )
            .unwrap();
            assert_eq!(testing::run(t, &[input]).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn separator_is_required() {
        let e = testing::build(&registry(), json!({"type": "aggregate_from_string"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("separator"), "{e}");
    }

    #[test]
    fn outputs_keep_metadata_and_acks() {
        let t = testing::build(
            &registry(),
            json!({"type": "aggregate_from_string", "settings": {"separator": ","}}),
        )
        .unwrap();
        let (_tr, tok) = sluice_engine::ack::AckTracker::new();
        let mut m = Message::new(&b"a,b"[..]);
        m.set_metadata(&b"{\"k\":1}"[..]);
        m.add_ack(tok);
        let mut out = Vec::new();
        testing::block_on(t.transform(m, &mut out)).unwrap();
        assert_eq!(out.len(), 2);
        assert!(
            out.iter()
                .all(|o| &o.metadata()[..] == b"{\"k\":1}" && o.acks().len() == 1)
        );
    }
}
