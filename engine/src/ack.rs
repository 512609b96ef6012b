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
//! A tracker costs one allocation: its tokens share it and count themselves in it.
//!
//! An input that only needs to hear of the records that were *not* delivered (the local
//! input names its failed lines) tracks them in an [`AckGroup`] instead: a run of consecutive
//! places (line numbers) sharing one [`FailureWatch`], whose tokens are the group and a place.
//! A group costs one allocation for a batch of records rather than one per record, and its
//! tokens count nothing but the group's references: no tracker allocated on the input's
//! thread and freed on another, no watch whose reference count every record moves between
//! cores. Measured on the Zeek mapping (`sluice run`, 400,000 lines): a tracker per line cost
//! 3%-5% of the run. Its tokens are failed like any other; a failure is told to the watch at
//! once, with the record's place, once for every copy failed.
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

/// Told when a message of an [`AckGroup`] is failed.
pub trait FailureWatch: Send + Sync {
    /// The message at `place` was not delivered, for `reason`. Told once for every copy
    /// failed (a message failed twice, or two of its copies, is told twice), from whatever
    /// thread failed it: an implementation must only record the fact.
    fn failed(&self, place: u64, reason: &str);

    /// Every copy of the messages at the `count` places from `first` is gone (each was
    /// delivered, dropped or failed, and its failures told): told once per group made with
    /// [`AckGroup::spanning`], from whatever thread dropped its last token. An input that
    /// must name what is still on its way when it gives up (a stop whose grace period ran
    /// out) hears here what no longer is.
    fn finished(&self, _first: u64, _count: u64) {}
}

/// A watch that records each failure it is told, in order (tests).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct FailuresSeen(pub(crate) Mutex<Vec<(u64, String)>>);

#[cfg(test)]
impl FailureWatch for FailuresSeen {
    fn failed(&self, place: u64, reason: &str) {
        self.0.lock().unwrap().push((place, reason.to_string()));
    }
}

/// Consecutive places (an input's line numbers, from `first`) whose messages are tracked
/// for their failures only (see the module comment). Its tokens ([`AckGroup::token`])
/// report a failure to the watch at once, with their place; they have no tracker, tag,
/// delivered state or acceptance.
///
/// A group takes a cache line of its own: the input's thread counts the tokens of the
/// batch it is building in one group while another thread drops those of an earlier batch
/// in the group made just before it, which would otherwise share the line.
#[repr(align(64))]
pub struct AckGroup {
    first: u64,
    /// How many places it covers, told to the watch when its last token is gone (0: not
    /// told).
    span: u32,
    watch: Arc<dyn FailureWatch>,
}

impl std::fmt::Debug for AckGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckGroup")
            .field("first", &self.first)
            .finish()
    }
}

impl AckGroup {
    /// A group whose places start at `first`, telling `watch` of failures.
    pub fn new(first: u64, watch: Arc<dyn FailureWatch>) -> Arc<AckGroup> {
        AckGroup::spanning(first, 0, watch)
    }

    /// A group of the `span` places from `first`, telling `watch` of failures and, once
    /// its last token is gone, that they are finished ([`FailureWatch::finished`]; not
    /// told when `span` is 0).
    pub fn spanning(first: u64, span: u32, watch: Arc<dyn FailureWatch>) -> Arc<AckGroup> {
        Arc::new(AckGroup { first, span, watch })
    }

    /// The token of the message at `place`; `None` when `place` is before the group's
    /// first or more than `u32::MAX` after it (a new group is then needed).
    pub fn token(self: &Arc<Self>, place: u64) -> Option<AckToken> {
        let offset = u32::try_from(place.checked_sub(self.first)?).ok()?;
        Some(self.token_at(offset))
    }

    /// The token of the message `offset` places after the group's first.
    pub fn token_at(self: &Arc<Self>, offset: u32) -> AckToken {
        AckToken(Reporter::Group(self.clone(), offset))
    }
}

impl Drop for AckGroup {
    fn drop(&mut self) {
        // Every token holds the group: the last one is gone.
        if self.span > 0 {
            self.watch.finished(self.first, u64::from(self.span));
        }
    }
}

/// The message's side: cloned with the message; the tracker is done when the last clone drops.
///
/// A tracker's token counts itself in its tracker's `tokens` (apart from the tracker's
/// reference count, which the creator's handle also holds), so tokens and tracker are one
/// allocation. A group's token is the group and the message's place in it.
#[derive(Debug)]
pub struct AckToken(Reporter);

/// Whom a token reports to.
#[derive(Debug)]
enum Reporter {
    Tracker(Arc<AckTracker>),
    /// A group, and the place's offset from the group's first.
    Group(Arc<AckGroup>, u32),
}

impl Clone for AckToken {
    fn clone(&self) -> Self {
        match &self.0 {
            Reporter::Tracker(t) => {
                // Relaxed, as a reference count's increment: the new token is made from a
                // live one.
                t.tokens.fetch_add(1, Ordering::Relaxed);
                AckToken(Reporter::Tracker(t.clone()))
            }
            Reporter::Group(g, offset) => AckToken(Reporter::Group(g.clone(), *offset)),
        }
    }
}

impl Drop for AckToken {
    fn drop(&mut self) {
        let Reporter::Tracker(t) = &self.0 else {
            return;
        };
        // AcqRel, as a reference count's last decrement: whoever sees the last token go sees
        // every failure marked through the others.
        if t.tokens.fetch_sub(1, Ordering::AcqRel) == 1 {
            t.done.store(true, Ordering::Release);
            if let Some(w) = &t.watch {
                w.done(t);
            }
        }
    }
}

impl AckToken {
    /// The first token of a tracker that has none yet.
    fn first(tracker: Arc<AckTracker>) -> AckToken {
        tracker.tokens.store(1, Ordering::Relaxed);
        AckToken(Reporter::Tracker(tracker))
    }

    /// Marks the tracked message as not delivered.
    pub fn fail(&self, reason: &str) {
        self.mark_failed(reason, false);
    }

    /// Marks the tracked message as not known to be delivered: the destination answered
    /// with an error after the request may have been applied.
    pub fn fail_uncertain(&self, reason: &str) {
        self.mark_failed(reason, true);
    }

    fn mark_failed(&self, reason: &str, uncertain: bool) {
        match &self.0 {
            Reporter::Tracker(t) => mark_failed(t, reason, uncertain),
            Reporter::Group(g, offset) => g.watch.failed(g.first + u64::from(*offset), reason),
        }
    }

    /// Records that a destination may have applied the message although it answered with
    /// an error, without failing it (a retry may still deliver it): should the message end
    /// up failed, the failure is uncertain. (A group's token keeps no such state.)
    pub fn mark_uncertain(&self) {
        if let Reporter::Tracker(t) = &self.0 {
            t.uncertain.store(true, Ordering::Release);
        }
    }

    /// Records that a destination accepted this copy (a send delivered it; see
    /// [`AckTracker::accepted`]). (A group's token keeps no such state.)
    pub fn mark_accepted(&self) {
        if let Reporter::Tracker(t) = &self.0 {
            t.accepted.store(true, Ordering::Release);
        }
    }

    /// The identity of the tracker this token reports to (see [`AckTracker::id`]); `None`
    /// for a group's token.
    pub fn tracker_id(&self) -> Option<usize> {
        match &self.0 {
            Reporter::Tracker(t) => Some(Arc::as_ptr(t) as usize),
            Reporter::Group(..) => None,
        }
    }

    /// Whether this token reports to `tracker`.
    pub fn reports_to(&self, tracker: &Arc<AckTracker>) -> bool {
        matches!(&self.0, Reporter::Tracker(t) if Arc::ptr_eq(t, tracker))
    }

    /// The tag of the tracker this token reports to, when it is a `T`.
    pub fn tag<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        // The type first: looking for a lock's tag among a line's tokens (a send does, per
        // message) then costs no reference count.
        let Reporter::Tracker(t) = &self.0 else {
            return None;
        };
        let tag = t.tag.as_ref()?;
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
    fn a_groups_tokens_tell_each_failed_copy_with_its_place_on_any_thread() {
        let seen = Arc::new(FailuresSeen::default());
        let group = AckGroup::new(7, seen.clone());
        assert!(group.token(6).is_none(), "before the first place");
        assert!(group.token(7 + (1 << 32)).is_none(), "past a u32 offset");
        let last = group.token(7 + u64::from(u32::MAX)).unwrap();
        let tokens: Vec<AckToken> = (7..12).map(|p| group.token(p).unwrap()).collect();
        // Dropping, copying, accepting and marking uncertain tell nothing.
        let copies: Vec<AckToken> = tokens.iter().map(AckToken::clone).collect();
        for t in &copies {
            t.mark_accepted();
            t.mark_uncertain();
        }
        drop(copies);
        assert!(seen.0.lock().unwrap().is_empty());
        let threads: Vec<_> = tokens
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                std::thread::spawn(move || match i {
                    1 => t.fail("refused"),
                    3 => {
                        t.clone().fail_uncertain("timed out");
                        t.fail("again");
                    }
                    _ => {}
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        last.fail("far");
        let mut got = seen.0.lock().unwrap().clone();
        got.sort();
        let want = [
            (8, "refused"),
            (10, "again"),
            (10, "timed out"),
            (7 + u64::from(u32::MAX), "far"),
        ];
        assert_eq!(
            got,
            want.map(|(p, r)| (p, r.to_string())).to_vec(),
            "every failed copy, with its place"
        );
        assert_eq!(last.tracker_id(), None);
        let (tracker, token) = AckTracker::new();
        assert!(!last.reports_to(&tracker));
        assert!(last.tag::<String>().is_none());
        assert_eq!(token.tracker_id(), Some(tracker.id()));
        // The group lives while a token does.
        drop(group);
        last.fail("after its maker let go");
        assert_eq!(seen.0.lock().unwrap().len(), 5);
    }

    #[test]
    fn a_spanning_group_tells_once_that_its_places_are_finished_when_its_last_token_goes() {
        #[derive(Default)]
        struct Finished(Mutex<Vec<(u64, u64)>>);
        impl FailureWatch for Finished {
            fn failed(&self, _: u64, _: &str) {}
            fn finished(&self, first: u64, count: u64) {
                self.0.lock().unwrap().push((first, count));
            }
        }
        let seen = Arc::new(Finished::default());
        let group = AckGroup::spanning(10, 3, seen.clone());
        let tokens: Vec<AckToken> = (0..3).map(|o| group.token_at(o)).collect();
        drop(group);
        let copy = tokens[1].clone();
        tokens[2].fail("refused");
        drop(tokens);
        assert!(seen.0.lock().unwrap().is_empty(), "a copy is still held");
        std::thread::spawn(move || drop(copy)).join().unwrap();
        assert_eq!(*seen.0.lock().unwrap(), [(10, 3)]);
        // A group made with `new` never tells.
        drop(AckGroup::new(1, seen.clone()).token_at(0));
        assert_eq!(seen.0.lock().unwrap().len(), 1);
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
