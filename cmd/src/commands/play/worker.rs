//! Each run, test or format happens in a process of its own: the `sluice` binary started
//! again as `sluice play --worker`, handed one [`Order`] on standard input, answering one
//! [`Answer`] on standard output.
//!
//! Why a process and not a thread: Jsonnet evaluation cannot be interrupted, and a thread
//! cannot be stopped, so an abandoned evaluation (`local f(x) = f(x + 1)` spun wide enough)
//! would keep a core busy after its reply had gone. A process is killed at the deadline
//! and its CPU use ends there; its turn (one of the server's two) is given back only once
//! it has been reaped. It also fences off what would otherwise end the server: a stack
//! overflow beyond the nesting bound, jq's `halt`, an allocation that fails. And it is
//! where the environment is withheld: without `--allow-env` the worker starts with an
//! empty environment (but the time zone and locale), so nothing in a config (a secret,
//! jq's `env`) can read the server's environment variables.

use std::io::{Read as _, Write as _};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;

use super::runner;
use super::trust::Trust;

/// What a worker is asked to do.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(super) enum Job {
    Run { config: String, input: String },
    Test { config: String },
    Fmt { config: String },
}

/// One worker's whole input.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Order {
    pub job: Job,
    pub ext: Vec<(String, String)>,
    pub trust: Trust,
    /// The run's own time limit, in milliseconds (the pipeline stops itself at it; the
    /// server kills the process a second later whatever it is doing).
    pub limit_ms: u64,
}

/// A worker's reply: the HTTP status and the JSON body for the page.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Answer {
    pub status: u16,
    pub body: Value,
}

/// The most a worker's reply may be (a run's output and step view).
const MAX_ANSWER: u64 = 64 * 1024 * 1024;

/// Environment variables a worker keeps without `--allow-env`: they change how times and
/// text are shown, and hold nothing secret.
const KEPT_WITHOUT_ENV: &[&str] = &["TZ", "LANG", "LC_ALL", "SLUICE_LOG"];

/// In the worker: reads the order from standard input, does it, writes the answer.
pub(super) fn serve_one() -> anyhow::Result<ExitCode> {
    let mut text = Vec::new();
    std::io::stdin()
        .read_to_end(&mut text)
        .context("reading the order")?;
    let order: Order = serde_json::from_slice(&text).context("reading the order")?;
    let answer = work(order);
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answer).context("writing the answer")?;
    out.flush().context("writing the answer")?;
    Ok(ExitCode::SUCCESS)
}

fn work(order: Order) -> Answer {
    let registry = sluice_transforms::registry();
    let limit = Duration::from_millis(order.limit_ms);
    let (ext, trust) = (&order.ext, order.trust);
    // A run that failed at run time is a report (with the steps before the failing
    // transform and an `error`), answered 422 as a config that does not run.
    let done: anyhow::Result<(u16, Value)> = match &order.job {
        Job::Run { config, input } => runner::run(&registry, config, input, ext, trust, limit)
            .and_then(|r| {
                let status = if r.failed.is_some() { 422 } else { 200 };
                Ok((status, serde_json::to_value(r)?))
            }),
        Job::Test { config } => runner::test(&registry, config, ext, trust, limit)
            .and_then(|r| Ok((200, serde_json::to_value(r)?))),
        Job::Fmt { config } => runner::format(config).map(|c| (200, json!({ "config": c }))),
    };
    match done {
        Ok((status, body)) => Answer { status, body },
        Err(e) => Answer {
            status: if e.is::<runner::TooSlow>() { 408 } else { 422 },
            body: json!({ "error": format!("{e:#}") }),
        },
    }
}

/// In the server: does `order` in a worker process, killed at `deadline` or as soon as
/// `cancel` is dropped (the request went away), and returns once the process has ended.
pub(super) async fn run(
    order: &Order,
    deadline: Duration,
    cancel: oneshot::Receiver<()>,
) -> Answer {
    match supervise(order, deadline, cancel).await {
        Ok(answer) => answer,
        Err(e) => Answer {
            status: 500,
            body: json!({ "error": format!("the run's process: {e:#}") }),
        },
    }
}

async fn supervise(
    order: &Order,
    deadline: Duration,
    mut cancel: oneshot::Receiver<()>,
) -> anyhow::Result<Answer> {
    let exe = std::env::current_exe().context("finding the sluice binary")?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(["play", "--worker"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if !order.trust.env {
        cmd.env_clear();
        for k in KEPT_WITHOUT_ENV {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
    }
    let mut child = cmd.spawn().context("starting it")?;
    let order_bytes = serde_json::to_vec(order)?;
    let mut stdin = child.stdin.take().context("its standard input")?;
    let stdout = child.stdout.take().context("its standard output")?;
    let stderr = child.stderr.take().context("its standard error")?;
    // The pipes are served by tasks of their own so that the process is waited for (and
    // killed) independently of them; each ends at the process's end.
    tokio::spawn(async move {
        // A worker that died early closes its end: nothing to report beyond its exit.
        let _ = stdin.write_all(&order_bytes).await;
    });
    let out = tokio::spawn(read_all(stdout, MAX_ANSWER));
    let err = tokio::spawn(read_all(stderr, 64 * 1024));

    enum End {
        Exited(std::io::Result<std::process::ExitStatus>),
        Late,
        Cancelled,
    }
    let end = tokio::select! {
        status = child.wait() => End::Exited(status),
        () = tokio::time::sleep(deadline) => End::Late,
        _ = &mut cancel => End::Cancelled,
    };
    if !matches!(end, End::Exited(_)) {
        // Kills and reaps it: when this returns, it uses no CPU.
        child.kill().await.context("stopping it")?;
    }
    let out = out.await.unwrap_or_default();
    let err = err.await.unwrap_or_default();
    Ok(match end {
        End::Late => Answer {
            status: 408,
            body: json!({ "error": format!(
                "the run took longer than {} s and was stopped (sluice play's time limit)",
                order.limit_ms.div_ceil(1000)
            ) }),
        },
        End::Cancelled => Answer {
            status: 499,
            body: json!({ "error": "the request was cancelled" }),
        },
        End::Exited(status) => {
            let status = status.context("waiting for it")?;
            match serde_json::from_slice::<Answer>(&out) {
                Ok(answer) if status.success() => answer,
                _ => Answer {
                    status: 422,
                    body: json!({ "error": ended_without_answer(status, &err) }),
                },
            }
        }
    })
}

/// Why a worker gave no answer, for the page: how it ended and the last line it wrote to
/// standard error (a panic's or the runtime's message).
fn ended_without_answer(status: std::process::ExitStatus, stderr: &[u8]) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    let how = match (status.code(), status.signal()) {
        (_, Some(6)) => "it aborted (a crash, such as a stack overflow in evaluation)".into(),
        (_, Some(s)) => format!("it was killed by signal {s}"),
        (Some(c), _) => format!("it exited with status {c}"),
        _ => "it ended".into(),
    };
    let text = String::from_utf8_lossy(stderr);
    let last = text.lines().rev().find(|l| !l.trim().is_empty());
    match last {
        Some(l) => format!("the run ended without an answer: {how}: {}", l.trim()),
        None => format!("the run ended without an answer: {how}"),
    }
}

async fn read_all(mut r: impl tokio::io::AsyncRead + Unpin, max: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    // An error or the limit ends the read: what came is judged by the caller.
    let _ = (&mut r).take(max).read_to_end(&mut buf).await;
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_and_answers_round_trip() {
        let order = Order {
            job: Job::Run {
                config: "{transforms: []}".into(),
                input: "x".into(),
            },
            ext: vec![("k".into(), "v".into())],
            trust: Trust::default(),
            limit_ms: 10,
        };
        let text = serde_json::to_string(&order).unwrap();
        assert!(text.contains(r#""op":"run""#), "{text}");
        let back: Order = serde_json::from_str(&text).unwrap();
        assert!(matches!(back.job, Job::Run { .. }));
        let answer = work(back);
        assert_eq!(answer.status, 200, "{}", answer.body);
        let answer = work(Order {
            job: Job::Fmt {
                config: "[".repeat(5000),
            },
            ..serde_json::from_str(&text).unwrap()
        });
        assert_eq!(answer.status, 422);
        assert!(answer.body["error"].as_str().unwrap().contains("500 deep"));
    }

    #[test]
    fn an_end_without_answer_is_explained() {
        use std::os::unix::process::ExitStatusExt as _;
        let e = ended_without_answer(
            std::process::ExitStatus::from_raw(6),
            b"thread 'main' has overflowed its stack\nfatal runtime error: stack overflow\n",
        );
        assert_eq!(
            e,
            "the run ended without an answer: it aborted (a crash, such as a stack overflow in \
             evaluation): fatal runtime error: stack overflow"
        );
    }
}
