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
//!
//! Two additions serve the lock, which must act on a message's fate wherever it is decided
//! (a send after the lock, a batch flushed by its timer while the input is idle):
//! - a tracker may carry a **tag**, readable from its tokens: the lock tags its trackers
//!   with the lock key and its history, so that a send can name an object after the keys
//!   it holds or look for an earlier attempt's record before sending it again;
//! - a tracker may have a **watch**, told once when the last copy is gone, so the lock
//!   commits a key as soon as its message was delivered instead of at the next ctrl.
//!
//! An input adapter tracks every record, so a tracker costs one allocation: its tokens
//! share it and count themselves in it, and a record's place (a line's number) is a plain
//! number in it rather than a tag of its own.
//!
//! A failure is **uncertain** when the destination may have applied the write although it
//! answered with an error (a 5xx or a timeout after the request went out): the lock then
//! keeps the key pending for whoever processes the message next to check, instead of
//! releasing it as never sent. And a tracker knows whether some copy was **accepted** by a
//! destination, whatever became of the others: the lock tells a message whose sends inside
//! it delivered (its effect happened) from one that only passed through.

use std::any::Any;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use smallvec::SmallVec;

/// Told when a watched tracker is done (its last token dropped). Called from whatever
/// thread drops that token, possibly inside another component's critical section: an
/// implementation must only record the fact (a leaf lock, an atomic, a wake-up).
pub trait AckWatch: Send + Sync {
    /// `tracker` is done; its [`AckTracker::status`] is final.
    fn done(&self, tracker: &Arc<AckTracker>);
}

/// What a tracker's creator attaches for the message's later handlers to read.
pub type AckTag = Arc<dyn Any + Send + Sync>;

/// The observer's side: created by whoever wants to know a message's fate.
#[derive(Default)]
pub struct AckTracker {
    done: AtomicBool,
    failed: AtomicBool,
    uncertain: AtomicBool,
    accepted: AtomicBool,
    reason: Mutex<Option<String>>,
    tag: Option<AckTag>,
    /// A number its creator gives it (an input's line number), read by its watch.
    place: u64,
    watch: Option<Arc<dyn AckWatch>>,
    /// How many tokens report to it: done when the last one is dropped.
    tokens: AtomicUsize,
}

impl std::fmt::Debug for AckTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckTracker")
            .field("status", &self.status())
            .field("uncertain", &self.uncertain())
            .finish()
    }
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
        Self::build(AckTracker::default())
    }

    /// A tracker carrying `tag` (readable through [`AckToken::tag`]) and told through
    /// `watch` when it is done.
    pub fn watched(
        tag: Option<AckTag>,
        watch: Option<Arc<dyn AckWatch>>,
    ) -> (Arc<AckTracker>, AckToken) {
        Self::build(AckTracker {
            tag,
            watch,
            ..AckTracker::default()
        })
    }

    /// The token of a new tracker numbered `place` (see [`AckTracker::place`]) and told
    /// through `watch` when it is done: for an input adapter, which hears of its records'
    /// fates through the watch only, and keeps no handle on the tracker itself.
    pub fn watched_at(place: u64, watch: Arc<dyn AckWatch>) -> AckToken {
        AckToken::first(Arc::new(AckTracker {
            place,
            watch: Some(watch),
            ..AckTracker::default()
        }))
    }

    fn build(t: AckTracker) -> (Arc<AckTracker>, AckToken) {
        let tracker = Arc::new(t);
        let token = AckToken::first(tracker.clone());
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

    /// Whether every copy is gone (the status is final).
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Whether a failure may have been applied by the destination anyway (see the module
    /// comment). Only meaningful when the status is [`AckStatus::Failed`].
    pub fn uncertain(&self) -> bool {
        self.uncertain.load(Ordering::Acquire)
    }

    /// Whether a destination accepted some copy of the message (a send delivered it),
    /// whatever became of the other copies.
    pub fn accepted(&self) -> bool {
        self.accepted.load(Ordering::Acquire)
    }

    /// Why it failed, when a send said so.
    pub fn failure_reason(&self) -> Option<String> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }

    /// The tag its creator attached.
    pub fn tag(&self) -> Option<&AckTag> {
        self.tag.as_ref()
    }

    /// The number its creator gave it ([`AckTracker::watched_at`]; 0 otherwise).
    pub fn place(&self) -> u64 {
        self.place
    }

    /// Marks the message failed from the observer's side (e.g. it could not be processed
    /// at all), as a token's [`AckToken::fail`] would.
    pub fn fail(&self, reason: &str) {
        mark_failed(self, reason, false);
    }
}

fn mark_failed(t: &AckTracker, reason: &str, uncertain: bool) {
    if uncertain {
        t.uncertain.store(true, Ordering::Release);
    }
    if !t.failed.swap(true, Ordering::AcqRel)
        && let Ok(mut r) = t.reason.lock()
    {
        *r = Some(reason.to_string());
    }
}

/// The message's side: cloned with the message; the tracker is done when the last clone drops.
///
/// Each token counts itself in its tracker's `tokens` (apart from the tracker's reference
/// count, which the creator's handle also holds), so tokens and tracker are one allocation.
#[derive(Debug)]
pub struct AckToken(Arc<AckTracker>);

impl Clone for AckToken {
    fn clone(&self) -> Self {
        // Relaxed, as a reference count's increment: the new token is made from a live one.
        self.0.tokens.fetch_add(1, Ordering::Relaxed);
        AckToken(self.0.clone())
    }
}

impl Drop for AckToken {
    fn drop(&mut self) {
        // AcqRel, as a reference count's last decrement: whoever sees the last token go sees
        // every failure marked through the others.
        if self.0.tokens.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.done.store(true, Ordering::Release);
            if let Some(w) = &self.0.watch {
                w.done(&self.0);
            }
        }
    }
}

impl AckToken {
    /// The first token of a tracker that has none yet.
    fn first(tracker: Arc<AckTracker>) -> AckToken {
        tracker.tokens.store(1, Ordering::Relaxed);
        AckToken(tracker)
    }

    /// Marks the tracked message as not delivered.
    pub fn fail(&self, reason: &str) {
        mark_failed(&self.0, reason, false);
    }

    /// Marks the tracked message as not known to be delivered: the destination answered
    /// with an error after the request may have been applied.
    pub fn fail_uncertain(&self, reason: &str) {
        mark_failed(&self.0, reason, true);
    }

    /// Records that a destination may have applied the message although it answered with
    /// an error, without failing it (a retry may still deliver it): should the message end
    /// up failed, the failure is uncertain.
    pub fn mark_uncertain(&self) {
        self.0.uncertain.store(true, Ordering::Release);
    }

    /// Records that a destination accepted this copy (a send delivered it; see
    /// [`AckTracker::accepted`]).
    pub fn mark_accepted(&self) {
        self.0.accepted.store(true, Ordering::Release);
    }

    /// The identity of the tracker this token reports to (see [`AckTracker::id`]).
    pub fn tracker_id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Whether this token reports to `tracker`.
    pub fn reports_to(&self, tracker: &Arc<AckTracker>) -> bool {
        Arc::ptr_eq(&self.0, tracker)
    }

    /// The tag of the tracker this token reports to, when it is a `T`.
    pub fn tag<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        // The type first: looking for a lock's tag among a line's tokens (a send does, per
        // message) then costs no reference count.
        let tag = self.0.tag.as_ref()?;
        if !(**tag).is::<T>() {
            return None;
        }
        tag.clone().downcast::<T>().ok()
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

/// Marks every token in `acks` failed, uncertainly (see [`AckToken::fail_uncertain`]).
pub fn fail_all_uncertain(acks: &AckSet, reason: &str) {
    for a in acks {
        a.fail_uncertain(reason);
    }
}

/// The tags of type `T` among `acks`.
pub fn tags<T: Any + Send + Sync>(acks: &AckSet) -> impl Iterator<Item = Arc<T>> + '_ {
    acks.iter().filter_map(|a| a.tag::<T>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn done_when_every_copy_is_dropped() {
        let (tracker, token) = AckTracker::new();
        let copy = token.clone();
        assert_eq!(tracker.status(), AckStatus::Pending);
        drop(token);
        assert_eq!(tracker.status(), AckStatus::Pending);
        drop(copy);
        assert_eq!(tracker.status(), AckStatus::Delivered);
        assert!(tracker.is_done());
    }

    #[test]
    fn failure_sticks_and_keeps_the_first_reason() {
        let (tracker, token) = AckTracker::new();
        token.fail("throttled");
        token.fail("second");
        drop(token);
        assert_eq!(tracker.status(), AckStatus::Failed);
        assert_eq!(tracker.failure_reason().as_deref(), Some("throttled"));
        assert!(!tracker.uncertain());
    }

    #[test]
    fn an_uncertain_failure_is_a_failure_that_says_so() {
        let (tracker, token) = AckTracker::new();
        token.fail_uncertain("timed out after sending");
        token.fail("refused");
        drop(token);
        assert_eq!(tracker.status(), AckStatus::Failed);
        assert!(tracker.uncertain());
        assert_eq!(
            tracker.failure_reason().as_deref(),
            Some("timed out after sending")
        );
    }

    #[test]
    fn reports_to_identifies_the_tracker() {
        let (a, ta) = AckTracker::new();
        let (b, _tb) = AckTracker::new();
        assert!(ta.reports_to(&a));
        assert!(!ta.reports_to(&b));
    }

    #[test]
    fn a_numbered_tracker_is_done_once_when_its_last_token_drops_on_any_thread() {
        struct Seen(Mutex<Vec<(u64, AckStatus, Option<String>)>>);
        impl AckWatch for Seen {
            fn done(&self, t: &Arc<AckTracker>) {
                self.0
                    .lock()
                    .unwrap()
                    .push((t.place(), t.status(), t.failure_reason()));
            }
        }
        for failing in [None, Some(0), Some(5)] {
            let seen = Arc::new(Seen(Mutex::default()));
            let token = AckTracker::watched_at(7, seen.clone());
            let copies: Vec<AckToken> = (0..8).map(|_| token.clone()).collect();
            drop(token);
            assert!(seen.0.lock().unwrap().is_empty());
            let threads: Vec<_> = copies
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    std::thread::spawn(move || {
                        if Some(i) == failing {
                            c.fail("refused");
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let expected = match failing {
                None => (7, AckStatus::Delivered, None),
                Some(_) => (7, AckStatus::Failed, Some("refused".to_string())),
            };
            assert_eq!(*seen.0.lock().unwrap(), vec![expected]);
        }
    }

    #[test]
    fn tags_are_read_through_tokens_and_watches_hear_of_the_last_drop_once() {
        struct Count(AtomicUsize);
        impl AckWatch for Count {
            fn done(&self, t: &Arc<AckTracker>) {
                assert!(t.is_done());
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let watch = Arc::new(Count(AtomicUsize::new(0)));
        let tag: AckTag = Arc::new(String::from("key-1"));
        let (tracker, token) = AckTracker::watched(Some(tag), Some(watch.clone()));
        assert_eq!(
            token.tag::<String>().as_deref().map(String::as_str),
            Some("key-1")
        );
        assert!(token.tag::<u32>().is_none());
        let mut set = AckSet::new();
        set.push(token.clone());
        assert_eq!(tags::<String>(&set).count(), 1);
        drop(set);
        assert_eq!(watch.0.load(Ordering::SeqCst), 0);
        drop(token);
        assert_eq!(watch.0.load(Ordering::SeqCst), 1);
        tracker.fail("late");
        assert_eq!(tracker.status(), AckStatus::Failed);
    }
}
