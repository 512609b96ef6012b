//! The `meta` family: transforms that wrap inner transform lists and add one behaviour each
//! (routing, iteration, error swallowing, retries, timing), in the manner of tower's middleware.
//!
//! Every meta transform is stateful exactly when one of its inner lists is, so a wrapper
//! around stateless transforms still runs in parallel. Each is a [`sluice_engine::Wrapper`]:
//! it names its inner lists, and the pipeline's timer (`deadline`/`expire`), `abort`,
//! `settle` and the rest pass on to them unless it overrides them, so batches held inside a
//! wrapper age out and are discarded like batches held anywhere else.

pub(crate) mod err;
pub(crate) mod for_each;
pub(crate) mod kv_store_lock;
pub(crate) mod metric_duration;
pub(crate) mod retry;
pub(crate) mod switch;

#[cfg(test)]
pub(crate) mod test_support;

use std::sync::Arc;

use regex::Regex;
use sluice_engine::ack::AckSet;
use sluice_engine::{Build, Condition, ConfigError, Message, Pipeline, Registry, Value};

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.transform(&err::INFO, |b| {
        err::MetaErr::build(b).map(err::MetaErr::into_transform)
    });
    r.transform(&for_each::INFO, |b| {
        for_each::MetaForEach::build(b).map(for_each::MetaForEach::into_transform)
    });
    r.stateful(&kv_store_lock::INFO, kv_store_lock::MetaKvStoreLock::build);
    r.stateful(
        &metric_duration::INFO,
        metric_duration::MetaMetricDuration::build,
    );
    r.transform(&retry::INFO, |b| {
        retry::MetaRetry::build(b).map(retry::MetaRetry::into_transform)
    });
    r.transform(&switch::INFO, |b| {
        switch::MetaSwitch::build(b).map(switch::MetaSwitch::into_transform)
    });
}

/// Builds the inner list found in `field`, which must hold at least one transform.
pub(crate) fn required_pipeline(
    b: &Build<'_>,
    field: &str,
    list: &Value,
) -> Result<Pipeline, ConfigError> {
    if list.is_null() {
        return Err(b.field_error(
            field,
            "missing required option: a list of at least one transform",
        ));
    }
    let p = b.pipeline(field, list)?;
    if p.is_empty() {
        return Err(b.field_error(field, "at least one transform is required"));
    }
    Ok(p)
}

/// Builds an optional condition; absent, null and `{}` all mean "no condition".
pub(crate) fn optional_condition(
    b: &Build<'_>,
    field: &str,
    cfg: Option<&Value>,
) -> Result<Option<Arc<dyn Condition>>, ConfigError> {
    match cfg {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) if m.is_empty() => Ok(None),
        Some(c) => b.condition(field, c).map(Some),
    }
}

/// Compiles `error_messages`, naming the index of a bad pattern.
pub(crate) fn error_patterns(
    b: &Build<'_>,
    patterns: &[String],
) -> Result<Vec<Regex>, ConfigError> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| b.regex(&format!("error_messages[{i}]"), p))
        .collect()
}

/// Whether an error's text (with its `transform <id>:` chain) matches any pattern.
pub(crate) fn matches_any(patterns: &[Regex], text: &str) -> bool {
    patterns.iter().any(|p| p.is_match(text))
}

/// Takes a data message's acknowledgement tokens off it, before it is run through a
/// *stateless* inner list that may fail and be retried or swallowed.
///
/// A pipeline marks the tokens of every message it abandons on error as failed, and a
/// failure cannot be undone. When the wrapper keeps the message going anyway (`meta_err`
/// passes the input on, `meta_retry` tries again), that mark would be wrong: the message
/// was not lost, it is still on its way. A stateless list cannot deliver or hold anything,
/// and every message it emits is derived from its input, so running it on a token-less copy
/// and putting the tokens back on what comes out ([`reattach`]) tracks exactly what running
/// it with the tokens would, minus the false failure. Stateful lists (sends, the lock) keep
/// their tokens, since they resolve them.
pub(crate) fn detach(msg: &mut Message) -> AckSet {
    msg.take_acks_where(|_| true)
}

/// Puts tokens taken by [`detach`] back on every output.
pub(crate) fn reattach(outs: &mut [Message], acks: &AckSet) {
    if acks.is_empty() {
        return;
    }
    for m in outs.iter_mut().filter(|m| !m.is_ctrl()) {
        m.extend_acks(acks);
    }
}

/// Pushes the data messages of an inner list's ctrl run, then exactly one ctrl (`ctrl`).
pub(crate) fn push_with_one_ctrl(outs: Vec<Message>, ctrl: Message, out: &mut Vec<Message>) {
    out.extend(outs.into_iter().filter(|m| !m.is_ctrl()));
    out.push(ctrl);
}
