//! The deadline of the invocation in progress, for transforms whose guarantees depend on
//! how long the process will live.
//!
//! A Lambda invocation ends at a known instant, after which its process is frozen or
//! killed. `meta_kv_store_lock` uses that instant as the default end of its leases: a lock
//! taken inside an invocation is protected exactly as long as its owner can still be
//! working on it, and free for another owner's takeover as soon as it cannot. The Lambda
//! adapter runs each invocation inside [`with_deadline`]; elsewhere there is none.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long before the invocation's end the work stops waiting (retries, backoffs, another
/// owner's lock): the time left is for flushing, settling the lock's keys and answering.
pub const WORK_MARGIN: Duration = Duration::from_millis(1500);

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `f` with `deadline` as the invocation's end.
pub async fn with_deadline<F: Future>(deadline: Instant, f: F) -> F::Output {
    DEADLINE.scope(deadline, f).await
}

/// The end of the invocation in progress in this task, if it runs inside one.
pub fn deadline() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// When the work of the invocation in progress must stop waiting ([`WORK_MARGIN`] before
/// its end), if this task runs inside one.
pub fn stop_waiting_at() -> Option<Instant> {
    deadline().map(|d| d.checked_sub(WORK_MARGIN).unwrap_or(d))
}

/// Whether waiting `wait` from now would take the work of the invocation in progress past
/// [`stop_waiting_at`] (never outside an invocation).
pub fn would_overrun(wait: Duration) -> bool {
    stop_waiting_at().is_some_and(|at| Instant::now() + wait > at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_deadline_is_seen_inside_the_scope_only() {
        assert_eq!(deadline(), None);
        let d = Instant::now() + Duration::from_secs(3);
        let seen = with_deadline(d, async { deadline() }).await;
        assert_eq!(seen, Some(d));
        assert_eq!(deadline(), None);
        assert!(!would_overrun(Duration::from_secs(3600)), "no invocation");
        let (short, long) = with_deadline(d, async {
            (
                would_overrun(Duration::from_millis(100)),
                would_overrun(Duration::from_secs(2)),
            )
        })
        .await;
        assert!(!short && long, "1.5 s are kept for the answer");
    }
}
