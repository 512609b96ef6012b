//! `format_from_pretty_print`: reassembles pretty-printed JSON that arrives split across
//! messages (typically one line per message) into one compact JSON message per value.
//!
//! Substation compatibility: data only, no settings; the messages' bytes are joined as
//! they are (no separator) until a top-level JSON object is complete, which is then emitted
//! compacted; messages that complete nothing emit nothing. Substation finds the end of an
//! object by counting `{` and `}` bytes; this transform scans JSON properly instead, so:
//!
//! - braces and brackets inside strings (`"a}b"`, escaped quotes) do not count;
//! - every value an input completes is emitted, in order (Substation emits the first and
//!   drops the rest of that message), and whitespace between values is skipped (Substation
//!   fails on it);
//! - top-level arrays are reassembled as well as objects; anything else outside a value
//!   (a stray scalar or closing bracket) is an error naming its byte offset;
//! - the output is compacted without touching the text of strings and numbers, and is
//!   checked to be valid JSON (an error otherwise, as in Substation);
//! - the state is behind a lock and the transform is stateful, so the engine feeds it one
//!   message at a time in input order (Substation's state is unsynchronised);
//! - each output carries the metadata of the message that completed it and the
//!   acknowledgements of every message that contributed to it, so an input counts as
//!   delivered only once the values built from it are;
//! - a value still open when a ctrl message arrives (the end of the input or of a batch)
//!   is an error naming how many bytes were held, instead of being held forever;
//! - a value is capped at [`MAX_VALUE`] (64 MiB) compacted, so unbalanced input is an
//!   error instead of exhausting memory.
//!
//! After an error the held bytes are discarded (and their messages marked failed), so the
//! next message starts afresh.

use std::sync::{Mutex, MutexGuard};

use serde::Deserialize;
use sluice_engine::ack::{AckSet, fail_all};
use sluice_engine::{
    Body, Build, ConfigError, Message, StatefulTransform, TransformError, async_trait,
};

/// The largest compacted value the transform holds while it waits for the rest.
pub(crate) const MAX_VALUE: usize = 64 << 20;

/// Settings of `format_from_pretty_print` (none).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `format_from_pretty_print` transform.
pub(crate) struct FormatFromPrettyPrint {
    state: Mutex<Scanner>,
    limit: usize,
}

/// Where the scan of the joined input stands.
#[derive(Default)]
struct Scanner {
    /// The compacted bytes of the value in progress.
    buf: Vec<u8>,
    /// The closing bracket each open object or array expects, innermost last.
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// Whitespace was skipped since the last byte kept (outside strings).
    gap: bool,
    /// The acknowledgements of the messages that contributed to the value in progress.
    acks: AckSet,
}

impl Scanner {
    /// Discards the value in progress, marking its messages failed.
    fn reset(&mut self, reason: &str) {
        fail_all(&self.acks, reason);
        *self = Scanner::default();
    }

    /// Scans one message's data, returning each value it completes.
    fn feed(&mut self, data: &[u8], limit: usize) -> Result<Vec<Vec<u8>>, String> {
        let mut done = Vec::new();
        for (i, &c) in data.iter().enumerate() {
            if self.open.is_empty() {
                match c {
                    b' ' | b'\t' | b'\r' | b'\n' => continue,
                    b'{' | b'[' => {}
                    _ => {
                        return Err(format!(
                            "unexpected {} at byte {i} of the message, outside a JSON object or array",
                            show(c)
                        ));
                    }
                }
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if c == b'\\' {
                    self.escaped = true;
                } else if c == b'"' {
                    self.in_string = false;
                }
                self.buf.push(c);
            } else {
                match c {
                    b' ' | b'\t' | b'\r' | b'\n' => {
                        self.gap = true;
                        continue;
                    }
                    b'"' => self.in_string = true,
                    b'{' => self.open.push(b'}'),
                    b'[' => self.open.push(b']'),
                    b'}' | b']' => {
                        // A value is open here (a close at the top level is refused above).
                        let want = self.open.pop();
                        if want != Some(c) {
                            return Err(format!(
                                "unexpected {} at byte {i} of the message, where {} was expected",
                                show(c),
                                want.map_or_else(|| "nothing".to_string(), show)
                            ));
                        }
                    }
                    _ => {}
                }
                // Keep two tokens that whitespace separated apart (`1 2` must stay
                // invalid rather than become `12`); valid JSON never needs this.
                if self.gap
                    && is_token_byte(c)
                    && self.buf.last().is_some_and(|&p| is_token_byte(p))
                {
                    self.buf.push(b' ');
                }
                self.gap = false;
                self.buf.push(c);
            }
            if self.buf.len() > limit {
                return Err(format!(
                    "a JSON value exceeds the limit of {limit} bytes (compacted) before it closes"
                ));
            }
            if self.open.is_empty() {
                let value = std::mem::take(&mut self.buf);
                if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&value) {
                    return Err(format!("invalid JSON: {e}"));
                }
                done.push(value);
                self.gap = false;
            }
        }
        Ok(done)
    }
}

fn is_token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.' | b'"')
}

fn show(c: u8) -> String {
    if c.is_ascii_graphic() {
        format!("`{}`", c as char)
    } else {
        format!("byte 0x{c:02x}")
    }
}

impl FormatFromPrettyPrint {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(FormatFromPrettyPrint {
            state: Mutex::new(Scanner::default()),
            limit: MAX_VALUE,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Scanner> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One message, with the state already locked.
    fn step(
        &self,
        s: &mut Scanner,
        msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            if !s.open.is_empty() {
                let e = TransformError::failed(format!(
                    "cannot reassemble pretty-printed JSON: the input ended inside a JSON value ({} bytes held, {} still open)",
                    s.buf.len(),
                    s.open.len()
                ));
                s.reset(&e.to_string());
                return Err(e);
            }
            out.push(msg);
            return Ok(());
        }
        match s.feed(msg.data(), self.limit) {
            Ok(values) => {
                for v in values {
                    let mut m = msg.derive(Body::from_bytes(v));
                    m.extend_acks(&s.acks);
                    out.push(m);
                    s.acks.clear();
                }
                if !s.open.is_empty() {
                    s.acks.extend(msg.acks().iter().cloned());
                }
                Ok(())
            }
            Err(why) => {
                let e =
                    TransformError::failed(format!("cannot reassemble pretty-printed JSON: {why}"));
                s.reset(&e.to_string());
                Err(e)
            }
        }
    }
}

#[async_trait]
impl StatefulTransform for FormatFromPrettyPrint {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let mut s = self.lock();
        self.step(&mut s, msg, out)
    }

    /// Holds the lock for the whole batch, so that no other caller's messages can be
    /// interleaved with this batch's.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut s = self.lock();
        let mut rest = msgs.into_iter();
        while let Some(m) = rest.next() {
            let acks = m.acks().clone();
            if let Err(e) = self.step(&mut s, m, out) {
                let reason = e.to_string();
                fail_all(&acks, &reason);
                for r in rest {
                    r.fail_acks(&reason);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    async fn abort(&self, reason: &str) {
        self.lock().reset(reason);
    }
}

/// What registers the `format_from_pretty_print` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_from_pretty_print",
    aliases: &[],
    library: "sub.tf.fmt.from.pretty_print",
    summary: "reassembles pretty-printed JSON split across messages",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::{Pipeline, Transform, json, testing};
    use std::sync::Arc;

    const TYPE: &str = "format_from_pretty_print";

    fn build() -> Transform {
        testing::build(&registry(), json!({"type": TYPE})).unwrap()
    }

    #[test]
    fn cases() {
        let cases: [(&str, Vec<&str>, Vec<&str>); 14] = [
            (
                "one message",
                vec!["{\n  \"foo\": \"bar\"\n}"],
                vec![r#"{"foo":"bar"}"#],
            ),
            (
                "Substation's split object",
                vec![
                    "{",
                    r#""foo":"bar","#,
                    r#""baz": {"#,
                    "\t\"qux\": \"corge\"",
                    "}",
                    "}",
                ],
                vec![r#"{"foo":"bar","baz":{"qux":"corge"}}"#],
            ),
            (
                "braces inside strings do not count",
                vec!["{", r##"  "a": "}{ ][""##, "}"],
                vec![r#"{"a":"}{ ]["}"#],
            ),
            (
                "escaped quotes inside strings",
                vec!["{", r##"  "a": "x\"}\\""##, r##"  ,"b": "\\\"{""##, "}"],
                vec![r#"{"a":"x\"}\\","b":"\\\"{"}"#],
            ),
            (
                "whitespace inside strings is kept",
                vec!["{", r#"  "a": "two  spaces""#, "}"],
                vec![r#"{"a":"two  spaces"}"#],
            ),
            (
                "several objects in one message",
                vec![r#"{"a":1} {"b":2}"#, r#"{"c":3}"#],
                vec![r#"{"a":1}"#, r#"{"b":2}"#, r#"{"c":3}"#],
            ),
            (
                "an object ends and the next starts in one message",
                vec!["{", r#""a":1"#, r#"} {"b":"#, "2", "}"],
                vec![r#"{"a":1}"#, r#"{"b":2}"#],
            ),
            (
                "blank lines between objects",
                vec!["{", "}", "", "   ", "{\"a\":[1,", " 2]}"],
                vec!["{}", r#"{"a":[1,2]}"#],
            ),
            (
                "top-level array",
                vec!["[", "  1,", "  {\"a\": true}", "]"],
                vec![r#"[1,{"a":true}]"#],
            ),
            (
                "numbers and literals keep their text",
                vec!["{", r#""f": 1.50,"#, r#""e": 1E+2,"#, r#""n": null"#, "}"],
                vec![r#"{"f":1.50,"e":1E+2,"n":null}"#],
            ),
            (
                "a string split across messages",
                vec![r#"{"a": "hel"#, r#"lo"}"#],
                vec![r#"{"a":"hello"}"#],
            ),
            (
                "nested arrays and objects",
                vec!["{", "\"a\": [", "{\"b\": [[]]}", "]", "}"],
                vec![r#"{"a":[{"b":[[]]}]}"#],
            ),
            (
                "unicode",
                vec!["{", "\"é\": \"ü\"", "}"],
                vec![r#"{"é":"ü"}"#],
            ),
            ("nothing", vec!["", "  "], vec![]),
        ];
        for (name, input, want) in cases {
            let got = testing::run(build(), &input).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn errors() {
        let cases: [(&str, Vec<&str>, &str); 7] = [
            (
                "stray scalar",
                vec!["{}", "  x"],
                "unexpected `x` at byte 2 of the message, outside a JSON object or array",
            ),
            (
                "stray closing brace",
                vec!["}"],
                "unexpected `}` at byte 0 of the message",
            ),
            (
                "mismatched bracket",
                vec!["{", "\"a\": [1}", "}"],
                "unexpected `}` at byte 7 of the message, where `]` was expected",
            ),
            (
                "invalid JSON inside",
                vec!["{", "\"a\" 1", "}"],
                "invalid JSON",
            ),
            (
                "whitespace-separated tokens stay separate",
                vec!["{\"a\": 1 2}"],
                "invalid JSON",
            ),
            (
                "trailing comma",
                vec!["{", "\"a\": 1,", "}"],
                "invalid JSON",
            ),
            (
                "input ends inside a value",
                vec!["{", "\"a\": {", "\"b\": 1"],
                "the input ended inside a JSON value (11 bytes held, 2 still open)",
            ),
        ];
        for (name, input, want) in cases {
            let err = testing::run(build(), &input).unwrap_err().to_string();
            assert!(
                err.starts_with("transform under_test: cannot reassemble pretty-printed JSON: "),
                "{name}: {err}"
            );
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn starts_afresh_after_an_error() {
        let t = build();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let r = testing::block_on(p.apply(vec![Message::new(&b"{\"a\": ]"[..])]));
        assert!(r.is_err());
        let out = testing::run_pipeline(&p, &["{", "\"b\": 2", "}"]).unwrap();
        assert_eq!(out, vec![r#"{"b":2}"#]);
    }

    #[test]
    fn limit() {
        let mut s = Scanner::default();
        assert_eq!(s.feed(b"{\"a\":\"123\"}", 11).unwrap().len(), 1);
        let err = s.feed(b"{\"a\":\"1234\"}", 11).unwrap_err();
        assert!(err.contains("exceeds the limit of 11 bytes"), "{err}");
    }

    #[test]
    fn outputs_carry_the_acks_of_every_part() {
        let t = build();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let (t1, k1) = AckTracker::new();
        let (t2, k2) = AckTracker::new();
        let (t3, k3) = AckTracker::new();
        let mut msgs = Vec::new();
        for (data, token, meta) in [
            ("{\"a\":", k1, "{\"n\":1}"),
            ("1}{\"b\":", k2, "{\"n\":2}"),
            ("2}", k3, "{\"n\":3}"),
        ] {
            let mut m = Message::new(data.as_bytes().to_vec());
            m.set_metadata(meta.as_bytes().to_vec());
            m.add_ack(token);
            msgs.push(m);
        }
        let out = testing::block_on(p.apply(msgs)).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(&out[0].data()[..], br#"{"a":1}"#);
        assert_eq!(
            &out[0].metadata()[..],
            br#"{"n":2}"#,
            "the completing message's"
        );
        assert_eq!(out[0].acks().len(), 2);
        assert_eq!(&out[1].data()[..], br#"{"b":2}"#);
        assert_eq!(&out[1].metadata()[..], br#"{"n":3}"#);
        assert_eq!(out[1].acks().len(), 2);
        let mut out = out;
        drop(out.remove(0));
        assert_eq!(t1.status(), AckStatus::Delivered);
        assert_eq!(
            t2.status(),
            AckStatus::Pending,
            "still in the second output"
        );
        assert_eq!(t3.status(), AckStatus::Pending);
    }

    #[test]
    fn held_parts_fail_on_error_and_abort() {
        let t = build();
        let p = Pipeline::new(vec![(Arc::from("t"), t.clone())]);
        let (t1, k1) = AckTracker::new();
        let mut m = Message::new(&b"{\"a\":"[..]);
        m.add_ack(k1);
        let out = testing::block_on(p.apply(vec![m])).unwrap();
        assert!(out.is_empty());
        assert_eq!(t1.status(), AckStatus::Pending, "held");
        assert!(testing::block_on(p.apply(vec![Message::ctrl()])).is_err());
        assert_eq!(
            t1.status(),
            AckStatus::Failed,
            "an open value at ctrl fails its parts"
        );

        let (t2, k2) = AckTracker::new();
        let mut m = Message::new(&b"[1,"[..]);
        m.add_ack(k2);
        testing::block_on(p.apply(vec![m])).unwrap();
        testing::block_on(t.abort("stop"));
        assert_eq!(t2.status(), AckStatus::Failed);
        // The abort cleared the state: a new value reassembles.
        let out = testing::run_pipeline(&p, &["[2]"]).unwrap();
        assert_eq!(out, vec!["[2]"]);
    }

    #[test]
    fn concurrent_batches_do_not_interleave() {
        let t = build();
        let p = Arc::new(Pipeline::new(vec![(Arc::from("t"), t)]));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let outs = rt.block_on(async {
            let mut handles = Vec::new();
            for n in 0..8 {
                let p = p.clone();
                handles.push(tokio::spawn(async move {
                    let msgs: Vec<Message> = ["{", &format!("\"n\": {n},"), "\"s\": \"}\"", "}"]
                        .iter()
                        .map(|s| Message::new(s.as_bytes().to_vec()))
                        .collect();
                    p.apply(msgs).await.unwrap()
                }));
            }
            let mut all = Vec::new();
            for h in handles {
                all.push(h.await.unwrap());
            }
            all
        });
        for (n, out) in outs.iter().enumerate() {
            assert_eq!(out.len(), 1);
            assert_eq!(
                String::from_utf8_lossy(out[0].data()),
                format!(r#"{{"n":{n},"s":"}}"}}"#)
            );
        }
    }
}
