//! The deadline of the invocation in progress, for transforms whose guarantees depend on
//! how long the process will live.
//!
//! A Lambda invocation ends at a known instant, after which its process is frozen or
//! killed. `meta_kv_store_lock` uses that instant as the default end of its leases: a lock
//! taken inside an invocation is protected exactly as long as its owner can still be
//! working on it, and free for another owner's takeover as soon as it cannot. The Lambda
//! adapter runs each invocation inside [`with_deadline`]; elsewhere there is none.
//!
//! The deadline bounds the invocation's work: waits and retries stop [`WORK_MARGIN`] before
//! it ([`would_overrun`]), and so does every outgoing call ([`call_deadline`]: the HTTP
//! transforms' client and every AWS client cut an attempt there), so that the function has
//! the time to flush, settle its locks and answer. The settling itself ([`settling`]) may
//! go on until [`ANSWER_MARGIN`] before the end. An invocation shorter than twice the work
//! margin (Lambda's timeout can be 1 s) keeps half of its time for that instead, and a
//! quarter for the answer, so that it still works. A task spawned to do part of the work
//! carries the invocation along ([`carried`]).

use std::future::Future;
use std::time::{Duration, Instant};

/// How long before the invocation's end the work stops waiting (retries, backoffs, another
/// owner's lock) and calling: the time left is for flushing, settling the lock's keys and
/// answering. At most half the invocation.
pub const WORK_MARGIN: Duration = Duration::from_millis(1500);

/// How long before the invocation's end everything it does must be done, the settling of
/// its locks included: the time the runtime needs to carry the answer. At most a quarter
/// of the invocation.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// An invocation: when it started and when it ends.
#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    /// `margin` before the end, at most `1/part` of the invocation.
    fn before_end(self, margin: Duration, part: u32) -> Instant {
        let margin = margin.min(self.end.saturating_duration_since(self.start) / part);
        self.end.checked_sub(margin).unwrap_or(self.end)
    }
}

tokio::task_local! {
    static INVOCATION: Window;
    static SETTLING: ();
}

/// Runs `f` with `deadline` as the invocation's end (it starts now).
pub async fn with_deadline<F: Future>(deadline: Instant, f: F) -> F::Output {
    with_deadline_since(Instant::now(), deadline, f).await
}

/// Runs `f` as an invocation that started at `start` and ends at `deadline`.
pub async fn with_deadline_since<F: Future>(start: Instant, deadline: Instant, f: F) -> F::Output {
    let w = Window {
        start,
        end: deadline,
    };
    INVOCATION.scope(w, f).await
}

fn window() -> Option<Window> {
    INVOCATION.try_with(|w| *w).ok()
}

/// The end of the invocation in progress in this task, if it runs inside one.
pub fn deadline() -> Option<Instant> {
    window().map(|w| w.end)
}

/// When the work of the invocation in progress must stop waiting and calling
/// ([`WORK_MARGIN`] before its end, at most half of it), if this task runs inside one.
pub fn stop_waiting_at() -> Option<Instant> {
    window().map(|w| w.before_end(WORK_MARGIN, 2))
}

/// When everything the invocation in progress does must be done, so that its answer leaves
/// in time ([`ANSWER_MARGIN`] before its end, at most a quarter of it).
pub fn answer_by() -> Option<Instant> {
    window().map(|w| w.before_end(ANSWER_MARGIN, 4))
}

/// Whether waiting `wait` from now would take the work of the invocation in progress past
/// [`stop_waiting_at`] (never outside an invocation).
pub fn would_overrun(wait: Duration) -> bool {
    stop_waiting_at().is_some_and(|at| Instant::now() + wait > at)
}

/// Runs `f` as the settling of what the invocation's work left (the locks' commits and
/// releases), whose calls may go on after the work had to stop: until [`ANSWER_MARGIN`]
/// before the end ([`call_deadline`]).
pub async fn settling<F: Future>(f: F) -> F::Output {
    SETTLING.scope((), f).await
}

fn is_settling() -> bool {
    SETTLING.try_with(|_| ()).is_ok()
}

/// When an outgoing call made now must have its answer, if this task runs inside an
/// invocation: when the work must stop ([`stop_waiting_at`]), or, while [`settling`], when
/// the answer must leave ([`answer_by`]). A call that would have no time left is better not
/// made.
pub fn call_deadline() -> Option<Instant> {
    if is_settling() {
        answer_by()
    } else {
        stop_waiting_at()
    }
}

/// `f` with the invocation this task runs in (its deadline, whether it is settling)
/// carried along, for a task spawned to do part of the invocation's work: task-locals do
/// not follow `tokio::spawn`.
pub fn carried<F: Future>(f: F) -> impl Future<Output = F::Output> {
    let w = window();
    let settling = is_settling();
    async move {
        match (w, settling) {
            (None, _) => f.await,
            (Some(w), false) => INVOCATION.scope(w, f).await,
            (Some(w), true) => INVOCATION.scope(w, SETTLING.scope((), f)).await,
        }
    }
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

    #[tokio::test]
    async fn calls_end_when_the_work_stops_or_while_settling_before_the_answer() {
        assert_eq!(call_deadline(), None);
        let d = Instant::now() + Duration::from_secs(10);
        let (work, settle, spawned) = with_deadline(d, async {
            let work = call_deadline();
            let settle = settling(async { call_deadline() }).await;
            let spawned = settling(async {
                tokio::spawn(carried(async { (deadline(), call_deadline()) }))
                    .await
                    .unwrap()
            })
            .await;
            (work, settle, spawned)
        })
        .await;
        assert_eq!(work, Some(d - WORK_MARGIN));
        assert_eq!(settle, Some(d - ANSWER_MARGIN));
        assert_eq!(spawned, (Some(d), Some(d - ANSWER_MARGIN)), "carried along");
        let bare = tokio::spawn(carried(async { call_deadline() }))
            .await
            .unwrap();
        assert_eq!(bare, None, "outside an invocation");
    }

    #[tokio::test]
    async fn a_short_invocation_keeps_half_its_time_for_the_work_and_a_quarter_to_answer() {
        let start = Instant::now();
        let d = start + Duration::from_secs(1);
        let (work, answer) =
            with_deadline_since(start, d, async { (stop_waiting_at(), answer_by()) }).await;
        assert_eq!(work, Some(start + Duration::from_millis(500)));
        assert_eq!(answer, Some(start + Duration::from_millis(750)));
        // Lambda's default 3 s: the margins as they are.
        let d = start + Duration::from_secs(3);
        let (work, answer) =
            with_deadline_since(start, d, async { (stop_waiting_at(), answer_by()) }).await;
        assert_eq!(work, Some(d - WORK_MARGIN));
        assert_eq!(answer, Some(d - ANSWER_MARGIN));
    }
}
