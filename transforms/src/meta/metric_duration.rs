//! `meta_metric_duration`: runs an inner transform list and measures how long it takes. The
//! time spent in the inner list (in nanoseconds) adds up over the data messages and the
//! flushes; on each ctrl message, after the ctrl has gone through the inner list, the sum is
//! written as the metric and starts again from zero.
//!
//! Substation compatibility: the same settings (`transforms`, `metric`) and the same
//! metric: nanoseconds, with no unit. Differences:
//!
//! - The ctrl's trip through the inner list is measured too, and the metric is written
//!   after it: a send's work happens when it flushes, which Substation's metric (written
//!   before the ctrl goes in, and never counting it) leaves out.
//! - The sum starts again from zero at each ctrl (Substation's never resets, so it only
//!   reads as "time per invocation" because Substation rebuilds its transforms for every
//!   Lambda invocation; sluice builds them once).
//! - The sum is kept in an atomic counter (Substation's is an unsynchronised add), and a
//!   failed write puts it back for the next ctrl.
//! - `transforms` must hold at least one transform, like the other meta transforms.
//! - It is stateful (it must see ctrl messages), so it runs its inner list on the messages
//!   in order, one run of consecutive data messages at a time: wrapping stateless
//!   transforms takes them out of the pipeline's parallel stage.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Deserialize;
use sluice_engine::{
    Build, ConfigError, Message, Pipeline, TransformError, Value, Wrapper, async_trait,
};

use super::{push_with_one_ctrl, required_pipeline};
use crate::metrics::{Metric, MetricSettings};

/// Settings of `meta_metric_duration`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The inner list (at least one transform).
    pub transforms: Value,
    /// The metric: `name`, `attributes`, `destination`.
    pub metric: MetricSettings,
}

/// The `meta_metric_duration` transform.
pub(crate) struct MetaMetricDuration {
    inner: Pipeline,
    metric: Metric,
    nanos: AtomicU64,
}

impl MetaMetricDuration {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let inner = required_pipeline(b, "transforms", &s.transforms)?;
        Ok(MetaMetricDuration {
            inner,
            metric: Metric::build(b, s.metric, &[])?,
            nanos: AtomicU64::new(0),
        })
    }

    fn add(&self, since: Instant) {
        let n = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(n, Ordering::AcqRel);
    }

    async fn timed(&self, msgs: Vec<Message>) -> Result<Vec<Message>, TransformError> {
        let start = Instant::now();
        let r = self.inner.apply(msgs).await;
        self.add(start);
        r
    }

    async fn ctrl(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let outs = self.timed(vec![msg.clone()]).await?;
        let n = self.nanos.swap(0, Ordering::AcqRel);
        if let Err(e) = self.metric.emit(n, None, None) {
            self.nanos.fetch_add(n, Ordering::AcqRel);
            return Err(e);
        }
        push_with_one_ctrl(outs, msg, out);
        Ok(())
    }
}

/// Marks every message of `rest` failed (they were not processed because of `e`).
fn fail_rest(rest: impl Iterator<Item = Message>, e: &TransformError) {
    let reason = e.to_string();
    for m in rest {
        m.fail_acks(&reason);
    }
}

#[async_trait]
impl Wrapper for MetaMetricDuration {
    fn wraps(&self) -> &[Pipeline] {
        std::slice::from_ref(&self.inner)
    }

    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            return self.ctrl(msg, out).await;
        }
        out.extend(self.timed(vec![msg]).await?);
        Ok(())
    }

    /// Runs each run of consecutive data messages through the inner list in one call, as
    /// the pipeline would, and each ctrl on its own.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut rest = msgs.into_iter().peekable();
        loop {
            let mut run = Vec::new();
            while let Some(m) = rest.next_if(|m| !m.is_ctrl()) {
                run.push(m);
            }
            if !run.is_empty() {
                match self.timed(run).await {
                    Ok(o) => out.extend(o),
                    Err(e) => {
                        fail_rest(rest, &e);
                        return Err(e);
                    }
                }
            }
            match rest.next() {
                Some(ctrl) => {
                    if let Err(e) = self.ctrl(ctrl, out).await {
                        fail_rest(rest, &e);
                        return Err(e);
                    }
                }
                None => return Ok(()),
            }
        }
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let start = Instant::now();
        let r = self.inner.expire(now).await;
        self.add(start);
        out.extend(r?);
        Ok(())
    }
}

/// What registers the `meta_metric_duration` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_metric_duration",
    aliases: &[],
    library: "sub.tf.meta.metric.duration",
    summary: "times inner transforms; writes the nanoseconds as a metric on ctrl",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"metric": {"name": "D", "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": "compliance"}}}, "transforms": [{"type": "utility_drop"}]}"#,
};

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};
    use crate::metrics::aws_cloudwatch_embedded_metrics::test_capture;
    use crate::metrics::test_support::lines;
    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Pipeline, Value, json, testing};

    const TYPE: &str = "meta_metric_duration";

    fn cfg(ns: &str, inner: Value) -> Value {
        json!({"type": TYPE, "settings": {
            "transforms": inner,
            "metric": {
                "name": "Duration",
                "attributes": {"Stage": "enrich"},
                "destination": {"type": "aws_cloudwatch_embedded_metrics", "settings": {"namespace": ns}},
            },
        }})
    }

    fn msgs(input: &[&str]) -> Vec<Message> {
        input
            .iter()
            .map(|s| match *s {
                "<ctrl>" => Message::ctrl(),
                s => Message::new(s.as_bytes().to_vec()),
            })
            .collect()
    }

    fn values(ns: &str) -> Vec<u64> {
        lines(&test_capture(ns))
            .iter()
            .map(|l| l["Duration"].as_u64().expect("nanoseconds as an integer"))
            .collect()
    }

    #[test]
    fn cases() {
        let r = registry();
        let delay = json!([{"type": "utility_delay", "settings": {"duration": "20ms"}}]);
        let copy = json!([{"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}}]);
        // (name, inner list, input, outputs, the lowest and highest value per ctrl in ms)
        type Case = (
            &'static str,
            Value,
            Vec<&'static str>,
            Vec<&'static str>,
            Vec<(u64, u64)>,
        );
        let cases: Vec<Case> = vec![
            (
                "the inner list's time adds up over the messages",
                delay.clone(),
                vec!["a", "b", "<ctrl>"],
                vec!["a", "b"],
                vec![(40, 2000)],
            ),
            (
                "a ctrl starts again from zero",
                delay.clone(),
                vec!["a", "<ctrl>", "<ctrl>"],
                vec!["a"],
                vec![(20, 1000), (0, 15)],
            ),
            (
                "outputs are the inner list's",
                copy,
                vec![r#"{"a":1}"#, "<ctrl>"],
                vec![r#"{"a":1,"b":1}"#],
                vec![(0, 1000)],
            ),
            (
                "a dropped message is timed too",
                json!([{"type": "utility_delay", "settings": {"duration": "20ms"}}, {"type": "utility_drop"}]),
                vec!["a", "<ctrl>"],
                vec![],
                vec![(20, 1000)],
            ),
        ];
        for (i, (name, inner, input, want, bounds)) in cases.into_iter().enumerate() {
            let ns = format!("duration-cases-{i}");
            let t = testing::build(&r, cfg(&ns, inner)).unwrap();
            let p = Pipeline::new(vec![(Arc::from("m"), t)]);
            let out = testing::block_on(p.apply(msgs(&input))).unwrap();
            assert_eq!(datas(&out), want, "{name}");
            assert!(
                out.last().unwrap().is_ctrl(),
                "{name}: the ctrl comes out last"
            );
            let got = values(&ns);
            assert_eq!(got.len(), bounds.len(), "{name}: one value per ctrl");
            for (v, (lo, hi)) in got.iter().zip(bounds) {
                let ms = v / 1_000_000;
                assert!(lo <= ms && ms < hi, "{name}: {ms} ms not in {lo}..{hi}");
            }
            for l in lines(&test_capture(&ns)) {
                assert_eq!(l["Stage"], "enrich", "{name}");
                assert!(
                    l["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]
                        .get("Unit")
                        .is_none(),
                    "{name}: nanoseconds have no CloudWatch unit"
                );
            }
        }
    }

    #[test]
    fn the_flush_is_measured_and_its_outputs_pass() {
        // An inner send whose first flush fails and is retried 30 ms later: the time is
        // spent on the ctrl's trip, which Substation's metric leaves out.
        let r = registry();
        let inner = json!([{"type": "meta_retry", "settings": {
            "transforms": [{"type": "fixture_send", "settings": {"name": "duration-send", "fail_flushes": 1}}],
            "retry": {"count": 1, "delay": "30ms"},
            "error_messages": ["delivery failed"],
        }}]);
        let t = testing::build(&r, cfg("duration-flush", inner)).unwrap();
        let p = Pipeline::new(vec![(Arc::from("m"), t)]);
        let out = testing::block_on(p.apply(msgs(&["a", "<ctrl>"]))).unwrap();
        assert_eq!(datas(&out), vec!["a"]);
        assert_eq!(out.iter().filter(|m| m.is_ctrl()).count(), 1);
        assert_eq!(journal("duration-send"), vec!["sent:a"]);
        let got = values("duration-flush");
        assert_eq!(got.len(), 1);
        assert!(
            got[0] >= 30_000_000,
            "{} ns include the retried flush",
            got[0]
        );
    }

    #[test]
    fn errors_propagate_and_fail_what_was_not_processed() {
        let r = registry();
        let inner = json!([{"type": "utility_err", "settings": {"message": "boom"}}]);
        let t = testing::build(&r, cfg("duration-errors", inner)).unwrap();
        let p = Pipeline::new(vec![(Arc::from("m"), t)]);
        let (a, ta) = tracked("a");
        let (b, tb) = tracked("b");
        let err = testing::block_on(p.apply(vec![a, Message::ctrl(), b, Message::ctrl()]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "transforms[0].settings.transforms[0] (utility_err): boom"
        );
        assert_status(&ta, AckStatus::Failed, "a failed");
        assert_status(&tb, AckStatus::Failed, "b was never processed");
        assert!(values("duration-errors").is_empty(), "no ctrl got through");
    }

    #[test]
    fn timed_flushes_are_forwarded() {
        let r = registry();
        let inner = json!([{"type": "utility_control", "settings": {"batch": {"duration": "1s"}}}]);
        let t = testing::build(&r, cfg("duration-timer", inner)).unwrap();
        testing::block_on(async {
            assert_eq!(t.deadline(), None);
            t.transform(Message::new(&b"a"[..]), &mut Vec::new())
                .await
                .unwrap();
            let d = t.deadline().expect("the inner window is open");
            let mut out = Vec::new();
            t.expire(d + Duration::from_millis(1), &mut out)
                .await
                .unwrap();
            assert!(
                out.len() == 1 && out[0].is_ctrl(),
                "the inner ctrl comes out"
            );
        });
    }

    #[test]
    fn config_errors_name_the_field() {
        let dest = json!({"type": "aws_cloudwatch_embedded_metrics"});
        let drop = json!([{"type": "utility_drop"}]);
        testing::assert_config_errors(
            &registry(),
            TYPE,
            &[
                (
                    json!({"metric": {"name": "D", "destination": dest}}),
                    "settings.transforms: missing required option",
                ),
                (
                    json!({"transforms": [], "metric": {"name": "D", "destination": dest}}),
                    "settings.transforms: at least one",
                ),
                (
                    json!({"transforms": [{"type": "utility_dorp"}], "metric": {"name": "D", "destination": dest}}),
                    "settings.transforms[0] (utility_dorp): unknown transform type",
                ),
                (
                    json!({"transforms": drop}),
                    "settings.metric.name: missing required option",
                ),
                (
                    json!({"transforms": drop, "metric": {"name": "D"}}),
                    "settings.metric.destination: missing required option",
                ),
            ],
        );
    }

    #[test]
    fn compliance() {
        let r = registry();
        for inner in [
            json!([{"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}}]),
            json!([{"type": "fixture_record", "settings": {"name": "duration-compliance"}}]),
        ] {
            testing::check_compliance(
                testing::build(&r, cfg("duration-compliance", inner)).unwrap(),
            );
        }
    }
}
