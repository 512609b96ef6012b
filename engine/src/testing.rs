//! Helpers for testing transforms, shared by every transform's table of cases.
//!
//! [`check_compliance`] asserts what every transform must do, in the spirit of Vector's
//! compliance helpers: pass a ctrl message through (once, last), and not panic on data
//! that is not JSON.

// Test helpers: they assert, so they unwrap and panic (the workspace's lints forbid that
// elsewhere outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::context::Context;
use crate::error::{ConfigError, TransformError};
use crate::message::Message;
use crate::pipeline::Pipeline;
use crate::registry::{ConfigJson, Registry};
use crate::transform::Transform;

/// Runs a future to completion on a fresh current-thread runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// Builds one transform from `{type, settings}`.
pub fn build(registry: &Registry, cfg: impl ConfigJson) -> Result<Transform, ConfigError> {
    registry
        .build_transform(&cfg, "transforms[0]")
        .map(|b| b.value)
}

/// Builds one transform from `{type, settings}` in `ctx`: transforms built in one context
/// share their kv stores, as the transforms of one config do.
pub fn build_in(
    registry: &Registry,
    ctx: &Arc<Context>,
    cfg: impl ConfigJson,
) -> Result<Transform, ConfigError> {
    registry
        .build_transform_in(ctx, &cfg, "transforms[0]")
        .map(|b| b.value)
}

/// Builds a pipeline from a list of `{type, settings}`.
pub fn build_pipeline(registry: &Registry, cfg: impl ConfigJson) -> Result<Pipeline, ConfigError> {
    registry.build_pipeline(&cfg, "transforms").map(|b| b.value)
}

/// Runs `inputs` and then one ctrl through a transform (as a one-step pipeline) and returns
/// the data outputs as strings.
pub fn run(t: Transform, inputs: &[&str]) -> Result<Vec<String>, TransformError> {
    let p = Pipeline::new(vec![(Arc::from("under_test"), t)]);
    run_pipeline(&p, inputs)
}

/// Runs `inputs` and then one ctrl through a pipeline and returns the data outputs.
pub fn run_pipeline(p: &Pipeline, inputs: &[&str]) -> Result<Vec<String>, TransformError> {
    let mut msgs: Vec<Message> = inputs
        .iter()
        .map(|s| Message::new(s.as_bytes().to_vec()))
        .collect();
    msgs.push(Message::ctrl());
    // What came out is dropped before the pipeline settles: a lock commits the keys of
    // messages once every copy of them is gone.
    block_on(async {
        let out = p.apply(msgs).await.map(|out| {
            out.iter()
                .filter(|m| !m.is_ctrl())
                .map(|m| String::from_utf8_lossy(m.data()).into_owned())
                .collect()
        });
        p.settle(std::time::Instant::now() + std::time::Duration::from_secs(60))
            .await;
        out
    })
}

/// Asserts the behaviour every transform shares: a ctrl message comes out exactly once and
/// last, and non-JSON or empty data does not panic.
pub fn check_compliance(t: Transform) {
    let p = check_ctrl_compliance(t);
    for data in [&b"not json"[..], b"", b"{}", b"[]", b"\xff\xfe"] {
        let _ = block_on(p.apply(vec![Message::new(data.to_vec()), Message::ctrl()]));
    }
}

/// The part of [`check_compliance`] that needs no data, so no I/O: a lone ctrl comes out
/// exactly once, and a stateless transform holds no batch. Returns the one-step pipeline.
pub fn check_ctrl_compliance(t: Transform) -> Pipeline {
    let stateful = t.is_stateful();
    let deadline = t.deadline();
    let p = Pipeline::new(vec![(Arc::from("under_test"), t)]);
    let out = block_on(p.apply(vec![Message::ctrl()])).expect("a lone ctrl must not fail");
    let ctrls = out.iter().filter(|m| m.is_ctrl()).count();
    assert_eq!(ctrls, 1, "exactly one ctrl must come out");
    assert!(
        out.last().is_some_and(|m| m.is_ctrl()),
        "the ctrl must come out last"
    );
    if !stateful {
        assert!(deadline.is_none(), "stateless transforms hold no batches");
    }
    p
}

/// Builds `type_name` with each case's settings, runs its input and a ctrl, and asserts the
/// one data output: the table runner many transforms' tests share.
pub fn assert_single_outputs<W: AsRef<str>>(
    registry: &Registry,
    type_name: &str,
    cases: &[(&str, crate::json::Value, &str, W)],
) {
    for (name, settings, input, want) in cases {
        let t = build(
            registry,
            crate::json!({"type": type_name, "settings": settings}),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = run(t, &[input]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want: &str = want.as_ref();
        assert_eq!(got, vec![want.to_string()], "{name}");
    }
}

/// Asserts that building `type_name` with each settings fails with an error naming `field`.
pub fn assert_config_errors(
    registry: &Registry,
    type_name: &str,
    cases: &[(crate::json::Value, &str)],
) {
    for (settings, field) in cases {
        let err = build(
            registry,
            crate::json!({"type": type_name, "settings": settings}),
        )
        .err()
        .unwrap_or_else(|| panic!("{settings}: expected a config error"));
        assert!(err.to_string().contains(field), "{err}");
    }
}

/// Builds `type_name` with `settings` and runs [`check_compliance`] on it.
pub fn check_type_compliance(registry: &Registry, type_name: &str, settings: crate::json::Value) {
    let t = build(
        registry,
        crate::json!({"type": type_name, "settings": settings}),
    )
    .unwrap_or_else(|e| panic!("{type_name}: {e}"));
    check_compliance(t);
}
