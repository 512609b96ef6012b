//! The local input adapter: reads stdin, files or objects at URLs, one message per line.
//!
//! An input at a URL (`s3://BUCKET/KEY`, `gs://BUCKET/OBJECT`, `https://...`, as Substation's
//! `read` takes them) is downloaded, as it arrives, into an unnamed temporary file when
//! reading reaches it, and read from there like a file: memory stays flat however large the
//! object, the disk holds one object at a time, and a download that fails is an error
//! naming the URL before any of its lines is read.
//!
//! Reading happens on its own thread and hands the pipeline batches of messages, bounded in
//! lines and in bytes, through a bounded channel; what is read and not yet through the
//! pipeline is bounded in bytes too ([`ReadAhead`]), so memory stays flat however long the
//! input and its lines are. Lines are not copied here: a batch carries the part of the
//! read buffer they lie in ([`buffer`]), and each is copied into an allocation of its own
//! size on the worker that makes its message ([`BufferedLines`]), so this thread's work per
//! line is finding its end.
//! Compressed input (gzip, bzip2, Zstandard, framed Snappy) is detected by its magic bytes
//! and decompressed (`sluice_transforms::compression`); a truncated stream is an error
//! naming the file and the format. A line longer than the limit is an error naming the file
//! and line.
//!
//! Every line's message carries an acknowledgement token naming its place ([`LineReport`]),
//! so that a line whose messages were not all delivered (one that failed on its own, such as
//! a message without a lock key, or everything unfinished when the run failed) is named at
//! the end, by file and line, instead of disappearing. The tokens of a batch's lines share
//! one [`sluice_engine::ack::AckGroup`]: one allocation per batch, not a tracker per line.
//!
//! A stop ([`StopReading`], on a signal) ends reading between two lines: the lines read so
//! far are handed on, and the report says where reading stopped (the first line not read).
//!
//! A pipe or terminal that pauses (`--flush-idle`, the `stop` module) has its batch handed
//! on once the oldest line not yet followed by a checkpoint is that old and no more input
//! is ready, followed by a checkpoint ([`Message::checkpoint`]: a ctrl at a boundary
//! within the input), at which sends write what they hold and locks commit what was
//! delivered; messages waiting for a key another process holds go on waiting. A line of `tail -f app.log | sluice run` is out within about that time,
//! also when it ended a full batch (handed on at once, then held by a send).

mod buffer;
mod report;
mod stop;

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_engine::Message;
use sluice_engine::driver::ReadAhead;
use sluice_engine::input::{BufferedLines, InputBatch};
use tokio::sync::mpsc;

use buffer::{BLOCK, Line, ReadBuffer};
use report::SourceWatch;
pub(crate) use report::{LineReport, Undelivered};
pub(crate) use stop::StopReading;

/// Where lines come from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
    /// An object at a URL (`s3://`, `gs://`, `https://`).
    Url(String),
}

impl Source {
    /// `arg` (a command-line argument) as a source: a URL sluice reads, else a file.
    pub(crate) fn of_arg(arg: PathBuf) -> Source {
        match arg.to_str() {
            Some(url) if sluice_config::remote::is_url(url) => Source::Url(url.to_string()),
            _ => Source::File(arg),
        }
    }

    fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_string(),
            Source::File(p) => p.display().to_string(),
            Source::Url(u) => u.clone(),
        }
    }

    /// Opens it, read so that `stop` interrupts a wait for input.
    fn open(&self, stop: &Arc<StopReading>) -> io::Result<Box<dyn Read + Send>> {
        let file = match self {
            // A descriptor of its own, read without std's buffer (whose contents poll(2)
            // could not see).
            Source::Stdin => File::from(io::stdin().as_fd().try_clone_to_owned()?),
            Source::File(p) => File::open(p)?,
            Source::Url(url) => download(url)?,
        };
        stop.reader(file)
    }
}

/// `url` downloaded into an unnamed temporary file (see the module documentation), at its
/// start.
fn download(url: &str) -> io::Result<File> {
    use std::io::{Seek as _, Write as _};
    let fetcher =
        sluice_config::remote::Fetcher::new().map_err(|e| io::Error::other(format!("{e:#}")))?;
    let mut file = tempfile::tempfile()?;
    let mut out = io::BufWriter::with_capacity(1 << 20, &mut file);
    fetcher.download(url, &mut out).map_err(io::Error::other)?;
    out.flush()?;
    drop(out);
    file.rewind()?;
    Ok(file)
}

/// How input is cut into batches.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadOptions {
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
pub(crate) enum InputError {
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

/// Reads every source in order and sends batches of messages until done, the receiver
/// goes away, or `stop` is requested. Runs on a blocking thread. What is read counts
/// against `read_ahead` (`stop`'s bound) until the driver releases it
/// ([`sluice_engine::driver::drive_bounded`]). `report` learns where reading is.
pub(crate) fn read_all(
    sources: &[Source],
    opts: ReadOptions,
    report: &Arc<LineReport>,
    read_ahead: &ReadAhead,
    stop: &Arc<StopReading>,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<(), InputError> {
    for (source_index, src) in sources.iter().enumerate() {
        let name = src.name();
        let lines = Lines::new(&name, source_index, report, opts.batch_messages);
        report.reading(&lines.watch.source);
        if stop.is_requested() {
            return Ok(());
        }
        let io_err = |error: io::Error| InputError::Io {
            source_name: name.clone(),
            error,
        };
        let raw = src.open(stop).map_err(io_err)?;
        let reader = BufReader::with_capacity(64 * 1024, raw);
        let (codec, stream) = match sluice_transforms::compression::decompressing(reader) {
            Ok(found) => found,
            Err(_) if stop.is_requested() => return Ok(()),
            Err(e) => return Err(io_err(e)),
        };
        let read = ReadBuffer::new(stream, BLOCK);
        // A decoder would not survive a read that ends early: a compressed stream is read
        // in whole batches.
        let flush_idle = codec.is_none();
        if !split_buffered(read, &lines, opts, read_ahead, Some(stop), flush_idle, tx)? {
            return Ok(());
        }
    }
    report.read_to_the_end();
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
/// went away, the driver stopped, or reading was stopped.
///
/// A batch is handed on when it holds `batch_messages` lines, or before a line would take
/// it past `batch_bytes` (a longer line goes alone), and whenever `read_ahead` is full, so
/// that the driver can release what it counts; then the reader waits on it. With
/// `flush_idle`, a batch is also handed on when input pauses (`--flush-idle`: the `stop`
/// module's documentation). A stop hands on the lines read so far.
fn split_buffered(
    mut reader: ReadBuffer<impl Read>,
    lines: &Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    stop: Option<&StopReading>,
    flush_idle: bool,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<bool, InputError> {
    let name = lines.watch.source.clone();
    let name = &*name;
    let stopping = || stop.is_some_and(StopReading::is_requested);
    let mut batch = lines.batch(1);
    let mut line_no: u64 = 0;
    // Read at most the limit plus a CRLF, so a huge line is never held whole.
    let bound = opts.max_line_bytes.saturating_add(2);
    let stopped = loop {
        if read_ahead.is_full()
            && !batch.is_empty()
            && !send(tx, &mut batch, &mut reader, lines, None, stop)
        {
            return Ok(false);
        }
        if !read_ahead.wait() {
            abandon(&mut batch, &mut reader, lines);
            return Ok(false);
        }
        if stopping() {
            break true;
        }
        if let Some(stop) = stop {
            stop.holding(flush_idle, !batch.is_empty());
        }
        let Line {
            mut text,
            read,
            ended,
        } = match reader.next_line(bound, &mut batch) {
            Ok(Some(line)) => line,
            Ok(None) => break false,
            // A stopped read (or a decompressor's error about it) ends reading here.
            Err(_) if stopping() => break true,
            // Input paused while lines waited for a checkpoint (held here, or handed on in
            // full batches that the sends may hold): the batch goes on now, with a
            // checkpoint, so that every send writes what it holds and locks commit while the
            // source is idle. A checkpoint, not the ctrl that ends the input: a lock's
            // message whose key another process holds goes on waiting past it instead of
            // holding up the flush for its `pending_wait` at every pause.
            Err(e) if stop::is_idle(&e) => {
                if !batch.is_empty() && !send(tx, &mut batch, &mut reader, lines, None, stop) {
                    return Ok(false);
                }
                if let Some(stop) = stop.filter(|s| s.handed_since_checkpoint()) {
                    if tx
                        .blocking_send(InputBatch::from(vec![Message::checkpoint()]))
                        .is_err()
                    {
                        return Ok(false);
                    }
                    stop.checkpointed();
                }
                continue;
            }
            Err(error) => {
                return Err(InputError::Io {
                    source_name: name.to_string(),
                    error,
                });
            }
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
            if !send(tx, &mut batch, &mut reader, lines, Some(text.start), stop) {
                return Ok(false);
            }
            text = 0..text.len();
        }
        read_ahead.add(text.len());
        batch.push(text);
        if (batch.len() >= opts.batch_messages || batch.bytes() >= opts.batch_bytes)
            && !send(tx, &mut batch, &mut reader, lines, None, stop)
        {
            return Ok(false);
        }
    };
    if !batch.is_empty() && !send(tx, &mut batch, &mut reader, lines, None, stop) {
        return Ok(false);
    }
    Ok(!stopped)
}

/// Hands on `batch`, its lines' part of the read buffer up to `at` (else to where the
/// next line starts), and starts the next batch; `false` when the receiver went away.
/// `stop` learns that lines were handed on (they wait for the next checkpoint).
fn send(
    tx: &mpsc::Sender<InputBatch>,
    batch: &mut BufferedLines,
    reader: &mut ReadBuffer<impl Read>,
    lines: &Lines,
    at: Option<usize>,
    stop: Option<&StopReading>,
) -> bool {
    let first = batch.next_line() - batch.len() as u64;
    // Told before it is sent: the pipeline may finish its lines at once.
    let watch = &lines.watch;
    watch.report.handing_on(watch, first, batch.next_line());
    match tx.blocking_send(take_read(batch, reader, lines, at)) {
        Ok(()) => {
            if let Some(stop) = stop {
                stop.handed_on();
            }
            true
        }
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
        let first = batch.next_line() - batch.len() as u64;
        lines
            .watch
            .report
            .handing_on(&lines.watch, first, batch.next_line());
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
