//! `meta_retry`: runs an inner list again, after a constant delay, when it fails with an
//! error matching `error_messages` or when one of its data outputs does not satisfy
//! `condition`.
//!
//! Each attempt runs on a copy of the input, so a failed attempt's changes never leak into
//! the next. At most `retry.count + 1` attempts are made. When they are all used up, the
//! error is `retry limit reached after N attempts: <the last error>`; an error that matches
//! no pattern fails at once. A ctrl message is retried too: a send whose flush failed keeps
//! only the items that were not delivered, so a retried ctrl sends just those again.
//!
//! Substation compatibility: the same settings, with these deliberate differences:
//! - `retry.count: 0` (the Go default when the setting is absent) means **no retry**;
//!   Substation retries forever, which turns a permanent failure into a stuck pipeline.
//!   Substation's Jsonnet library sets `count: 3, delay: '1s'`, which behaves the same here.
//! - The final error keeps its cause (Substation's says only "retry limit reached").
//! - The delay is a `tokio` timer, so a wait costs no thread.
//! - `error_messages` empty (Go default) retries on no error, only on `condition`; the
//!   library's default `['.*']` retries on every error.
//!
//! Acknowledgements: a data message retried through a *stateless* list keeps its tokens
//! clear of the failed attempts (see [`super::detach`]), so a message that succeeds on a
//! later attempt is reported delivered. Inside a *stateful* list a send that failed to
//! deliver marks the tokens failed for good; a retry that then delivers them still leaves
//! them failed, so a record-level source redelivers them. Under `meta_kv_store_lock`, a
//! retried message's copies are numbered from the start again
//! (`LockTicket::start_over`), so a send meets a copy it delivered (or still holds) on an
//! earlier try as the same copy and does not send it twice, and the redelivery skips what
//! was delivered.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use regex::Regex;

use crate::kv_store::lock::ticket::tickets;
use serde::Deserialize;
use sluice_engine::TransformName;
use sluice_engine::settings::RetrySettings;
use sluice_engine::{
    Build, Condition, ConfigError, Message, Pipeline, TransformError, Value, Wrapper, async_trait,
};

use super::{
    detach, error_patterns, matches_any, optional_condition, push_with_one_ctrl, reattach,
    required_pipeline,
};

/// Settings of `meta_retry`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The inner list (at least one transform).
    pub transforms: Value,
    /// Retry while some data output does not satisfy it (optional).
    pub condition: Option<Value>,
    /// `count` retries after the first attempt, `delay` between attempts.
    pub retry: RetrySettings,
    /// Regular expressions; an error whose text matches any of them is retried.
    pub error_messages: Vec<String>,
}

/// The `meta_retry` transform.
pub(crate) struct MetaRetry {
    name: TransformName,
    inner: Pipeline,
    /// Nothing retries it in turn ([`sluice_engine::StatefulTransform::fails_alone`]): a message whose
    /// attempts ran out fails alone and the others are still tried.
    alone: AtomicBool,
    condition: Option<Arc<dyn Condition>>,
    patterns: Vec<Regex>,
    attempts: u64,
    delay: Duration,
}

impl MetaRetry {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(MetaRetry {
            name: b.name(),
            alone: AtomicBool::new(false),
            inner: required_pipeline(b, "transforms", &s.transforms)?,
            condition: optional_condition(b, "condition", s.condition.as_ref())?,
            patterns: error_patterns(b, &s.error_messages)?,
            attempts: u64::from(s.retry.count) + 1,
            delay: s.retry.delay.0,
        })
    }

    /// Why these outputs call for another attempt, if they do.
    fn unsatisfied(&self, outs: &[Message]) -> Result<Option<TransformError>, TransformError> {
        let Some(c) = &self.condition else {
            return Ok(None);
        };
        for m in outs.iter().filter(|m| !m.is_ctrl()) {
            if !c
                .test(m)
                .map_err(|e| TransformError::external("condition", Box::new(e)))?
            {
                return Ok(Some(TransformError::failed(
                    "an output did not satisfy the condition",
                )));
            }
        }
        Ok(None)
    }

    /// Makes attempts until one succeeds, an error is not retryable, or none are left.
    async fn with_retries<F, Fut>(&self, mut attempt: F) -> Result<Vec<Message>, TransformError>
    where
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = Result<Vec<Message>, TransformError>> + Send,
    {
        let mut made = 0u64;
        loop {
            made += 1;
            let cause = match attempt().await {
                Ok(outs) => match self.unsatisfied(&outs)? {
                    None => return Ok(outs),
                    Some(cause) => cause,
                },
                Err(e) if matches_any(&self.patterns, &e.substation_text()) => e,
                Err(e) => return Err(e),
            };
            if made >= self.attempts {
                let plural = if made == 1 { "" } else { "s" };
                return Err(TransformError::external(
                    format!("retry limit reached after {made} attempt{plural}"),
                    Box::new(cause),
                ));
            }
            tracing::debug!(attempt = made, error = %cause, "meta_retry: retrying");
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
        }
    }
}

#[async_trait]
impl Wrapper for MetaRetry {
    fn wraps(&self) -> &[Pipeline] {
        std::slice::from_ref(&self.inner)
    }

    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            let outs = self
                .with_retries(|| self.inner.apply(vec![msg.clone()]))
                .await?;
            push_with_one_ctrl(outs, msg, out);
            return Ok(());
        }
        if !self.inner.is_stateful() {
            let acks = detach(&mut msg);
            match self
                .with_retries(|| self.inner.apply(vec![msg.clone()]))
                .await
            {
                Ok(mut outs) => {
                    reattach(&mut outs, &acks);
                    out.extend(outs);
                    Ok(())
                }
                Err(e) => {
                    sluice_engine::ack::fail_all(&acks, &e.to_string());
                    Err(e)
                }
            }
        } else {
            // A lock's message runs over the list again: its copies are numbered from the
            // start again, so the sends meet what they delivered, or hold, as the same
            // copies (see `LockTicket::start_over`).
            let mut again = false;
            let outs = self
                .with_retries(|| {
                    if std::mem::replace(&mut again, true) {
                        for t in tickets(msg.acks()) {
                            t.start_over();
                        }
                    }
                    self.inner.apply(vec![msg.clone()])
                })
                .await?;
            out.extend(outs);
            Ok(())
        }
    }

    /// Message by message, as the default does. Where messages fail alone, a message whose
    /// attempts ran out fails alone (what the inner list kept of it is given up) and the
    /// others are still tried; the last such error is returned once all were, for the
    /// pipeline to count. Elsewhere the first error fails the messages after it.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let alone = self.alone.load(Ordering::Relaxed);
        let mut last = None;
        let mut rest = msgs.into_iter();
        while let Some(m) = rest.next() {
            let acks = m.acks().clone();
            if let Err(e) = self.transform(m, out).await {
                let reason = e.text_within(&self.name);
                sluice_engine::ack::fail_all(&acks, &reason);
                if alone && !e.ends_run() {
                    self.inner.give_up(&reason).await;
                    last = Some(e);
                    continue;
                }
                for r in rest {
                    r.fail_acks(&reason);
                }
                return Err(e);
            }
        }
        last.map_or(Ok(()), Err)
    }

    /// Not passed on: the inner list's errors are what it retries.
    fn fails_alone(&self) {
        self.alone.store(true, Ordering::Relaxed);
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let mut first = Some(now);
        let outs = self
            .with_retries(|| self.inner.expire(first.take().unwrap_or_else(Instant::now)))
            .await?;
        out.extend(outs);
        Ok(())
    }
}

impl MetaRetry {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.inner.is_stateful();
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// What registers the `meta_retry` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_retry",
    aliases: &[],
    library: "sub.tf.meta.retry",
    summary: "retries inner transforms on error or unmet condition",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"transforms": [{"type": "string_to_upper"}]}"#,
};

#[cfg(test)]
mod tests {
    use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};
    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Pipeline, Value, json, testing};

    /// Fails `times` times, then passes; `None` fails always.
    fn flaky(name: &str, times: Option<u32>) -> Value {
        json!([{"type": "fixture_fail", "settings": {"id": "flaky", "name": name, "times": times, "message": "throttled"}}])
    }

    fn retry(inner: Value, count: u32, patterns: Value) -> Value {
        json!({"type": "meta_retry", "settings": {
            "transforms": inner, "retry": {"count": count}, "error_messages": patterns}})
    }

    #[test]
    fn cases() {
        let r = registry();
        // (name, inner, count, error_messages, attempts made, result)
        type Case = (
            &'static str,
            u32,
            u32,
            Value,
            usize,
            Result<&'static str, &'static str>,
        );
        let cases: [Case; 6] = [
            ("succeeds first time", 0, 3, json!([".*"]), 1, Ok("x")),
            (
                "succeeds on the last attempt",
                2,
                2,
                json!([".*"]),
                3,
                Ok("x"),
            ),
            (
                "exhausted, keeping the cause",
                2,
                1,
                json!(["throttled"]),
                2,
                Err(
                    "transform under_test: retry limit reached after 2 attempts: transforms[0].settings.transforms[0] (fixture_fail, id flaky): throttled",
                ),
            ),
            (
                "count 0 means no retry",
                1,
                0,
                json!([".*"]),
                1,
                Err(
                    "transform under_test: retry limit reached after 1 attempt: transforms[0].settings.transforms[0] (fixture_fail, id flaky): throttled",
                ),
            ),
            (
                "a non-matching error fails at once",
                1,
                5,
                json!(["timeout"]),
                1,
                Err("transforms[0].settings.transforms[0] (fixture_fail, id flaky): throttled"),
            ),
            (
                "no patterns retry no error (Go default)",
                1,
                5,
                json!([]),
                1,
                Err("transforms[0].settings.transforms[0] (fixture_fail, id flaky): throttled"),
            ),
        ];
        for (i, (name, times, count, patterns, attempts, want)) in cases.into_iter().enumerate() {
            let journal_name = format!("retry-case-{i}");
            let t = testing::build(
                &r,
                retry(flaky(&journal_name, Some(times)), count, patterns),
            )
            .unwrap();
            let got = testing::run(t, &["x"]).map_err(|e| e.to_string());
            match want {
                Ok(w) => assert_eq!(got, Ok(vec![w.to_string()]), "{name}"),
                Err(w) => assert_eq!(got, Err(w.to_string()), "{name}"),
            }
            assert_eq!(journal(&journal_name).len(), attempts, "{name}");
        }
    }

    #[test]
    fn retries_while_an_output_fails_the_condition() {
        let r = registry();
        let settings = |count: u32| {
            json!({"type": "meta_retry", "settings": {
                "transforms": [{"type": "fixture_counter"}],
                "condition": {"type": "fixture_contains", "settings": {"value": "#3"}},
                "retry": {"count": count}}})
        };
        // Each attempt starts from a copy of the input, not from the last attempt's output.
        let t = testing::build(&r, settings(5)).unwrap();
        assert_eq!(testing::run(t, &["x"]).unwrap(), vec!["x#3"]);
        let t = testing::build(&r, settings(1)).unwrap();
        assert_eq!(
            testing::run(t, &["x"]).unwrap_err().to_string(),
            "transform under_test: retry limit reached after 2 attempts: an output did not satisfy the condition"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waits_the_delay_between_attempts() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "meta_retry", "settings": {
                "transforms": flaky("retry-delay", Some(2)), "error_messages": [".*"],
                "retry": {"count": 3, "delay": "10s"}}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![("retry", t)]);
        let start = tokio::time::Instant::now();
        let out = p.apply(vec![Message::new(&b"x"[..])]).await.unwrap();
        assert_eq!(datas(&out), vec!["x"]);
        // Two failures, two waits, and no wait after the successful third attempt.
        assert_eq!(start.elapsed().as_secs(), 20);
    }

    #[test]
    fn a_message_that_succeeds_on_retry_is_delivered() {
        let r = registry();
        let t = testing::build(&r, retry(flaky("retry-acks", Some(1)), 1, json!([".*"]))).unwrap();
        assert!(!t.is_stateful());
        let p = Pipeline::new(vec![("retry", t)]);
        let (m, tracker) = tracked("x");
        let out = testing::block_on(p.apply(vec![m])).unwrap();
        assert_eq!(out[0].acks().len(), 1);
        drop(out);
        assert_status(
            &tracker,
            AckStatus::Delivered,
            "succeeded on the second attempt",
        );

        let t = testing::build(&r, retry(flaky("retry-acks-2", None), 1, json!([".*"]))).unwrap();
        let p = Pipeline::new(vec![("retry", t)]);
        let (m, tracker) = tracked("x");
        assert!(testing::block_on(p.apply(vec![m])).is_err());
        assert_status(&tracker, AckStatus::Failed, "never succeeded");
    }

    #[test]
    fn a_retried_ctrl_sends_only_what_was_not_delivered() {
        let r = registry();
        let t = testing::build(
            &r,
            retry(
                json!([{"type": "fixture_send", "settings": {"name": "retry-send", "fail_flushes": 1}}]),
                2,
                json!(["delivery failed"]),
            ),
        )
        .unwrap();
        assert!(t.is_stateful());
        let p = Pipeline::new(vec![("retry", t)]);
        let (a, t_a) = tracked("a");
        let out =
            testing::block_on(p.apply(vec![a, Message::new(&b"b"[..]), Message::ctrl()])).unwrap();
        assert_eq!(datas(&out), vec!["a", "b"]);
        assert_eq!(out.iter().filter(|m| m.is_ctrl()).count(), 1);
        drop(out);
        assert_eq!(journal("retry-send"), vec!["sent:a", "sent:b"]);
        // Delivered on the second flush, but the first failure stuck: a record-level source
        // redelivers it (a duplicate, never a loss).
        assert_status(&t_a, AckStatus::Failed, "failed once");
    }

    #[test]
    fn deadline_expire_and_abort_reach_the_inner_list() {
        let r = registry();
        let t = testing::build(
            &r,
            retry(
                json!([
                    {"type": "utility_control", "settings": {"batch": {"duration": "1s"}}},
                    {"type": "fixture_send", "settings": {"name": "retry-fwd"}},
                ]),
                1,
                json!([".*"]),
            ),
        )
        .unwrap();
        testing::block_on(async {
            let (m, tracker) = tracked("x");
            let mut out = Vec::new();
            t.transform(m, &mut out).await.unwrap();
            drop(out);
            let d = t.deadline().expect("a window is open");
            let mut out = Vec::new();
            t.expire(d, &mut out).await.unwrap();
            assert!(out.len() == 1 && out[0].is_ctrl());
            assert_eq!(journal("retry-fwd"), vec!["sent:x"]);
            assert_status(&tracker, AckStatus::Delivered, "flushed by the timer");
            let (m, tracker) = tracked("y");
            t.transform(m, &mut Vec::new()).await.unwrap();
            t.abort("gave up").await;
            assert_status(&tracker, AckStatus::Failed, "aborted");
        });
    }

    #[test]
    fn config_errors_name_the_field() {
        let r = registry();
        let inner = json!([{"type": "utility_drop"}]);
        let cases = [
            (json!({}), "settings.transforms: missing required option"),
            (
                json!({"transforms": inner, "retry": {"count": -1}}),
                "settings.retry.count",
            ),
            (
                json!({"transforms": inner, "retry": {"delay": "5 minutes"}}),
                "settings.retry.delay: invalid duration",
            ),
            (
                json!({"transforms": inner, "error_messages": ["["]}),
                "settings.error_messages[0]",
            ),
            (
                json!({"transforms": inner, "condition": {"type": "nope"}}),
                "transforms[0].settings.condition",
            ),
        ];
        for (settings, want) in cases {
            let err = testing::build(&r, json!({"type": "meta_retry", "settings": settings}))
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
            flaky("retry-compliance", None),
            json!([{"type": "fixture_record", "settings": {"name": "retry-compliance-2"}}]),
        ] {
            testing::check_compliance(testing::build(&r, retry(inner, 1, json!([".*"]))).unwrap());
        }
    }
}
