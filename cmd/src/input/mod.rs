//! The local input adapter: reads stdin or files, one message per line.
//!
//! Reading happens on its own thread and hands the pipeline batches of messages, bounded in
//! lines and in bytes, through a bounded channel; what is read and not yet through the
//! pipeline is bounded in bytes too ([`ReadAhead`]), so memory stays flat however long the
//! input and its lines are. Lines are not copied here: a batch carries the part of the
//! read buffer they lie in, and each is copied into an allocation of its own size on the
//! worker that makes its message ([`BufferedLines`]), so this thread's work per line is
//! finding its end.
//! Compressed input (gzip, bzip2, Zstandard, framed Snappy) is detected by its magic bytes
//! and decompressed (`sluice_cmd::compression`); a truncated stream is an error naming the
//! file and the format. A line longer than the limit is an error naming the file and line.
//!
//! Every line's message carries an acknowledgement token naming its place ([`LineReport`]),
//! so that a line whose messages were not all delivered (one that failed on its own, such as
//! a message without a lock key, or everything unfinished when the run failed) is named at
//! the end, by file and line, instead of disappearing. The tokens of a batch's lines share
//! one [`sluice_engine::ack::AckGroup`]: one allocation per batch, not a tracker per line.

mod buffer;
mod report;

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;

use sluice_engine::driver::ReadAhead;
use sluice_engine::input::{BufferedLines, InputBatch};
use tokio::sync::mpsc;

use buffer::{BLOCK, Line, ReadBuffer};
use report::SourceWatch;
pub use report::{LineReport, Undelivered};

/// Where lines come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
}

impl Source {
    fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_string(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// How input is cut into batches.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Messages per batch handed to the pipeline.
    pub batch_messages: usize,
    /// Bytes of lines per batch: a batch is handed on before a line would take it past
    /// this, whatever its count (a longer line goes alone).
    pub batch_bytes: usize,
    /// Longest line accepted, in bytes.
    pub max_line_bytes: usize,
}

/// An input problem, with where it happened.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be opened or read.
    #[error("{source_name}: {error}")]
    Io {
        /// The file.
        source_name: String,
        /// What failed.
        error: io::Error,
    },
    /// A line is longer than the limit.
    #[error("{source_name}:{line}: line is longer than {limit} bytes (raise --max-line-bytes)")]
    LineTooLong {
        /// The file.
        source_name: String,
        /// The line number.
        line: u64,
        /// The limit.
        limit: usize,
    },
}

/// Reads every source in order and sends batches of messages until done or the receiver
/// goes away. Runs on a blocking thread. What is read counts against `read_ahead` until the
/// driver releases it ([`sluice_engine::driver::drive_bounded`]).
pub fn read_all(
    sources: &[Source],
    opts: ReadOptions,
    report: &Arc<LineReport>,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<(), InputError> {
    for (source_index, src) in sources.iter().enumerate() {
        let name = src.name();
        let lines = Lines::new(&name, source_index, report, opts.batch_messages);
        let io_err = |error: io::Error| InputError::Io {
            source_name: name.clone(),
            error,
        };
        let raw: Box<dyn Read> = match src {
            Source::Stdin => Box::new(io::stdin().lock()),
            Source::File(p) => Box::new(File::open(p).map_err(io_err)?),
        };
        let reader = BufReader::with_capacity(64 * 1024, raw);
        let (_, stream) = sluice_cmd::compression::decompressing(reader).map_err(io_err)?;
        if !split_lines(stream, &lines, opts, read_ahead, tx)? {
            return Ok(());
        }
    }
    Ok(())
}

/// Where a source's lines go: batches of [`BufferedLines`] whose failures its watch hears.
struct Lines {
    watch: Arc<SourceWatch>,
    /// Room made for lines in a new batch (`--batch-messages`, up to 1024).
    room: usize,
}

impl Lines {
    fn new(
        source: &str,
        source_index: usize,
        report: &Arc<LineReport>,
        batch_messages: usize,
    ) -> Lines {
        Lines {
            watch: Arc::new(SourceWatch {
                source: source.into(),
                source_index,
                report: report.clone(),
            }),
            room: batch_messages.min(1024),
        }
    }

    /// An empty batch whose first line is number `first`.
    fn batch(&self, first: u64) -> BufferedLines {
        BufferedLines::with_capacity(first, self.watch.clone(), self.room)
    }
}

/// Splits a stream into lines and hands them on in batches; `false` when the receiver
/// went away or the driver stopped.
///
/// A batch is handed on when it holds `batch_messages` lines, or before a line would take
/// it past `batch_bytes` (a longer line goes alone), and whenever `read_ahead` is full, so
/// that the driver can release what it counts; then the reader waits on it.
fn split_lines(
    r: impl Read,
    lines: &Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<bool, InputError> {
    split_buffered(ReadBuffer::new(r, BLOCK), lines, opts, read_ahead, tx)
}

/// [`split_lines`] from `reader`.
fn split_buffered(
    mut reader: ReadBuffer<impl Read>,
    lines: &Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<bool, InputError> {
    let name = lines.watch.source.clone();
    let name = &*name;
    let mut batch = lines.batch(1);
    let mut line_no: u64 = 0;
    // Read at most the limit plus a CRLF, so a huge line is never held whole.
    let bound = opts.max_line_bytes.saturating_add(2);
    loop {
        if read_ahead.is_full()
            && !batch.is_empty()
            && !send(tx, &mut batch, &mut reader, lines, None)
        {
            return Ok(false);
        }
        if !read_ahead.wait() {
            abandon(&mut batch, &mut reader, lines);
            return Ok(false);
        }
        let Some(Line {
            mut text,
            read,
            ended,
        }) = reader
            .next_line(bound, &mut batch)
            .map_err(|error| InputError::Io {
                source_name: name.to_string(),
                error,
            })?
        else {
            break;
        };
        line_no += 1;
        sluice_cmd::memory::message_read(read);
        if text.len() > opts.max_line_bytes || (!ended && read == bound) {
            return Err(InputError::LineTooLong {
                source_name: name.to_string(),
                line: line_no,
                limit: opts.max_line_bytes,
            });
        }
        if !batch.is_empty() && batch.bytes() + text.len() > opts.batch_bytes {
            // The batch ends before this line, which moves with the buffer's rest.
            if !send(tx, &mut batch, &mut reader, lines, Some(text.start)) {
                return Ok(false);
            }
            text = 0..text.len();
        }
        read_ahead.add(text.len());
        batch.push(text);
        if (batch.len() >= opts.batch_messages || batch.bytes() >= opts.batch_bytes)
            && !send(tx, &mut batch, &mut reader, lines, None)
        {
            return Ok(false);
        }
    }
    if !batch.is_empty() {
        return Ok(send(tx, &mut batch, &mut reader, lines, None));
    }
    Ok(true)
}

/// Hands on `batch`, its lines' part of the read buffer up to `at` (else to where the
/// next line starts), and starts the next batch; `false` when the receiver went away.
fn send(
    tx: &mpsc::Sender<InputBatch>,
    batch: &mut BufferedLines,
    reader: &mut ReadBuffer<impl Read>,
    lines: &Lines,
    at: Option<usize>,
) -> bool {
    match tx.blocking_send(take_read(batch, reader, lines, at)) {
        Ok(()) => true,
        Err(mpsc::error::SendError(unsent)) => {
            unsent.fail(STOPPED);
            false
        }
    }
}

/// Why lines read and never handed to the pipeline were not delivered: it stopped (after an
/// error, which the run reports) before it took them.
const STOPPED: &str = "not processed: the pipeline stopped at an error";

/// Fails the lines of `batch` (read, not handed on) when the pipeline stopped, so that they
/// are named as not delivered with the lines it had taken.
fn abandon(batch: &mut BufferedLines, reader: &mut ReadBuffer<impl Read>, lines: &Lines) {
    if !batch.is_empty() {
        take_read(batch, reader, lines, None).fail(STOPPED);
    }
}

/// Takes `batch` with its lines' part of the read buffer up to `at` (else to where the
/// next line starts), leaving the next batch in its place.
fn take_read(
    batch: &mut BufferedLines,
    reader: &mut ReadBuffer<impl Read>,
    lines: &Lines,
    at: Option<usize>,
) -> InputBatch {
    reader.seal(batch, at.unwrap_or(reader.next));
    std::mem::replace(batch, lines.batch(batch.next_line())).into()
}
#[cfg(test)]
mod tests;
