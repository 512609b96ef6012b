//! `meta_switch`: routes each message to the first case whose condition it satisfies.
//!
//! Each case is `{condition?, transforms}`; a case without a condition always matches, and
//! a message no case matches passes through unchanged. A ctrl message goes through
//! **every** case's list in order (each may hold batches to flush); their data outputs come
//! out, followed by one ctrl.
//!
//! Substation compatibility: the same settings and semantics. Differences: the switch is
//! stateless (and so runs on many messages at once) unless some case's list is stateful;
//! consecutive messages routed to the same case cross that case's list together, which
//! keeps their order and lets a stateful inner transform (the lock) overlap its work; a
//! condition that cannot be evaluated is an error naming the case (`cases[1].condition`).

use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::{
    Build, Condition, ConfigError, InPlace, MapTransform, Message, Pipeline, Transform,
    TransformError, Value, Wrapper, async_trait,
};

use super::{optional_condition, push_with_one_ctrl, required_pipeline};

/// Settings of `meta_switch`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The cases, tried in order.
    pub cases: Vec<CaseSettings>,
}

/// One case of `meta_switch`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CaseSettings {
    /// When the case applies; absent means always.
    pub condition: Option<Value>,
    /// What runs on the messages the case takes (at least one transform).
    pub transforms: Value,
}

/// The `meta_switch` transform.
pub(crate) struct MetaSwitch {
    /// Each case's condition (none: always), in order.
    conditions: Vec<Option<Arc<dyn Condition>>>,
    /// Each case's list, in the same order.
    lists: Vec<Pipeline>,
}

impl MetaSwitch {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.cases.is_empty() {
            return Err(b.field_error(
                "cases",
                "missing required option: at least one case {condition, transforms} is required",
            ));
        }
        let mut conditions = Vec::with_capacity(s.cases.len());
        let mut lists = Vec::with_capacity(s.cases.len());
        for (i, c) in s.cases.iter().enumerate() {
            conditions.push(optional_condition(
                b,
                &format!("cases[{i}].condition"),
                c.condition.as_ref(),
            )?);
            lists.push(required_pipeline(
                b,
                &format!("cases[{i}].transforms"),
                &c.transforms,
            )?);
        }
        Ok(MetaSwitch { conditions, lists })
    }

    /// The index of the first case `msg` satisfies, or `None` to pass it through.
    fn select(&self, msg: &Message) -> Result<Option<usize>, TransformError> {
        for (i, condition) in self.conditions.iter().enumerate() {
            let hit = match condition {
                None => true,
                Some(c) => c.test(msg).map_err(|e| {
                    TransformError::external(format!("cases[{i}].condition"), Box::new(e))
                })?,
            };
            if hit {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Runs a run of consecutive data messages bound for the same case.
    async fn route(
        &self,
        case: Option<usize>,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msgs.is_empty() {
            return Ok(());
        }
        match case {
            None => out.extend(msgs),
            Some(i) => out.extend(self.lists[i].apply(msgs).await?),
        }
        Ok(())
    }

    /// Sends the ctrl through every case; their data outputs, then one ctrl, come out.
    async fn flush(&self, ctrl: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let mut flushed = Vec::new();
        for list in &self.lists {
            let outs = list.apply(vec![ctrl.clone()]).await;
            // What earlier cases emitted is handed on even when a later case fails, so the
            // pipeline marks it failed along with everything else it held.
            match outs {
                Ok(outs) => flushed.extend(outs.into_iter().filter(|m| !m.is_ctrl())),
                Err(e) => {
                    out.append(&mut flushed);
                    return Err(e);
                }
            }
        }
        push_with_one_ctrl(flushed, ctrl, out);
        Ok(())
    }
}

impl MetaSwitch {
    /// A map transform when every case's list is made of map transforms, else stateful
    /// only when some case's list is.
    pub(crate) fn into_transform(self) -> Transform {
        let maps: Option<Vec<_>> = self.lists.iter().map(Pipeline::as_map).collect();
        match maps {
            Some(maps) => Transform::map(MapSwitch { switch: self, maps }),
            None => {
                let stateful = self.lists.iter().any(Pipeline::is_stateful);
                Transform::stateful_if(stateful, self)
            }
        }
    }
}

/// A switch whose every case's list is made of map transforms: each case's list run as one
/// map transform ([`Pipeline::as_map`]), so routing needs no async call.
struct MapSwitch {
    switch: MetaSwitch,
    /// Each case's list, as a map transform.
    maps: Vec<Arc<dyn MapTransform>>,
}

impl MapTransform for MapSwitch {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        match self.switch.select(msg)? {
            Some(i) => self.maps[i].map(msg),
            None => Ok(InPlace::Keep),
        }
    }
}

#[async_trait]
impl Wrapper for MetaSwitch {
    fn wraps(&self) -> &[Pipeline] {
        &self.lists
    }

    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            return self.flush(msg, out).await;
        }
        let case = self.select(&msg)?;
        self.route(case, vec![msg], out).await
    }

    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let mut rest = msgs.into_iter();
        let mut run: Vec<Message> = Vec::new();
        let mut run_case: Option<usize> = None;
        let result = loop {
            let Some(m) = rest.next() else {
                break self.route(run_case, std::mem::take(&mut run), out).await;
            };
            if m.is_ctrl() {
                if let Err(e) = self.route(run_case, std::mem::take(&mut run), out).await {
                    m.fail_acks(&e.to_string());
                    break Err(e);
                }
                if let Err(e) = self.flush(m, out).await {
                    break Err(e);
                }
                continue;
            }
            match self.select(&m) {
                Ok(case) => {
                    if case != run_case
                        && !run.is_empty()
                        && let Err(e) = self.route(run_case, std::mem::take(&mut run), out).await
                    {
                        m.fail_acks(&e.to_string());
                        break Err(e);
                    }
                    run_case = case;
                    run.push(m);
                }
                Err(e) => {
                    m.fail_acks(&e.to_string());
                    break Err(e);
                }
            }
        };
        if let Err(e) = &result {
            // Messages not yet handed to a case were abandoned with the batch.
            let reason = e.to_string();
            for m in run.iter().chain(rest.as_slice()) {
                m.fail_acks(&reason);
            }
        }
        result
    }
}

/// What registers the `meta_switch` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "meta_switch",
    aliases: &[],
    library: "sub.tf.meta.switch",
    summary: "routes each message to the first matching case",
    reach: sluice_engine::Reach::Memory,
    example: r#"{"cases": [{"transforms": [{"type": "string_to_upper"}]}]}"#,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::meta::test_support::{assert_status, datas, journal, registry, tracked};
    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Transform, json, testing};

    fn contains(v: &str) -> sluice_engine::Value {
        json!({"type": "fixture_contains", "settings": {"value": v}})
    }

    fn suffix(s: &str) -> sluice_engine::Value {
        json!({"type": "fixture_suffix", "settings": {"suffix": s}})
    }

    #[test]
    fn cases() {
        let r = registry();
        let cases = [
            (
                "routes by condition",
                json!([
                    {"condition": contains("a"), "transforms": [suffix("-A")]},
                    {"condition": contains("b"), "transforms": [suffix("-B")]},
                ]),
                vec!["a1", "b1", "c1"],
                vec!["a1-A", "b1-B", "c1"],
            ),
            (
                "first match wins",
                json!([
                    {"condition": contains("a"), "transforms": [suffix("-A")]},
                    {"condition": contains("b"), "transforms": [suffix("-B")]},
                ]),
                vec!["ab"],
                vec!["ab-A"],
            ),
            (
                "a case without condition always matches",
                json!([
                    {"condition": contains("a"), "transforms": [suffix("-A")]},
                    {"transforms": [suffix("-D")]},
                    {"transforms": [suffix("-never")]},
                ]),
                vec!["a", "x"],
                vec!["a-A", "x-D"],
            ),
            (
                "an empty condition object means none",
                json!([{"condition": {}, "transforms": [suffix("-D")]}]),
                vec!["x"],
                vec!["x-D"],
            ),
            (
                "inner lists of several real transforms",
                json!([{
                    "condition": contains("\"a\""),
                    "transforms": [
                        {"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}},
                        {"type": "object_copy", "settings": {"object": {"source_key": "b", "target_key": "c"}}},
                    ],
                }]),
                vec![r#"{"a":1}"#, r#"{"z":1}"#],
                vec![r#"{"a":1,"b":1,"c":1}"#, r#"{"z":1}"#],
            ),
            (
                "a case may drop",
                json!([
                    {"condition": contains("drop"), "transforms": [{"type": "utility_drop"}]},
                ]),
                vec!["keep", "drop me", "keep too"],
                vec!["keep", "keep too"],
            ),
        ];
        for (name, cases, input, want) in cases {
            let t = testing::build(
                &r,
                json!({"type": "meta_switch", "settings": {"cases": cases}}),
            )
            .unwrap();
            assert!(!t.is_stateful(), "{name}");
            assert_eq!(testing::run(t, &input).unwrap(), want, "{name}");
        }
    }

    /// Cases of map transforms make the switch one; a case with another kind does not.
    #[test]
    fn a_switch_of_map_transforms_is_one() {
        let r = registry();
        let copy = json!({"type": "object_copy", "settings": {"object": {"source_key": "a", "target_key": "b"}}});
        let build = |cases| {
            testing::build(
                &r,
                json!({"type": "meta_switch", "settings": {"cases": cases}}),
            )
            .unwrap()
        };
        let t = build(json!([{"condition": contains("a"), "transforms": [copy.clone()]}]));
        assert!(matches!(t, Transform::Map(..)), "{t:?}");
        let want = vec![r#"{"a":1,"b":1}"#.to_string(), r#"{"z":1}"#.to_string()];
        assert_eq!(
            testing::run(t, &[r#"{"a":1}"#, r#"{"z":1}"#]).unwrap(),
            want
        );
        let t = build(json!([{"transforms": [copy, suffix("-x")]}]));
        assert!(matches!(t, Transform::Stateless(_)), "{t:?}");
    }

    #[test]
    fn ctrl_goes_through_every_case_and_one_comes_out() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "meta_switch", "settings": {"cases": [
                {"condition": contains("a"), "transforms": [
                    {"type": "fixture_record", "settings": {"name": "sw-ctrl-1", "emit_on_ctrl": "flushed-1"}},
                ]},
                {"transforms": [suffix("-2"),
                    {"type": "fixture_record", "settings": {"name": "sw-ctrl-2", "emit_on_ctrl": "flushed-2"}},
                ]},
            ]}}),
        )
        .unwrap();
        assert!(t.is_stateful());
        let p = sluice_engine::Pipeline::new(vec![("sw", t)]);
        let out = testing::block_on(p.apply(vec![
            Message::new(&b"a"[..]),
            Message::new(&b"b"[..]),
            Message::ctrl(),
        ]))
        .unwrap();
        assert_eq!(datas(&out), vec!["a", "b-2", "flushed-1", "flushed-2"]);
        assert_eq!(out.iter().filter(|m| m.is_ctrl()).count(), 1);
        assert!(out.last().unwrap().is_ctrl());
        assert_eq!(journal("sw-ctrl-1"), vec!["a", "<ctrl>"]);
        assert_eq!(journal("sw-ctrl-2"), vec!["b-2", "<ctrl>"]);
    }

    #[test]
    fn order_is_kept_when_stateful_cases_interleave() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "meta_switch", "settings": {"cases": [
                {"condition": contains("even"), "transforms": [
                    {"type": "fixture_record", "settings": {"name": "sw-order-even"}}, suffix("!")]},
                {"condition": contains("odd"), "transforms": [
                    {"type": "fixture_record", "settings": {"name": "sw-order-odd"}}]},
            ]}}),
        )
        .unwrap();
        let input: Vec<String> = (0..50)
            .map(|i| format!("{i}-{}", if i % 3 == 0 { "even" } else { "odd" }))
            .collect();
        let refs: Vec<&str> = input.iter().map(String::as_str).collect();
        let out = testing::run(t, &refs).unwrap();
        let want: Vec<String> = input
            .iter()
            .map(|s| {
                if s.contains("even") {
                    format!("{s}!")
                } else {
                    s.clone()
                }
            })
            .collect();
        assert_eq!(out, want);
        assert_eq!(journal("sw-order-even").last().unwrap(), "<ctrl>");
        assert_eq!(journal("sw-order-odd").len(), 50 - 17 + 1);
    }

    #[test]
    fn errors_name_the_inner_transform_and_fail_what_was_abandoned() {
        let r = registry();
        for stateful in [false, true] {
            let t = testing::build(
                &r,
                json!({"type": "meta_switch", "settings": {"cases": [
                    {"condition": contains("bad"), "transforms": [
                        {"type": "fixture_fail", "settings": {"id": "the_failing_one", "message": "boom", "stateful": stateful}}]},
                ]}}),
            )
            .unwrap();
            let p = sluice_engine::Pipeline::new(vec![("sw", t)]);
            let (good, t_good) = tracked("good");
            let (bad, t_bad) = tracked("bad");
            let (later, t_later) = tracked("later");
            let err = testing::block_on(p.apply(vec![good, bad, later])).unwrap_err();
            assert_eq!(
                err.to_string(),
                "transforms[0].settings.cases[0].transforms[0] (fixture_fail, id the_failing_one): boom",
                "stateful={stateful}"
            );
            assert_status(&t_bad, AckStatus::Failed, "the failed message");
            assert_status(&t_later, AckStatus::Failed, "the message after it");
            assert_status(&t_good, AckStatus::Failed, "a message still held");
        }
    }

    #[test]
    fn condition_errors_name_the_case() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "meta_switch", "settings": {"cases": [
                {"condition": contains("x"), "transforms": [suffix("1")]},
                {"condition": {"type": "fixture_contains", "settings": {"error": true}}, "transforms": [suffix("2")]},
            ]}}),
        )
        .unwrap();
        let err = testing::run(t, &["a"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "transform under_test: cases[1].condition: condition: cannot evaluate"
        );
    }

    #[test]
    fn config_errors_name_the_field() {
        let r = registry();
        let cases = [
            (json!({}), "settings.cases: missing required option"),
            (
                json!({"cases": []}),
                "settings.cases: missing required option",
            ),
            (
                json!({"cases": [{"transforms": [suffix("x")]}, {"condition": contains("a")}]}),
                "settings.cases[1].transforms: missing required option",
            ),
            (
                json!({"cases": [{"transforms": []}]}),
                "settings.cases[0].transforms: at least one transform",
            ),
            (
                json!({"cases": [{"condition": {"type": "no_such_condition"}, "transforms": [suffix("x")]}]}),
                "transforms[0].settings.cases[0].condition",
            ),
            (
                json!({"cases": [{"transforms": [{"type": "object_cpy"}]}]}),
                "transforms[0].settings.cases[0].transforms[0]",
            ),
            (json!({"cases": {}}), "settings.cases"),
        ];
        for (settings, want) in cases {
            let err = testing::build(&r, json!({"type": "meta_switch", "settings": settings}))
                .err()
                .unwrap_or_else(|| panic!("{want} should fail"))
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn deadline_expire_and_abort_reach_the_cases() {
        let r = registry();
        let t = testing::build(
            &r,
            json!({"type": "meta_switch", "settings": {"cases": [
                {"condition": contains("send"), "transforms": [
                    {"type": "fixture_send", "settings": {"name": "sw-abort"}}]},
                {"transforms": [
                    {"type": "utility_control", "settings": {"batch": {"duration": "1s"}}},
                    {"type": "fixture_record", "settings": {"name": "sw-expire"}}]},
            ]}}),
        )
        .unwrap();
        testing::block_on(async {
            assert_eq!(t.deadline(), None);
            let (m, tracker) = tracked("send me");
            let mut out = Vec::new();
            t.transform_batch(vec![m, Message::new(&b"x"[..])], &mut out)
                .await
                .unwrap();
            drop(out);
            let d = t.deadline().expect("the control window has a deadline");
            let mut out = Vec::new();
            t.expire(d - Duration::from_millis(1), &mut out)
                .await
                .unwrap();
            assert!(out.is_empty());
            t.expire(d, &mut out).await.unwrap();
            assert_eq!(out.len(), 1);
            assert!(out[0].is_ctrl());
            assert_eq!(journal("sw-expire"), vec!["x", "<ctrl>"]);
            assert_eq!(t.deadline(), None);
            assert_status(&tracker, AckStatus::Pending, "held by the send");
            t.abort("gave up").await;
            assert_status(&tracker, AckStatus::Failed, "aborted");
            assert_eq!(journal("sw-abort"), vec!["aborted:send me"]);
        });
    }

    #[test]
    fn compliance() {
        let r = registry();
        for inner in [
            suffix("x"),
            json!({"type": "fixture_record", "settings": {"name": "sw-compliance"}}),
        ] {
            let t = testing::build(
                &r,
                json!({"type": "meta_switch", "settings": {"cases": [
                    {"condition": contains("a"), "transforms": [inner.clone()]},
                    {"transforms": [inner]},
                ]}}),
            )
            .unwrap();
            testing::check_compliance(t);
        }
    }
}
