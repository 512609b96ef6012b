//! Stopping `sluice run` and `sluice tap` on SIGINT or SIGTERM, within a grace period.
//!
//! An ordinary stop (a deploy, a scale-in, Ctrl-C) must not be a crash: a crash leaves the
//! batches unflushed and the lock's keys pending for a whole lease. So the first signal
//! stops the reading (the adapter's part: what was read goes on, nothing more is read), and
//! the pipeline finishes what it has as at the end of input: the final ctrl, the flushes,
//! the lock's settle, all within `--grace`. The driver's settle is cut short to the end of
//! the grace period; the pipeline gets the period less a reserve ([`reserve`]) to finish,
//! and if it has not by then, it is aborted (every message still held is failed) and
//! settled with the reserve. The process then exits with the signal's conventional status
//! (130 for SIGINT, 143 for SIGTERM), after the adapter said what was read and delivered.
//!
//! A second signal is a crash on purpose: the process exits at once, after one line saying
//! so (what was not settled stays pending until its lease ends).
//!
//! After the grace period ran out the pipeline's driver is still running (in a send's call,
//! say); it is never dropped, because dropping a message counts as delivering it: the
//! caller exits the process instead ([`exit_now`]).

use std::io::Write as _;
use std::time::{Duration, Instant};

use sluice_engine::{Pipeline, SettleReport};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

/// The default of `--grace`: under the 30 s that Kubernetes and ECS wait before SIGKILL.
pub(crate) const DEFAULT_GRACE: &str = "25s";

/// A signal that stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// Its name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }

    /// The exit status of a process it stopped: 128 and its number, as shells report it.
    pub(crate) fn status(self) -> i32 {
        match self {
            Signal::Interrupt => 128 + libc::SIGINT,
            Signal::Terminate => 128 + libc::SIGTERM,
        }
    }
}

/// SIGINT and SIGTERM, caught from [`Signals::listen`] on (inside a tokio runtime).
pub(crate) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Catches both signals from now on.
    pub(crate) fn listen() -> std::io::Result<Signals> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// The next signal.
    pub(crate) async fn next(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::Interrupt,
            _ = self.term.recv() => Signal::Terminate,
        }
    }
}

/// Parses `--grace`: a Go duration, as configs write them (`25s`, `1m30s`, `500ms`).
pub(crate) fn parse_grace(s: &str) -> Result<Duration, String> {
    sluice_engine::settings::parse_go_duration(s.trim())
}

/// A duration as a user writes it: `25s`, `1.5s`, `500ms`.
pub(crate) fn show(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// The part of the grace period kept for settling the locks after an abort: a quarter, at
/// most 5 s.
pub(crate) fn reserve(grace: Duration) -> Duration {
    (grace / 4).min(Duration::from_secs(5))
}

/// How a run ended.
pub(crate) enum Ended<T> {
    /// Its input ended; no signal came.
    Finished(T),
    /// A signal stopped it, and the pipeline finished within the grace period.
    Stopped(Signal, T),
    /// A signal stopped it, and the grace period ran out first: the pipeline was aborted
    /// and settled with what time was left (`None`: the settle did not end in time
    /// either). The driver still runs: exit without waiting for it ([`exit_now`]).
    OutOfTime(Signal, Option<SettleReport>),
}

/// What a stop asks of the adapter.
pub(crate) struct OnStop<S, A, R> {
    /// At the first signal: stop reading (what was read goes on).
    pub stop_reading: S,
    /// At a second signal, just before the process exits: say what is left (one line).
    pub at_once: A,
    /// Why what the pipeline still holds when the grace period runs out was not delivered.
    pub reason: R,
}

/// Waits for `driver` (the pipeline's driver, whose final settle ends by `settle_by`) while
/// catching SIGINT and SIGTERM: the first stops the reading and starts the grace period,
/// a second ends the process at once.
pub(crate) async fn drive_until_stopped<T, S, A, R>(
    pipeline: &Pipeline,
    mut driver: JoinHandle<T>,
    settle_by: &sluice_engine::driver::SettleDeadline,
    grace: Duration,
    on: OnStop<S, A, R>,
) -> anyhow::Result<Ended<T>>
where
    S: FnOnce(Signal),
    A: FnOnce(Signal) + Send + 'static,
    R: FnOnce(Signal) -> String,
{
    let joined = |r: Result<T, tokio::task::JoinError>| {
        r.map_err(|e| anyhow::anyhow!("the pipeline's driver stopped: {e}"))
    };
    let mut signals = match Signals::listen() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "signals cannot be caught: a stop will be a crash");
            return Ok(Ended::Finished(joined(driver.await)?));
        }
    };
    let signal = tokio::select! {
        r = &mut driver => return Ok(Ended::Finished(joined(r)?)),
        s = signals.next() => s,
    };
    let end = Instant::now() + grace;
    settle_by.bring_forward(end);
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!(
            "sluice: {}: finishing what was read within {} (again to exit at once)",
            signal.name(),
            show(grace)
        );
    }
    (on.stop_reading)(signal);
    let at_once = on.at_once;
    tokio::spawn(async move {
        let second = signals.next().await;
        at_once(second);
        exit_now(second.status());
    });
    let finish_by = end - reserve(grace);
    tokio::select! {
        r = &mut driver => return Ok(Ended::Stopped(signal, joined(r)?)),
        _ = tokio::time::sleep_until(finish_by.into()) => {}
    }
    let reason = (on.reason)(signal);
    // The settle ends a little before the grace period, to say what it could not do; a
    // store call that hangs past the end is not waited for.
    let settle_until = end - (reserve(grace) / 5).min(Duration::from_millis(200));
    let settled = tokio::time::timeout_at(end.into(), async {
        pipeline.abort(&reason).await;
        pipeline.settle(settle_until).await
    })
    .await
    .ok();
    Ok(Ended::OutOfTime(signal, settled))
}

/// Ends the process now with `status`, running no destructor: what is still in the
/// pipeline is neither delivered nor dropped (a dropped message counts as delivered, which
/// would let the lock commit it). Standard error is flushed first.
pub(crate) fn exit_now(status: i32) -> ! {
    let _ = std::io::stderr().flush();
    std::process::exit(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods_parse_as_go_durations_and_show_as_written() {
        for (s, d) in [
            ("25s", Duration::from_secs(25)),
            ("1m30s", Duration::from_secs(90)),
            (" 500ms", Duration::from_millis(500)),
            ("1.5s", Duration::from_millis(1500)),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(parse_grace(s), Ok(d), "{s}");
        }
        assert!(parse_grace("soon").unwrap_err().contains("\"30s\""));
        assert_eq!(
            [25_000, 500, 1500, 0].map(|ms| show(Duration::from_millis(ms))),
            ["25s", "500ms", "1.5s", "0s"]
        );
        assert_eq!(reserve(Duration::from_secs(25)), Duration::from_secs(5));
        assert_eq!(reserve(Duration::from_secs(60)), Duration::from_secs(5));
        assert_eq!(reserve(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(
            [Signal::Interrupt, Signal::Terminate].map(|s| (s.name(), s.status())),
            [("SIGINT", 130), ("SIGTERM", 143)]
        );
    }
}
