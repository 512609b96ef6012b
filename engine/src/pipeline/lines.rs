//! Lines written by the workers that made them, in input order.
//!
//! A pipeline that ends in a transform that only writes each data message's data as a line
//! (built with a [`LineSink`]: `send_stdout` without auxiliary transforms or a batch key), run by a caller that drops what comes out ([`Pipeline::discarding_outputs`]:
//! `sluice run`), does not hand its messages to that transform. Each chunk of a batch's lead
//! writes the data of what comes out of it, one line each, into one buffer on the worker
//! that made them, and frees the messages there, keeping only their acknowledgement tokens.
//! The chunks' buffers are then written to the stream in input order by whichever worker
//! holds the turn: a chunk finished before the one before it leaves its buffer waiting, and
//! the worker that writes a chunk goes on with every chunk after it that is waiting. With
//! one worker a batch is one chunk, written as soon as its lead is through.
//!
//! Why: the send ran on the driver's task, on either worker, so with two workers every
//! output made on one core was copied, written and freed on the other, and what the send
//! kept of each message (its bytes, its tokens) moved between cores with it. Measured on
//! the Zeek mapping (docs/notes/performance-zeek.md): two workers used 3%-13% more CPU per event
//! than one, most of it in that traffic (mimalloc's remote frees, cache misses on outputs
//! written by the other core), and a throwaway build whose chunks wrote their own outputs
//! took two workers from 1.74x to 1.91x one worker.
//!
//! What the send did still holds: the lines are written in input order, each once; a
//! message's tokens are marked accepted once its line was written and dropped after; a
//! write that fails fails that chunk's messages with the send's error (`transform <id>:
//! writing to standard output: ...`) and every chunk after it, written or not, is failed
//! with it; a chunk whose lead fails fails its own messages, after the chunks before it
//! were written. Data the send refuses ([`LineSink::check`]: over its batch size, against
//! its destination's rules) fails alone where the pipeline fails messages alone
//! ([`Pipeline::fail_alone`](super::Pipeline::fail_alone)), as the send refuses it alone
//! there: the message is named with the send's error and the chunk goes on; otherwise it
//! fails its chunk as a lead's error does. Ctrl messages in a batch are handed back to the
//! driver, which passes them to the transform once the batch's lines were written (some of
//! the next batches' may have been written by then: holding nothing, the transform only
//! passes them on). The transform's batches only ever decided when its lines were written:
//! here a chunk's lines are written as soon as the chunks before them are, never later.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt;

use crate::ack::AckToken;
use crate::error::TransformError;
use crate::input::InputBatch;
use crate::message::Message;
use crate::name::TransformName;
use crate::transform::LineSink;

use super::{Outputs, Step, run_segment, split};

/// The turn of the chunks of every batch whose lines one pipeline writes (see the module
/// comment).
pub(crate) struct LineWriter {
    /// The writing transform, for the layer of a write's error.
    name: TransformName,
    sink: Arc<dyn LineSink>,
    /// Data the sink refuses fails alone ([`LineWriter::fail_alone`]).
    alone: AtomicBool,
    turns: Mutex<Turns>,
    /// Line buffers of chunks written, for the next chunks (see [`Spare`]).
    spare: Mutex<Spare>,
}

/// Line buffers of written chunks, kept for the next chunks, up to [`SPARE_BYTES`] in all.
/// Over large lines a chunk's buffer is a large block (a megabyte for a line of 900 KB),
/// which the C library's `malloc` gives. Freed after each write, with the line and its
/// document freed before it, the free top of that heap passed its trim threshold: it was
/// given back to the kernel and grown again for the next line, every page zeroed anew
/// (three times the system time of writing through the send, which held each output until
/// the next was made). A buffer kept here stays in use where it was allocated, above the
/// line and document it was made after, and the next chunk takes it.
#[derive(Default)]
struct Spare {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

/// The most a [`LineWriter`] keeps of written chunks' line buffers.
const SPARE_BYTES: usize = 4 << 20;

struct Turns {
    /// The number the next chunk started gets.
    next: u64,
    /// The number of the chunk whose lines are written next.
    turn: u64,
    /// A worker holds the turn (it is writing, and writes whatever is waiting after it).
    writing: bool,
    /// Finished chunks not written yet, by number from `turn` (`None`: not finished yet).
    waiting: VecDeque<Option<Finished>>,
    /// Why a chunk failed, once one did: every later chunk is failed with it.
    failed: Option<Arc<str>>,
}

/// A chunk whose lead is done: its lines, or the error that stopped it.
struct Finished {
    lines: ChunkLines,
    result: Result<(), TransformError>,
    lead: Arc<LeadLines>,
}

impl LineWriter {
    pub(crate) fn new(name: TransformName, sink: Arc<dyn LineSink>) -> LineWriter {
        LineWriter {
            name,
            sink,
            alone: AtomicBool::new(false),
            turns: Mutex::new(Turns {
                next: 0,
                turn: 0,
                writing: false,
                waiting: VecDeque::new(),
                failed: None,
            }),
            spare: Mutex::default(),
        }
    }

    /// From now on nothing retries what the sink refuses (see the module documentation):
    /// a message whose data it refuses fails alone, and the chunk goes on.
    pub(crate) fn fail_alone(&self) {
        self.alone.store(true, Ordering::Relaxed);
    }

    /// A kept line buffer (empty), or a new one (unallocated).
    fn buffer(&self) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        let buffer = spare.buffers.pop().unwrap_or_default();
        spare.bytes -= buffer.capacity();
        buffer
    }

    /// Keeps a written chunk's line buffer for the next chunks, while there is room.
    fn keep(&self, mut buffer: Vec<u8>) {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if buffer.capacity() > 0 && spare.bytes + buffer.capacity() <= SPARE_BYTES {
            buffer.clear();
            spare.bytes += buffer.capacity();
            spare.buffers.push(buffer);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Splits `batch` into `chunks` parts and spawns a task taking each through the
    /// segment `steps` and writing its lines in its turn. The chunks are numbered now, so
    /// their turns follow the order the batches are started in.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        steps: &Arc<[Step]>,
        batch: InputBatch,
        chunks: usize,
    ) -> Arc<LeadLines> {
        let parts = split(batch, chunks);
        let lead = Arc::new(LeadLines::new(parts.len()));
        let first = {
            let mut t = self.lock();
            let first = t.next;
            t.next += parts.len() as u64;
            first
        };
        for (seq, part) in (first..).zip(parts) {
            let steps = steps.clone();
            let writer = self.clone();
            let lead = lead.clone();
            tokio::spawn(crate::invocation::carried(async move {
                let mut lines = ChunkLines::with_capacity_for(writer.clone(), part.len());
                let mut input = part.into_messages().into_iter();
                let ran = std::panic::AssertUnwindSafe(run_segment(&steps, &mut input, &mut lines))
                    .catch_unwind()
                    .await;
                let result = ran.unwrap_or_else(|panic| {
                    // The message the transform held is gone with it; those after it are
                    // failed here, what came out before it when its turn comes.
                    let e = TransformError::failed(format!(
                        "a worker stopped: a transform panicked: {}",
                        panic_text(&*panic)
                    ));
                    let reason = e.to_string();
                    input.for_each(|m| m.fail_acks(&reason));
                    Err(e)
                });
                lines.note_size();
                writer.finished(
                    seq,
                    Finished {
                        lines,
                        result,
                        lead,
                    },
                );
            }));
        }
        lead
    }

    /// Chunk `seq` is done with its lead: written now if it is its turn (with whatever
    /// waits after it), else left waiting for the worker that holds the turn.
    fn finished(&self, seq: u64, chunk: Finished) {
        let mut t = self.lock();
        if let Some(reason) = t.failed.clone() {
            drop(t);
            chunk.fail_after(&reason);
            return;
        }
        // An unfinished chunk's number is never before the turn (each chunk finishes once,
        // and the turn passes a chunk only once it has finished).
        debug_assert!(seq >= t.turn);
        let at = usize::try_from(seq.saturating_sub(t.turn)).unwrap_or(usize::MAX);
        if t.waiting.len() <= at {
            t.waiting.resize_with(at + 1, || None);
        }
        t.waiting[at] = Some(chunk);
        if t.writing || at != 0 {
            return;
        }
        t.writing = true;
        while let Some(chunk) = t.waiting.front_mut().and_then(Option::take) {
            // The front of `waiting` is the turn's chunk, so both move on together.
            t.waiting.pop_front();
            t.turn += 1;
            drop(t);
            let written = self.write(chunk);
            t = self.lock();
            if let Err(reason) = written {
                let waiting: Vec<Finished> = t.waiting.drain(..).flatten().collect();
                t.failed = Some(reason.clone());
                t.writing = false;
                drop(t);
                for chunk in waiting {
                    chunk.fail_after(&reason);
                }
                return;
            }
        }
        t.writing = false;
    }

    /// Writes one chunk's lines (the caller holds the turn); the reason when it failed,
    /// or when its lead had.
    fn write(&self, chunk: Finished) -> Result<(), Arc<str>> {
        let Finished {
            lines,
            result,
            lead,
        } = chunk;
        let error = match result {
            Ok(()) if lines.text.is_empty() => None,
            Ok(()) => self
                .sink
                .write_lines(&lines.text)
                .err()
                .map(|e| e.within(&self.name)),
            Err(e) => Some(e),
        };
        match error {
            None => {
                self.keep(lines.accepted(&lead));
                Ok(())
            }
            Some(e) => {
                let reason: Arc<str> = e.to_string().into();
                lines.failed(&lead, &reason, e);
                Err(reason)
            }
        }
    }
}

impl Finished {
    /// Fails the chunk, which comes after one that failed for `reason`: its messages for
    /// that reason, its batch with its own lead's error if it had one.
    fn fail_after(self, reason: &str) {
        let error = self
            .result
            .err()
            .unwrap_or_else(|| TransformError::failed(reason));
        self.lines.failed(&self.lead, reason, error);
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// What comes out of one chunk's lead: its data as lines, the tokens of the messages they
/// came from, and its ctrl messages.
pub(crate) struct ChunkLines {
    /// Whose lines they are: it says which data it refuses.
    writer: Arc<LineWriter>,
    text: Vec<u8>,
    /// The bytes `text` is allocated with at the first line.
    expected: usize,
    acks: Vec<AckToken>,
    lines: u64,
    ctrls: Vec<Message>,
}

thread_local! {
    /// The bytes of a line in the last chunk written on this thread: consecutive chunks
    /// are alike, so a chunk's buffer is allocated once at its size.
    static LINE_BYTES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl ChunkLines {
    /// An empty chunk, to hold `messages` lines the size of the last chunk's.
    ///
    /// Its line buffer is a kept one ([`Spare`]), or allocated at the first line, after
    /// that line's message and document (see [`Spare`] for why the order matters).
    fn with_capacity_for(writer: Arc<LineWriter>, messages: usize) -> ChunkLines {
        let bytes = LINE_BYTES.get().saturating_mul(messages);
        ChunkLines {
            text: writer.buffer(),
            writer,
            expected: bytes.saturating_add(bytes / 16),
            acks: Vec::with_capacity(messages),
            lines: 0,
            ctrls: Vec::new(),
        }
    }

    /// Notes the size of its lines for the next chunk on this thread.
    fn note_size(&self) {
        if let Some(per_line) = self.text.len().checked_div(self.lines as usize) {
            // At most 1 MiB a line: a chunk of one huge line says little of the next.
            LINE_BYTES.set(per_line.min(1 << 20));
        }
    }

    /// Its lines were not written: its messages fail for `reason`, its batch with `error`.
    fn failed(self, lead: &LeadLines, reason: &str, error: TransformError) {
        for t in &self.acks {
            t.fail(reason);
        }
        lead.settled(0, Vec::new(), Some(error));
    }

    /// Its lines were written: the tokens say so, and are dropped. Returns its line buffer.
    fn accepted(self, lead: &LeadLines) -> Vec<u8> {
        let ChunkLines {
            text,
            acks,
            lines,
            ctrls,
            ..
        } = self;
        for t in acks {
            t.mark_accepted();
        }
        lead.settled(lines, ctrls, None);
        text
    }
}

impl Outputs for ChunkLines {
    fn push(&mut self, mut msg: Message) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            self.ctrls.push(msg);
            return Ok(());
        }
        if self.lines == 0 {
            self.text.reserve(self.expected);
        }
        let start = self.text.len();
        msg.append_data_to(&mut self.text);
        if let Err(e) = self.writer.sink.check(&self.text[start..]) {
            self.text.truncate(start);
            let e = e.within(&self.writer.name);
            // Refused alone, as the send refuses it where nothing retries: the data can
            // never be written, which says nothing of the messages after it.
            let alone = self.writer.alone.load(Ordering::Relaxed)
                && !msg.acks().is_empty()
                && !e.ends_run();
            msg.fail_acks(&e.to_string());
            return if alone { Ok(()) } else { Err(e) };
        }
        self.text.push(b'\n');
        self.acks.extend(msg.take_acks());
        self.lines += 1;
        Ok(())
    }
}

/// One batch's chunks, whose lines a [`LineWriter`] writes: the driver waits on it for the
/// batch to be through.
pub(crate) struct LeadLines {
    state: Mutex<LeadState>,
    done: tokio::sync::Notify,
}

struct LeadState {
    /// Chunks not settled yet (written or failed).
    remaining: usize,
    /// Lines written.
    written: u64,
    ctrls: Vec<Message>,
    /// The first error of its chunks, in order.
    error: Option<TransformError>,
}

impl LeadLines {
    fn new(chunks: usize) -> LeadLines {
        LeadLines {
            state: Mutex::new(LeadState {
                remaining: chunks,
                written: 0,
                ctrls: Vec::new(),
                error: None,
            }),
            done: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LeadState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One chunk is settled (in order): `written` lines written, or failed with `error`.
    fn settled(&self, written: u64, ctrls: Vec<Message>, error: Option<TransformError>) {
        let mut st = self.lock();
        st.written += written;
        if st.error.is_none() {
            match error {
                Some(e) => st.error = Some(e),
                None => st.ctrls.extend(ctrls),
            }
        }
        st.remaining = st.remaining.saturating_sub(1);
        if st.remaining == 0 {
            drop(st);
            self.done.notify_one();
        }
    }

    /// Waits until every chunk of the batch is written or failed; returns the batch's
    /// ctrl messages and how many lines were written, or the first error.
    pub(crate) async fn finish(&self) -> Result<(Vec<Message>, u64), TransformError> {
        loop {
            {
                let mut st = self.lock();
                if st.remaining == 0 {
                    return match st.error.take() {
                        Some(e) => Err(e),
                        None => Ok((std::mem::take(&mut st.ctrls), st.written)),
                    };
                }
            }
            // `notify_one` keeps its wake-up for a waiter that comes after it.
            self.done.notified().await;
        }
    }
}

#[cfg(test)]
mod tests;
