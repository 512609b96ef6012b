//! Stopping the reader thread part way (a signal): it hands on the lines it has read and
//! reads no more.
//!
//! The reader looks at the stop between lines ([`ReadAhead::is_stopping`], which also wakes
//! it when it waits on the read-ahead bound). A read of a pipe or a terminal can wait for
//! ever (an idle producer), so such a source is read only once poll(2) says it has data or
//! the stop's pipe says to stop; a regular file never waits, and is read directly.
//!
//! The same wait hands on a batch when input pauses (`--flush-idle`): while lines read wait
//! for a checkpoint ([`StopReading::holding`]: the reader holds some, or handed some on
//! since the last checkpoint), a wait for more input lasts at most until the oldest of them
//! is that old, and then fails with [`is_idle`]'s error, on which the reader hands on what
//! it holds, follows it with a checkpoint ([`StopReading::checkpointed`]) and waits again.
//! So `tail -f app.log | sluice run` writes a line within the flush time wherever the batch
//! boundary fell (a burst that fills whole batches is held by the sends until a
//! checkpoint too), while a producer that never pauses still fills whole batches.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_engine::driver::ReadAhead;

/// Tells the reader thread to stop: the flag is the read-ahead bound's, and a pipe wakes
/// a reader waiting for input.
pub(crate) struct StopReading {
    read_ahead: Arc<ReadAhead>,
    wake_rx: OwnedFd,
    wake_tx: OwnedFd,
    /// `--flush-idle`: how old a held batch may get while the reader waits for input
    /// (`None`: it waits for a full batch or the end).
    flush_idle: Option<Duration>,
    /// What [`StopReading::holding`] was last told: since when (ms after `base`, plus one)
    /// lines read wait for a checkpoint; 0 when none does.
    holding_since: AtomicU64,
    /// The reader handed lines on since the last checkpoint ([`StopReading::handed_on`]):
    /// the sends may hold them, so they wait for one as much as lines the reader holds.
    handed: AtomicBool,
    base: Instant,
}

impl StopReading {
    /// A stop for the reader of `read_ahead`, handing on a held batch once it is
    /// `flush_idle` old and the reader would wait for input (see the module
    /// documentation; `None`: never).
    pub(crate) fn new(
        read_ahead: Arc<ReadAhead>,
        flush_idle: Option<Duration>,
    ) -> io::Result<Arc<StopReading>> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are open descriptors that nothing else owns.
        let (wake_rx, wake_tx) = unsafe {
            use std::os::fd::FromRawFd;
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        };
        Ok(Arc::new(StopReading {
            read_ahead,
            wake_rx,
            wake_tx,
            flush_idle,
            holding_since: AtomicU64::new(0),
            handed: AtomicBool::new(false),
            base: Instant::now(),
        }))
    }

    /// Tells whether the reader holds lines it could hand on now (a batch not empty), and
    /// whether its source's reads may fail with the idle error (`can_idle`: not a
    /// compressed source, whose decoder would not survive it); so whether a wait for input
    /// may end early: when it may, and it holds lines or handed some on since the last
    /// checkpoint ([`StopReading::handed_on`]).
    pub(super) fn holding(&self, can_idle: bool, holds: bool) {
        if self.flush_idle.is_none() {
            return;
        }
        let holds = can_idle && (holds || self.handed.load(Ordering::Relaxed));
        let since = self.holding_since.load(Ordering::Relaxed);
        if !holds {
            if since != 0 {
                self.holding_since.store(0, Ordering::Relaxed);
            }
        } else if since == 0 {
            let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
            self.holding_since.store(ms + 1, Ordering::Relaxed);
        }
    }

    /// The reader handed a batch of lines on: until the next checkpoint, the sends may
    /// hold them.
    pub(super) fn handed_on(&self) {
        if self.flush_idle.is_some() && !self.handed.load(Ordering::Relaxed) {
            self.handed.store(true, Ordering::Relaxed);
        }
    }

    /// The reader followed what it handed on with a checkpoint: nothing read waits for one.
    pub(super) fn checkpointed(&self) {
        self.handed.store(false, Ordering::Relaxed);
        self.holding_since.store(0, Ordering::Relaxed);
    }

    /// Whether lines were handed on since the last checkpoint.
    pub(super) fn handed_since_checkpoint(&self) -> bool {
        self.handed.load(Ordering::Relaxed)
    }

    /// How long poll(2) may wait for input, in ms (-1: for ever).
    fn wait_ms(&self) -> i32 {
        let since = self.holding_since.load(Ordering::Relaxed);
        match self.flush_idle {
            Some(after) if since != 0 => {
                let due = Duration::from_millis(since - 1) + after;
                let left = due.saturating_sub(self.base.elapsed());
                i32::try_from(left.as_millis()).unwrap_or(i32::MAX)
            }
            _ => -1,
        }
    }

    /// Stops the reader (at once if it waits for input or on the bound).
    pub(crate) fn request(&self) {
        self.read_ahead.stop_reading();
        // The pipe stays readable from now on; a full pipe is already readable.
        // SAFETY: writes one byte from a live buffer to a descriptor we own.
        let _ = unsafe { libc::write(self.wake_tx.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }

    /// Whether the reader was told to stop.
    pub(crate) fn is_requested(&self) -> bool {
        self.read_ahead.is_stopping()
    }

    /// `file` read so that a stop interrupts a wait for its input: a pipe, terminal or
    /// socket is read once poll(2) says it has something (or has ended); a regular file
    /// directly.
    pub(crate) fn reader(self: &Arc<Self>, file: File) -> io::Result<Box<dyn Read + Send>> {
        if file.metadata()?.is_file() {
            return Ok(Box::new(file));
        }
        Ok(Box::new(Interruptible {
            file,
            stop: self.clone(),
        }))
    }
}

/// A source read only when poll(2) says it has something, or fails once the stop is asked.
struct Interruptible {
    file: File,
    stop: Arc<StopReading>,
}

impl Read for Interruptible {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.stop.is_requested() {
                return Err(stopped());
            }
            let mut fds = [
                libc::pollfd {
                    fd: self.file.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.stop.wake_rx.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let wait = self.stop.wait_ms();
            // SAFETY: two valid pollfd entries, waiting `wait` ms at most (-1: no limit).
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                // Nothing came while lines waited for a checkpoint: the reader hands on
                // what it holds and checkpoints.
                self.stop.holding_since.store(0, Ordering::Relaxed);
                return Err(io::Error::new(io::ErrorKind::WouldBlock, Idle));
            }
            if fds[1].revents != 0 {
                return Err(stopped());
            }
            if fds[0].revents != 0 {
                // Data, its end (POLLHUP) or an error: the read says which (a descriptor
                // someone made non-blocking may still have nothing: wait again).
                match self.file.read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    r => return r,
                }
            }
        }
    }
}

/// What a read that waited `--flush-idle` for input fails with.
#[derive(Debug)]
struct Idle;

impl std::fmt::Display for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no input for the flush time")
    }
}

impl std::error::Error for Idle {}

/// Whether `e` is a read's report that input paused while the reader held lines (see the
/// module documentation): not a failure.
pub(super) fn is_idle(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Idle>())
}

/// The error a read of a stopped source fails with (the reader sees the stop and ends
/// without it).
fn stopped() -> io::Error {
    io::Error::other("reading stopped")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    #[test]
    fn a_read_waiting_on_an_idle_pipe_ends_when_told_to_stop() {
        let (rx, mut tx) = std::io::pipe().unwrap();
        let stop = StopReading::new(Arc::new(ReadAhead::new(1 << 20)), None).unwrap();
        let mut reader = stop.reader(File::from(OwnedFd::from(rx))).unwrap();
        tx.write_all(b"a\n").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            reader.read(&mut buf).unwrap(),
            2,
            "data is read as it comes"
        );
        let s = stop.clone();
        let waiting = std::thread::spawn(move || {
            let started = Instant::now();
            (reader.read(&mut buf), started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!waiting.is_finished(), "waits for input");
        s.request();
        let (read, waited) = waiting.join().unwrap();
        assert_eq!(read.unwrap_err().to_string(), "reading stopped");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        assert!(stop.is_requested());
        drop(tx);
    }

    #[test]
    fn a_regular_file_is_read_directly_and_an_ended_pipe_reads_its_end() {
        let stop = StopReading::new(Arc::new(ReadAhead::new(1 << 20)), None).unwrap();
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"xyz").unwrap();
        use std::io::Seek;
        f.rewind().unwrap();
        let mut s = String::new();
        stop.reader(f).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "xyz");
        let (rx, mut tx) = std::io::pipe().unwrap();
        tx.write_all(b"end").unwrap();
        drop(tx);
        let mut s = String::new();
        let mut r = stop.reader(File::from(OwnedFd::from(rx))).unwrap();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(s, "end");
    }
}
