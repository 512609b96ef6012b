//! What the playground does with a config: run it over input lines with a step view, run
//! its `tests:`, format it, and find the sample input of an example.
//!
//! Everything here is synchronous and runs in a worker process of the server
//! ([`super::worker`], which the server kills at the time limit). Each run or test gets an engine [`Context`] of its own
//! whose output sink ([`Context::with_stdout`]) is a buffer of the run's, and whose state
//! files (kv stores, locks) live in a temporary directory that goes away with the run, so
//! runs never share a store and nothing lands on the server's standard output.
//!
//! A config is compiled from its text as `config.jsonnet` ([`sluice_config::load_text`]
//! without a fetcher): it can import the sluice library and nothing else, and its ext-strs
//! are the ones `sluice play` was started with. What it may reach beyond its messages
//! (environment, files, network) is checked first ([`super::trust`]).
//!
//! **The step view is instrumentation, not a replay.** The transforms of `transforms` are
//! built one by one in one context (as [`sluice_engine::Registry::build_pipeline_in`] builds
//! them: same locations, same shared stores) and each is made a pipeline of its own; the
//! input batch (the data lines, then one ctrl) goes through them in order, the output of
//! transform `i` being the input of transform `i + 1`, and what comes out of each is
//! recorded. The engine's pipeline runs a batch stage by stage in the same way (a stateless
//! segment crosses each message depth-first, which gives the same messages), so the last
//! step's output is the run's output, and each transform (each send) runs exactly once per
//! message: a step view never sends twice.
//!
//! Each step carries what it changed against the step before (the input, for the first):
//! keys added, changed and removed, messages dropped or added ([`super::diff`]). When a
//! transform fails at run time, the report keeps the steps before it and names it
//! ([`Failed`]): the step view stops at the failing transform instead of vanishing.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::Value;
use sluice_engine::{Context, Message, Pipeline, Registry};

use super::diff::{self, Record, StepChanges};
use super::trust::{self, Trust};
use crate::commands::test::{Failure, judge};

/// The name a config's text is compiled under: what Jsonnet errors and build errors show.
pub(super) const CONFIG_NAME: &str = "config.jsonnet";

/// A message as the page shows it: its data and metadata as text (invalid UTF-8 replaced).
#[derive(Debug, Serialize)]
pub(super) struct Shown {
    pub data: String,
    pub metadata: String,
}

impl Shown {
    fn of(r: &Record) -> Shown {
        Shown {
            data: String::from_utf8_lossy(&r.data).into_owned(),
            metadata: String::from_utf8_lossy(&r.metadata).into_owned(),
        }
    }

    fn all(records: &[Record]) -> Vec<Shown> {
        records.iter().map(Shown::of).collect()
    }
}

/// The data messages of `msgs` (ctrl messages are the engine's, not the user's), as bytes.
fn records(msgs: &[Message]) -> Vec<Record> {
    msgs.iter()
        .filter(|m| !m.is_ctrl())
        .map(|m| Record {
            data: m.data().to_vec(),
            metadata: m.metadata().to_vec(),
        })
        .collect()
}

/// A transform of `transforms` as written: `transforms[3] (object_copy)`.
fn written(index: usize, type_name: &str) -> String {
    format!("transforms[{index}] ({type_name})")
}

/// The messages after one transform.
#[derive(Debug, Serialize)]
pub(super) struct Step {
    /// Its index in `transforms`.
    pub index: usize,
    /// Its `type`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Its `id` setting, when it has one.
    pub id: Option<String>,
    /// The data messages that came out of it.
    pub messages: Vec<Shown>,
    /// What it changed against the step before (the input, for the first).
    pub changes: StepChanges,
}

/// The transform that failed at run time.
#[derive(Debug, Serialize)]
pub(super) struct Failed {
    /// Its index in `transforms` (the steps before it are in the report).
    pub index: usize,
    /// Its `type`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Its `id` setting, when it has one.
    pub id: Option<String>,
    /// Where it is, as written: `transforms[3] (object_copy)`.
    pub at: String,
    /// What went wrong in it.
    pub message: String,
}

/// What a run produced.
#[derive(Debug, Serialize)]
pub(super) struct RunReport {
    /// What the pipeline's sends wrote to standard output (`send_stdout`).
    pub stdout: String,
    /// The data messages that came out of the last transform (none when one failed).
    pub output: Vec<Shown>,
    /// The messages after each transform; when one failed, after each one before it.
    pub steps: Vec<Step>,
    /// Build warnings (unknown settings), `location: message`.
    pub warnings: Vec<String>,
    /// The transform that failed at run time, if one did.
    pub failed: Option<Failed>,
    /// When one failed, the error as the API reports errors:
    /// `running config.jsonnet: transforms[3] (object_copy): ...`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Compiles `text`, checks its shape, and checks that it needs nothing `trust` withholds
/// ([`super::trust`]); errors carry the place (`config.jsonnet:3:5: ...`).
fn load(
    text: &str,
    ext: &[(String, String)],
    trust: Trust,
) -> anyhow::Result<sluice_config::LoadedConfig> {
    let cfg = sluice_config::load_text(CONFIG_NAME, text, ext, None)?;
    trust::check(&cfg.json, trust).with_context(|| CONFIG_NAME.to_string())?;
    Ok(cfg)
}

/// A context for one run or test: state files in `state`, `send_stdout` into `sink`.
fn context(state: &Path, sink: Arc<Mutex<Vec<u8>>>) -> Arc<Context> {
    Arc::new(Context::default().with_state_dir(state).with_stdout(sink))
}

fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime for the run")
}

/// A run went past its time limit.
#[derive(Debug, thiserror::Error)]
#[error("the run took longer than {} s and was stopped (sluice play's time limit)", .0.as_secs_f64())]
pub(super) struct TooSlow(pub Duration);

/// Runs the config `text` over `input` (one message per line; an empty last line is not a
/// message) followed by one ctrl, recording the messages after each transform and what
/// each changed (see the module documentation). A transform that fails at run time ends the
/// run with a report that names it ([`RunReport::failed`]) and holds the steps before it; a
/// config that does not compile or build, and a run past `limit`, are errors. `limit`
/// bounds the pipeline's run (compiling is bounded by the caller).
pub(super) fn run(
    registry: &Registry,
    text: &str,
    input: &str,
    ext: &[(String, String)],
    trust: Trust,
    limit: Duration,
) -> anyhow::Result<RunReport> {
    let cfg = load(text, ext, trust)?;
    let items = match cfg.transforms() {
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    };
    let state = tempfile::tempdir().context("creating the run's state directory")?;
    let sink = Arc::new(Mutex::new(Vec::new()));
    let ctx = context(state.path(), sink.clone());
    let mut stages = Vec::with_capacity(items.len());
    let mut warnings = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let built = registry
            .build_transform_in(&ctx, item, &format!("transforms[{i}]"))
            .with_context(|| CONFIG_NAME.to_string())?;
        warnings.extend(built.warnings.iter().map(|w| w.to_string()));
        let type_name = item["type"].as_str().unwrap_or_default().to_string();
        let id = item["settings"]["id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let step_id: Arc<str> = Arc::from(id.as_deref().unwrap_or(&type_name));
        let pipeline = Pipeline::new(vec![(step_id, built.value)]).in_context(ctx.clone());
        stages.push((type_name, id, pipeline));
    }

    let mut batch: Vec<Message> = input
        .lines()
        .map(|l| Message::new(l.as_bytes().to_vec()))
        .collect();
    batch.push(Message::ctrl());
    let rt = current_thread_runtime()?;
    let mut steps = Vec::with_capacity(stages.len());
    let mut before = records(&batch);
    // The timer is made inside the runtime, which it needs.
    let ran = rt.block_on(async {
        tokio::time::timeout(limit, async {
            let mut cur = batch;
            for (index, (type_name, id, pipeline)) in stages.into_iter().enumerate() {
                cur = match pipeline.apply(cur).await {
                    Ok(out) => out,
                    Err(e) => {
                        return Err(Failed {
                            index,
                            at: written(index, &type_name),
                            message: inner_message(e),
                            type_name,
                            id,
                        });
                    }
                };
                let after = records(&cur);
                steps.push(Step {
                    index,
                    changes: diff::step(&before, &after),
                    messages: Shown::all(&after),
                    type_name,
                    id,
                });
                before = after;
            }
            Ok(())
        })
        .await
    });
    let failed = match ran {
        Err(_) => return Err(TooSlow(limit).into()),
        Ok(Err(failed)) => Some(failed),
        Ok(Ok(())) => None,
    };
    let stdout = String::from_utf8_lossy(&sink.lock().unwrap_or_else(|p| p.into_inner())).into();
    Ok(RunReport {
        stdout,
        output: if failed.is_some() {
            Vec::new()
        } else {
            Shown::all(&before)
        },
        steps,
        warnings,
        error: failed
            .as_ref()
            .map(|f| format!("running {CONFIG_NAME}: {}: {}", f.at, f.message)),
        failed,
    })
}

/// A step's error without the `transform <id>:` layer its one-step pipeline adds (the
/// report names the transform as written instead).
fn inner_message(e: sluice_engine::TransformError) -> String {
    match e {
        sluice_engine::TransformError::In { inner, .. } => inner.to_string(),
        other => other.to_string(),
    }
}

/// One test of a config, as `sluice test` judges it.
#[derive(Debug, Serialize)]
pub(super) struct CaseReport {
    pub name: String,
    pub passed: bool,
    /// Why it failed or errored (empty when it passed).
    pub details: Vec<String>,
    /// How many data messages came out.
    pub outputs: usize,
    /// What the config's `send_stdout` wrote during the test.
    pub captured: String,
}

/// What running a config's tests gave.
#[derive(Debug, Serialize)]
pub(super) struct TestReport {
    /// Every test passed (false when there are none, so that "no tests" is not "ok").
    pub passed: bool,
    /// The report as text, in `sluice test -v`'s form (`--- PASS: name (1 outputs)`).
    pub report: String,
    pub cases: Vec<CaseReport>,
}

/// Runs the `tests:` of the config `text` with `sluice test`'s rules (commands/test): each
/// test's own transforms get one ctrl, a fresh instance of the pipeline (in a fresh context)
/// gets what they emit in one batch, and the condition must hold for every data message that
/// comes out (and `outputs: N`, when given, must match). A config that does not build is one
/// error, not a failure of each test.
pub(super) fn test(
    registry: &Registry,
    text: &str,
    ext: &[(String, String)],
    trust: Trust,
    limit: Duration,
) -> anyhow::Result<TestReport> {
    let cfg = load(text, ext, trust)?;
    let tests = cfg.tests()?;
    let state = tempfile::tempdir().context("creating a state directory")?;
    registry
        .build_pipeline_in(
            &Context::in_dir(state.path()),
            cfg.transforms(),
            "transforms",
        )
        .with_context(|| CONFIG_NAME.to_string())?;
    let rt = current_thread_runtime()?;
    let mut cases = Vec::with_capacity(tests.len());
    let mut report = String::new();
    for t in &tests {
        let captured = Arc::new(Mutex::new(Vec::new()));
        let judged = rt.block_on(async {
            tokio::time::timeout(limit, case(registry, cfg.transforms(), t, captured.clone())).await
        });
        let (passed, details, outputs) = match judged {
            Err(_) => (false, vec![format!("error: {}", TooSlow(limit))], 0),
            Ok(Err(e)) => (false, vec![format!("error: {e:#}")], 0),
            Ok(Ok(j)) => j,
        };
        let captured =
            String::from_utf8_lossy(&captured.lock().unwrap_or_else(|p| p.into_inner())).into();
        report.push_str(&format!("=== RUN   {}\n", t.name));
        if passed {
            report.push_str(&format!("--- PASS: {} ({outputs} outputs)\n", t.name));
        } else {
            report.push_str(&format!("--- FAIL: {}\n", t.name));
        }
        for line in details.iter().map(String::as_str).chain(
            std::iter::once(&captured as &String)
                .flat_map(|c| c.lines())
                .collect::<Vec<_>>(),
        ) {
            report.push_str(&format!("    {line}\n"));
        }
        cases.push(CaseReport {
            name: t.name.clone(),
            passed,
            details,
            outputs,
            captured,
        });
    }
    let passed = !cases.is_empty() && cases.iter().all(|c| c.passed);
    report.push_str(match (cases.is_empty(), passed) {
        (true, _) => "no tests: the config has no `tests:`\n",
        (false, true) => "PASS\n",
        (false, false) => "FAIL\n",
    });
    Ok(TestReport {
        passed,
        report,
        cases,
    })
}

/// One test: (passed, why not, outputs), judged as `sluice test` judges it.
async fn case(
    registry: &Registry,
    transforms: &Value,
    t: &sluice_config::TestCase,
    captured: Arc<Mutex<Vec<u8>>>,
) -> anyhow::Result<(bool, Vec<String>, usize)> {
    let state = tempfile::tempdir().context("creating the test's state directory")?;
    let ctx = context(state.path(), captured);
    let file = Path::new(CONFIG_NAME);
    let judged = judge(registry, &ctx, file, transforms, t, |_| {}).await?;
    let outputs = judged.outputs;
    let details = match judged.failure {
        None => Vec::new(),
        Some(Failure::Condition { message, condition }) => vec![
            "the condition did not hold".to_string(),
            format!("message:   {message}"),
            format!("condition: {condition}"),
        ],
        Some(Failure::Count { want }) => {
            vec![format!("{outputs} output message(s), not {want}")]
        }
    };
    Ok((details.is_empty(), details, outputs))
}

/// The config `text` formatted as `sluice fmt` formats a file.
pub(super) fn format(text: &str) -> anyhow::Result<String> {
    Ok(sluice_cmd::jsonnet_fmt::format(CONFIG_NAME, text)?)
}

/// The sample input of a compiled config, one message per line: its `demo` field, else the
/// values of the `test_message` transforms of its first test; empty when it has neither.
pub(super) fn sample_input(json: &Value) -> String {
    let line = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    if let Some(demo) = json.get("demo").filter(|d| !d.is_null()) {
        return line(demo);
    }
    let Some(first) = json.get("tests").and_then(|t| t.get(0)) else {
        return String::new();
    };
    first["transforms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "test_message")
        .map(|t| line(&t["settings"]["value"]))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMIT: Duration = Duration::from_secs(10);

    const CONFIG: &str = r#"
local sub = std.extVar('sub');
{
  tests: [{
    name: 'upper',
    transforms: [sub.tf.test.message({ value: { a: 'b' } })],
    condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'B' }),
  }],
  transforms: [
    sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } }),
    sub.tf.obj.insert({ obj: { trg: 'n' }, value: 1 }),
    sub.tf.send.stdout(),
  ],
}
"#;

    #[test]
    fn run_records_each_step_and_captures_stdout() {
        let r = sluice_transforms::registry();
        let report = run(
            &r,
            CONFIG,
            "{\"a\":\"b\"}\n{\"a\":\"c\"}\n",
            &[],
            Trust::default(),
            LIMIT,
        )
        .unwrap();
        let types: Vec<_> = report.steps.iter().map(|s| s.type_name.as_str()).collect();
        assert_eq!(types, ["string_to_upper", "object_insert", "send_stdout"]);
        assert_eq!(report.steps[0].messages[1].data, r#"{"a":"C"}"#);
        assert_eq!(report.steps[1].messages[0].data, r#"{"a":"B","n":1}"#);
        assert_eq!(
            report.stdout,
            "{\"a\":\"B\",\"n\":1}\n{\"a\":\"C\",\"n\":1}\n"
        );
        assert_eq!(report.output.len(), 2);
    }

    #[test]
    fn errors_carry_their_place() {
        let r = sluice_transforms::registry();
        let e = run(
            &r,
            "{ transforms: [\n  error 'boom' ] }",
            "",
            &[],
            Trust::default(),
            LIMIT,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("config.jsonnet:2:3"), "{e:#}");
        let bad = r#"{ transforms: [{ type: 'string_to_upper', settings: { object: 1 } }] }"#;
        let e = run(&r, bad, "", &[], Trust::default(), LIMIT).unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("transforms[0] (string_to_upper)"), "{e}");
    }

    #[test]
    fn a_failing_transform_keeps_the_steps_before_it() {
        let r = sluice_transforms::registry();
        // transforms[2] makes the data the text `ada`, which transforms[3] cannot set a
        // key in.
        let cfg = r#"
local sub = std.extVar('sub');
{ transforms: [
  sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),
  sub.tf.send.stdout(),
  sub.tf.obj.cp({ obj: { src: 'name' } }),
  sub.tf.obj.insert({ obj: { trg: 'x' }, value: 1 }),
  sub.tf.send.stdout(),
] }"#;
        let report = run(
            &r,
            cfg,
            "{\"name\":\"ada\"}\n",
            &[],
            Trust::default(),
            LIMIT,
        )
        .unwrap();
        let failed = report.failed.as_ref().expect("transforms[3] fails");
        assert_eq!(failed.index, 3);
        assert_eq!(failed.at, "transforms[3] (object_insert)");
        assert_eq!(failed.type_name, "object_insert");
        assert!(failed.message.contains("not JSON"), "{}", failed.message);
        assert!(
            !failed.message.starts_with("transform "),
            "{}",
            failed.message
        );
        let indexes: Vec<_> = report.steps.iter().map(|s| s.index).collect();
        assert_eq!(indexes, [0, 1, 2]);
        assert_eq!(report.steps[2].messages[0].data, "ada");
        // What the send before the failure wrote is kept; nothing came out of the end.
        assert_eq!(report.stdout, "{\"name\":\"ada\",\"greeting\":\"hello\"}\n");
        assert!(report.output.is_empty());
        let error = report.error.as_deref().unwrap();
        assert!(
            error.starts_with("running config.jsonnet: transforms[3] (object_insert): "),
            "{error}"
        );
        // A transform inside another is named by its place in the config, as `sluice run`
        // names it, under the top-level step it failed in.
        let nested = r#"
local sub = std.extVar('sub');
{ transforms: [
  sub.tf.meta.switch({ cases: [{ transforms: [sub.tf.obj.insert({ obj: { trg: 'x' }, value: 1 })] }] }),
] }"#;
        let report = run(&r, nested, "ada\n", &[], Trust::default(), LIMIT).unwrap();
        let failed = report.failed.as_ref().expect("the insert fails");
        assert_eq!(failed.at, "transforms[0] (meta_switch)");
        assert!(
            failed
                .message
                .starts_with("transforms[0].settings.cases[0].transforms[0] (object_insert, id "),
            "{}",
            failed.message
        );
        // A run that does not fail has neither.
        let ok = run(&r, CONFIG, "{}", &[], Trust::default(), LIMIT).unwrap();
        assert!(ok.failed.is_none() && ok.error.is_none());
    }

    #[test]
    fn each_step_marks_what_it_changed() {
        let r = sluice_transforms::registry();
        let cfg = r#"
local sub = std.extVar('sub');
{ transforms: [
  sub.tf.obj.insert({ obj: { trg: 'user.role' }, value: 'admin' }),
  sub.tf.str.to.upper({ obj: { src: 'name', trg: 'name' } }),
  sub.tf.obj.del({ obj: { src: 'user.id' } }),
  sub.tf.meta.switch({ cases: [{
    condition: sub.cnd.str.eq({ obj: { src: 'name' }, value: 'GRACE' }),
    transforms: [sub.tf.util.drop()],
  }] }),
  sub.tf.agg.to.array(),
] }"#;
        let input = [
            r#"{"name":"ada","user":{"id":1}}"#,
            r#"{"name":"grace","user":{"id":2}}"#,
            r#"{"name":"bob","user":{"id":3}}"#,
        ]
        .join("\n");
        let report = run(&r, cfg, &input, &[], Trust::default(), LIMIT).unwrap();
        assert!(report.failed.is_none(), "{:?}", report.error);
        let c: Vec<&StepChanges> = report.steps.iter().map(|s| &s.changes).collect();
        let first = |i: usize| c[i].messages[0].as_ref().unwrap();
        assert_eq!(first(0).added, ["user.role"]);
        assert!(first(0).changed.is_empty() && first(0).removed.is_empty());
        assert_eq!(first(1).changed, ["name"]);
        assert_eq!(first(2).removed, ["user.id"]);
        // The filter drops the second message and leaves the others as they were.
        assert_eq!((c[3].before, c[3].after), (3, 2));
        assert_eq!(c[3].dropped, [1]);
        assert!(first(3).added.is_empty() && !first(3).data_changed);
        // The aggregate makes one message of two: counted, not paired.
        assert_eq!((c[4].before, c[4].after), (2, 1));
        assert_eq!(c[4].messages, [None]);
        assert!(c[4].dropped.is_empty());
    }

    #[test]
    fn tests_pass_and_fail_as_sluice_test_judges() {
        let r = sluice_transforms::registry();
        let report = test(&r, CONFIG, &[], Trust::default(), LIMIT).unwrap();
        assert!(report.passed, "{}", report.report);
        assert!(report.report.contains("--- PASS: upper (1 outputs)"));
        let failing = CONFIG.replace("value: 'B'", "value: 'Z'");
        let report = test(&r, &failing, &[], Trust::default(), LIMIT).unwrap();
        assert!(!report.passed);
        assert!(
            report.report.contains("--- FAIL: upper"),
            "{}",
            report.report
        );
    }

    #[test]
    fn a_slow_run_is_stopped() {
        let r = sluice_transforms::registry();
        let slow = r#"{ transforms: [{ type: 'utility_delay', settings: { duration: '5s' } }] }"#;
        let e = run(
            &r,
            slow,
            "x",
            &[],
            Trust::default(),
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(e.to_string().contains("longer than"), "{e}");
    }

    #[test]
    fn sample_input_table() {
        let cases = [
            (json!({"demo": {"a": 1}}), r#"{"a":1}"#),
            (
                json!({"tests": [{"transforms": [
                    {"type": "test_message", "settings": {"value": "raw"}},
                    {"type": "test_message", "settings": {"value": {"b": 2}}},
                ]}, {"transforms": [{"type": "test_message", "settings": {"value": "no"}}]}]}),
                "raw\n{\"b\":2}",
            ),
            (json!({"transforms": []}), ""),
        ];
        for (json, want) in cases {
            assert_eq!(sample_input(&json), want, "{json}");
        }
    }
}
