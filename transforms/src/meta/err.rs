//! `meta_err`: runs an inner list and swallows the errors whose text matches one of
//! `error_messages`; for a data message that failed, the input message comes out unchanged.
//!
//! Substation compatibility: the same settings. `error_messages` are regular expressions
//! matched (unanchored) against the error's text as Substation builds it
//! ([`TransformError::substation_text`]): the `transform <id>: ...` chain of the inner
//! transforms and the cause, where a `utility_err` message stands as written.
//! With none configured nothing is caught (Substation's Go default; its Jsonnet library
//! defaults to `['.*']`). Differences: the message that comes out after an error is a copy
//! taken *before* the inner list ran, not a half-changed one; a ctrl whose flush failed is
//! swallowed like Substation's, and the inner list is then aborted, so what it still held
//! is discarded (and marked failed) instead of being sent on a later flush after the source
//! was told to redeliver it.
//!
//! # Swallowing an error does not make a failed send succeed
//!
//! **Acknowledgement tokens that an inner send marked failed stay failed.** A source that
//! takes per-record reports (Lambda's `batchItemFailures` for Kinesis, DynamoDB streams and
//! SQS) therefore still redelivers every record whose send failed: sluice never turns a
//! failed send into a silent drop, even inside `meta_err`. **Where the input adapter only
//! has a pass/fail for the whole batch** (stdin, S3 events, Firehose transformation...),
//! the swallowed error is all it would have seen, so **swallowing turns those failures into
//! drops**, as it always does in Substation. Wrap only what you can afford to lose.
//!
//! A data message that fails inside a *stateless* list (a parse error, a failed lookup) is
//! not a delivery failure: the input goes on down the pipeline, so its tokens are not
//! marked failed (see [`super::detach`]). Inside a *stateful* list the pipeline marks the
//! failed message's tokens failed before the error reaches `meta_err` (the message may have
//! been half-sent), so a record-level source redelivers it: duplicates, never loss.

use std::time::Instant;

use regex::Regex;
use serde::Deserialize;
use sluice_engine::{
    Build, ConfigError, Message, Pipeline, TransformError, Value, Wrapper, async_trait,
};

use super::{detach, error_patterns, matches_any, push_with_one_ctrl, reattach, required_pipeline};

/// Settings of `meta_err`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The inner list (at least one transform).
    pub transforms: Value,
    /// Regular expressions; an error whose text matches any of them is swallowed.
    pub error_messages: Vec<String>,
}

/// The `meta_err` transform.
pub(crate) struct MetaErr {
    inner: Pipeline,
    patterns: Vec<Regex>,
}

impl MetaErr {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let inner = required_pipeline(b, "transforms", &s.transforms)?;
        let patterns = error_patterns(b, &s.error_messages)?;
        Ok(MetaErr { inner, patterns })
    }

    fn catches(&self, e: &TransformError) -> bool {
        matches_any(&self.patterns, &e.substation_text())
    }

    /// After a swallowed flush: what the inner list still holds would otherwise be sent
    /// with a later flush, after the source was told (through the failed tokens) to
    /// redeliver it.
    async fn discard_held(&self, e: &TransformError) {
        self.inner.abort(&e.to_string()).await;
    }
}

#[async_trait]
impl Wrapper for MetaErr {
    fn wraps(&self) -> &[Pipeline] {
        std::slice::from_ref(&self.inner)
    }

    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            match self.inner.apply(vec![msg.clone()]).await {
                Ok(outs) => push_with_one_ctrl(outs, msg, out),
                Err(e) if self.catches(&e) => {
                    tracing::warn!(error = %e, "meta_err: a flush error was swallowed");
                    self.discard_held(&e).await;
                    out.push(msg);
                }
                Err(e) => return Err(e),
            }
            return Ok(());
        }
        if !self.inner.is_stateful() {
            let acks = detach(&mut msg);
            let input = msg.clone();
            match self.inner.apply(vec![msg]).await {
                Ok(mut outs) => {
                    reattach(&mut outs, &acks);
                    out.extend(outs);
                }
                Err(e) if self.catches(&e) => {
                    tracing::debug!(error = %e, "meta_err: an error was swallowed");
                    let mut input = input;
                    input.extend_acks(&acks);
                    out.push(input);
                }
                Err(e) => {
                    sluice_engine::ack::fail_all(&acks, &e.to_string());
                    return Err(e);
                }
            }
        } else {
            let input = msg.clone();
            match self.inner.apply(vec![msg]).await {
                Ok(outs) => out.extend(outs),
                Err(e) if self.catches(&e) => {
                    tracing::warn!(error = %e, "meta_err: an error was swallowed");
                    out.push(input);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        match self.inner.expire(now).await {
            Ok(outs) => out.extend(outs),
            Err(e) if self.catches(&e) => {
                tracing::warn!(error = %e, "meta_err: a timed flush error was swallowed");
                self.discard_held(&e).await;
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Not passed on: the inner list's errors are what it catches.
    fn fails_alone(&self) {}
}

impl MetaErr {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.inner.is_stateful();
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// What registers the `meta_err` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_err",
    aliases: &[],
    library: "sub.tf.meta.err",
    summary: "runs inner transforms, swallowing matching errors",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"transforms": [{"type": "utility_drop"}]}"#,
};

#[cfg(test)]
mod tests {
    use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};
    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Pipeline, Value, json, testing};

    fn meta_err(inner: Value, patterns: Value) -> Value {
        json!({"type": "meta_err", "settings": {"transforms": inner, "error_messages": patterns}})
    }

    fn copy_then_fail(msg: &str) -> Value {
        json!([
            {"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}},
            {"type": "utility_err", "settings": {"message": msg}},
        ])
    }

    #[test]
    fn cases() {
        let r = registry();
        /// (name, inner list, error_messages, input, output or error)
        type Case = (
            &'static str,
            Value,
            Value,
            &'static str,
            Result<&'static str, &'static str>,
        );
        let cases: [Case; 9] = [
            (
                "a matching error gives back the input as it was",
                copy_then_fail("bad input"),
                json!(["bad"]),
                r#"{"a":1}"#,
                Ok(r#"{"a":1}"#),
            ),
            (
                "a utility_err message is matched as written, as Substation's",
                copy_then_fail("bad input"),
                json!(["^bad input$"]),
                r#"{"a":1}"#,
                Ok(r#"{"a":1}"#),
            ),
            (
                "so a pattern on its transform layer does not match it",
                copy_then_fail("bad input"),
                json!(["^transform utility_err"]),
                r#"{"a":1}"#,
                Err("transforms[0].settings.transforms[1] (utility_err): bad input"),
            ),
            (
                "patterns see the transform chain of other errors",
                json!([{"type": "format_from_base64"}]),
                json!(["^transform format_from_base64: "]),
                "!!!",
                Ok("!!!"),
            ),
            (
                "an enclosing transform's layer stays",
                json!([{"type": "meta_switch", "settings": {"cases": [{"transforms": [{"type": "utility_err", "settings": {"message": "bad"}}]}]}}]),
                json!(["^transform meta_switch: bad$"]),
                "x",
                Ok("x"),
            ),
            (
                "any pattern may match",
                copy_then_fail("timeout"),
                json!(["nope", "time"]),
                "x",
                Ok("x"),
            ),
            (
                "no patterns catch nothing (Go default)",
                copy_then_fail("bad input"),
                json!([]),
                r#"{"a":1}"#,
                Err("transforms[0].settings.transforms[1] (utility_err): bad input"),
            ),
            (
                "a non-matching error propagates",
                copy_then_fail("bad input"),
                json!(["^timeout$"]),
                r#"{"a":1}"#,
                Err("transforms[0].settings.transforms[1] (utility_err): bad input"),
            ),
            (
                "success passes the outputs",
                json!([{"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}}]),
                json!([".*"]),
                r#"{"a":1}"#,
                Ok(r#"{"a":1,"b":1}"#),
            ),
        ];
        for (name, inner, patterns, input, want) in cases {
            let t = testing::build(&r, meta_err(inner, patterns)).unwrap();
            let got = testing::run(t, &[input]).map_err(|e| e.to_string());
            match want {
                Ok(w) => assert_eq!(got, Ok(vec![w.to_string()]), "{name}"),
                Err(w) => assert_eq!(got, Err(w.to_string()), "{name}"),
            }
        }
    }

    #[test]
    fn a_swallowed_processing_error_does_not_fail_the_message() {
        let r = registry();
        let t = testing::build(&r, meta_err(copy_then_fail("bad"), json!([".*"]))).unwrap();
        assert!(!t.is_stateful());
        let p = Pipeline::new(vec![("err", t)]);
        let (m, tracker) = tracked(r#"{"a":1}"#);
        let out = testing::block_on(p.apply(vec![m])).unwrap();
        assert_eq!(datas(&out), vec![r#"{"a":1}"#]);
        assert_eq!(out[0].acks().len(), 1, "the input keeps its token");
        drop(out);
        assert_status(&tracker, AckStatus::Delivered, "passed on, then released");

        // Not caught: the message is failed.
        let t = testing::build(&r, meta_err(copy_then_fail("bad"), json!(["other"]))).unwrap();
        let p = Pipeline::new(vec![("err", t)]);
        let (m, tracker) = tracked(r#"{"a":1}"#);
        assert!(testing::block_on(p.apply(vec![m])).is_err());
        assert_status(&tracker, AckStatus::Failed, "not caught");
    }

    #[test]
    fn a_failed_send_stays_failed_when_its_error_is_swallowed() {
        let r = registry();
        let t = testing::build(
            &r,
            meta_err(
                json!([{"type": "fixture_send", "settings": {"name": "err-send", "fail_flushes": 1}}]),
                json!(["delivery failed"]),
            ),
        )
        .unwrap();
        assert!(t.is_stateful());
        let p = Pipeline::new(vec![("err", t)]);
        let (a, t_a) = tracked("a");
        let (b, t_b) = tracked("b");
        let out = testing::block_on(p.apply(vec![a, b, Message::ctrl()])).unwrap();
        assert_eq!(datas(&out), vec!["a", "b"]);
        assert!(out.last().unwrap().is_ctrl());
        drop(out);
        // The error was swallowed, but the records were not delivered: a source that takes
        // per-record reports redelivers them.
        assert_status(&t_a, AckStatus::Failed, "a");
        assert_status(&t_b, AckStatus::Failed, "b");
        assert_eq!(journal("err-send"), vec!["aborted:a", "aborted:b"]);
        // What the send held was discarded, so a later flush does not send it again.
        let out = testing::block_on(p.apply(vec![Message::ctrl()])).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(journal("err-send"), vec!["aborted:a", "aborted:b"]);
    }

    #[test]
    fn flush_errors_that_do_not_match_propagate() {
        let r = registry();
        let t = testing::build(
            &r,
            meta_err(
                json!([{"type": "fixture_send", "settings": {"id": "s", "name": "err-send-2", "fail_flushes": 1}}]),
                json!(["throttled"]),
            ),
        )
        .unwrap();
        let p = Pipeline::new(vec![("err", t)]);
        let (a, t_a) = tracked("a");
        let err = testing::block_on(p.apply(vec![a, Message::ctrl()])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "transforms[0].settings.transforms[0] (fixture_send, id s): delivery failed"
        );
        assert_status(&t_a, AckStatus::Failed, "a");
        // Not swallowed, so not aborted here: the driver aborts the whole pipeline.
        assert!(journal("err-send-2").is_empty());
        testing::block_on(p.abort("gave up"));
        assert_eq!(journal("err-send-2"), vec!["aborted:a"]);
    }

    #[test]
    fn config_errors_name_the_field() {
        let r = registry();
        let cases = [
            (json!({}), "settings.transforms: missing required option"),
            (
                json!({"transforms": []}),
                "settings.transforms: at least one",
            ),
            (
                json!({"transforms": [{"type": "utility_drop"}], "error_messages": ["ok", "("]}),
                "settings.error_messages[1]: invalid regular expression",
            ),
            (
                json!({"transforms": [{"type": "utility_drop"}], "error_messages": "x"}),
                "settings.error_messages",
            ),
        ];
        for (settings, want) in cases {
            let err = testing::build(&r, json!({"type": "meta_err", "settings": settings}))
                .err()
                .unwrap_or_else(|| panic!("{want} should fail"))
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn compliance() {
        let r = registry();
        for inner in [
            copy_then_fail("x"),
            json!([{"type": "fixture_record", "settings": {"name": "err-compliance"}}]),
        ] {
            testing::check_compliance(testing::build(&r, meta_err(inner, json!([".*"]))).unwrap());
        }
    }
}
