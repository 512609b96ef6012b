//! The deadline of the invocation in progress, for transforms whose guarantees depend on
//! how long the process will live.
//!
//! A Lambda invocation ends at a known instant, after which its process is frozen or
//! killed. `meta_kv_store_lock` uses that instant as the default end of its leases: a lock
//! taken inside an invocation is protected exactly as long as its owner can still be
//! working on it, and free for another owner's takeover as soon as it cannot. The Lambda
//! adapter runs each invocation inside [`with_deadline`]; elsewhere there is none.

use std::future::Future;
use std::time::Instant;

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
    }
}
