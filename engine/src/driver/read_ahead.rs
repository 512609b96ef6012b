//! The bound on what a reader reads ahead of the pipeline ([`ReadAhead`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// A bound on the bytes of input read and not yet through the pipeline, shared by a reader
/// thread and [`drive_bounded`](super::drive_bounded).
///
/// The reader calls [`ReadAhead::wait`] before it reads a message and [`ReadAhead::add`]
/// with the message's data length once it has; the driver calls [`ReadAhead::release`] with
/// the data lengths of a batch once the pipeline has applied it. So what is read ahead stays
/// under the limit plus one message (a message larger than the limit is still read, alone).
/// What stateful transforms keep after a batch (a send's open batch, an aggregate) is
/// bounded by their own batch settings, not by this.
#[derive(Debug)]
pub struct ReadAhead {
    limit: usize,
    held: AtomicUsize,
    closed: AtomicBool,
    stopping: AtomicBool,
    lock: Mutex<()>,
    freed: Condvar,
}

impl ReadAhead {
    /// A bound of `limit` bytes (at least 1).
    pub fn new(limit: usize) -> ReadAhead {
        ReadAhead {
            limit: limit.max(1),
            held: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            lock: Mutex::new(()),
            freed: Condvar::new(),
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The bytes read and not yet released.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether the limit is reached (a reader then hands on the batch it is building, whose
    /// bytes count too, before it [waits](ReadAhead::wait)).
    pub fn is_full(&self) -> bool {
        self.held() >= self.limit
    }

    /// Blocks the calling (reader) thread while the limit is reached. `false` once the
    /// bound was closed: the driver stopped, and nothing more should be read. It returns
    /// `true` at once when the reader was told to stop ([`ReadAhead::is_stopping`]), which
    /// the reader looks at next.
    ///
    /// Whatever the reader counted must have been handed to the driver before it waits, or
    /// nothing would ever be released.
    pub fn wait(&self) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        if self.held() < self.limit || self.is_stopping() {
            return true;
        }
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            if self.held() < self.limit || self.is_stopping() {
                return true;
            }
            guard = self.freed.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Tells the reader to stop reading (a stop asked for by a signal): it hands on what it
    /// has read and reads no more, and the driver finishes that as at the end of input. A
    /// reader waiting on the bound wakes.
    pub fn stop_reading(&self) {
        self.stopping.store(true, Ordering::Release);
        self.notify();
    }

    /// Whether the reader was told to stop ([`ReadAhead::stop_reading`]).
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Counts `bytes` more as read.
    pub fn add(&self, bytes: usize) {
        self.held.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Gives `bytes` back (what [`ReadAhead::add`] counted) and wakes the reader.
    pub fn release(&self, bytes: usize) {
        // Saturating: a caller's miscount must not wrap into a bound that never frees.
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                Some(h.saturating_sub(bytes))
            });
        self.notify();
    }

    /// Stops the reader: [`ReadAhead::wait`] returns `false` from now on.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify();
    }

    fn notify(&self) {
        // Taking the lock orders this wake-up after a waiter's check of `held`.
        drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()));
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_reader_waiting_on_a_full_bound_wakes_when_told_to_stop_reading() {
        let ra = Arc::new(ReadAhead::new(10));
        ra.add(10);
        let r = ra.clone();
        let waiter = std::thread::spawn(move || (r.wait(), r.is_stopping()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "waits while full");
        ra.stop_reading();
        assert_eq!(waiter.join().unwrap(), (true, true), "goes on, to stop");
        assert!(ra.wait(), "never waits again");
        ra.close();
        assert!(!ra.wait(), "closed still wins");
    }

    #[test]
    fn a_waiting_reader_wakes_when_bytes_are_released_or_the_bound_closes() {
        let ra = Arc::new(ReadAhead::new(10));
        assert!(ra.wait());
        ra.add(10);
        assert!(ra.is_full());
        let r = ra.clone();
        let waiter = std::thread::spawn(move || r.wait());
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "waits while full");
        ra.release(1);
        assert!(waiter.join().unwrap());
        ra.add(1);
        let r = ra.clone();
        let waiter = std::thread::spawn(move || r.wait());
        std::thread::sleep(Duration::from_millis(50));
        ra.close();
        assert!(!waiter.join().unwrap());
        // A miscount never wraps around.
        ra.release(1000);
        assert_eq!(ra.held(), 0);
    }
}
