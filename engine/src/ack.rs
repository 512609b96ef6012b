//! Acknowledgements: knowing which messages were delivered.
//!
//! Substation cannot tell which messages a failed flush had already delivered, so its lock
//! either unlocks everything since the last checkpoint (duplicates) or swallows the error
//! (loss). sluice tracks delivery instead. Whoever needs to know the fate of a message (an
//! input adapter for its records, the lock for the messages it locked) creates an
//! [`AckTracker`] and attaches its [`AckToken`] to the message. The token travels with the
//! message and every copy of it (a send keeps a copy in its batch, an aggregate merges the
//! tokens of its inputs, a fan-out clones them). When the last copy is gone the tracker is
//! *done*; a send that could not deliver a message marks its tokens *failed* first.
//! So after a ctrl message has flushed every batch, a tracker that is done and not failed
//! means: every copy of that message was delivered or deliberately dropped.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use smallvec::SmallVec;

/// The observer's side: created by whoever wants to know a message's fate.
#[derive(Debug, Default)]
pub struct AckTracker {
    done: AtomicBool,
    failed: AtomicBool,
    reason: Mutex<Option<String>>,
}

/// What became of a tracked message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// Some copy of it is still held (in a batch, in flight).
    Pending,
    /// Every copy was delivered or deliberately dropped.
    Delivered,
    /// Some copy could not be delivered (it may still be held elsewhere).
    Failed,
}

impl AckTracker {
    /// A new tracker and the token to attach to the message.
    pub fn new() -> (Arc<AckTracker>, AckToken) {
        let tracker = Arc::new(AckTracker::default());
        let token = AckToken(Arc::new(TokenInner {
            tracker: tracker.clone(),
        }));
        (tracker, token)
    }

    /// An identity, equal to [`AckToken::tracker_id`] of its tokens, while it lives.
    pub fn id(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    /// The message's fate so far.
    pub fn status(&self) -> AckStatus {
        if self.failed.load(Ordering::Acquire) {
            AckStatus::Failed
        } else if self.done.load(Ordering::Acquire) {
            AckStatus::Delivered
        } else {
            AckStatus::Pending
        }
    }

    /// Why it failed, when a send said so.
    pub fn failure_reason(&self) -> Option<String> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }
}

#[derive(Debug)]
struct TokenInner {
    tracker: Arc<AckTracker>,
}

impl Drop for TokenInner {
    fn drop(&mut self) {
        self.tracker.done.store(true, Ordering::Release);
    }
}

/// The message's side: cloned with the message; the tracker is done when the last clone drops.
#[derive(Debug, Clone)]
pub struct AckToken(Arc<TokenInner>);

impl AckToken {
    /// Marks the tracked message as not delivered.
    pub fn fail(&self, reason: &str) {
        let t = &self.0.tracker;
        if !t.failed.swap(true, Ordering::AcqRel)
            && let Ok(mut r) = t.reason.lock()
        {
            *r = Some(reason.to_string());
        }
    }

    /// The identity of the tracker this token reports to (see [`AckTracker::id`]).
    pub fn tracker_id(&self) -> usize {
        Arc::as_ptr(&self.0.tracker) as usize
    }

    /// Whether this token reports to `tracker`.
    pub fn reports_to(&self, tracker: &Arc<AckTracker>) -> bool {
        Arc::ptr_eq(&self.0.tracker, tracker)
    }
}

/// The tokens a message carries: usually none or one, several after an aggregation.
pub type AckSet = SmallVec<[AckToken; 1]>;

/// Marks every token in `acks` failed.
pub fn fail_all(acks: &AckSet, reason: &str) {
    for a in acks {
        a.fail(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_when_every_copy_is_dropped() {
        let (tracker, token) = AckTracker::new();
        let copy = token.clone();
        assert_eq!(tracker.status(), AckStatus::Pending);
        drop(token);
        assert_eq!(tracker.status(), AckStatus::Pending);
        drop(copy);
        assert_eq!(tracker.status(), AckStatus::Delivered);
    }

    #[test]
    fn failure_sticks_and_keeps_the_first_reason() {
        let (tracker, token) = AckTracker::new();
        token.fail("throttled");
        token.fail("second");
        drop(token);
        assert_eq!(tracker.status(), AckStatus::Failed);
        assert_eq!(tracker.failure_reason().as_deref(), Some("throttled"));
    }

    #[test]
    fn reports_to_identifies_the_tracker() {
        let (a, ta) = AckTracker::new();
        let (b, _tb) = AckTracker::new();
        assert!(ta.reports_to(&a));
        assert!(!ta.reports_to(&b));
    }
}
