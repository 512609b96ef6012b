//! The local input adapter: reads stdin or files, one message per line.
//!
//! Reading happens on its own thread and hands the pipeline bounded batches of messages
//! through a bounded channel, so memory stays flat however long the input is. Lines are
//! cut out of large read buffers without copying (each message's data shares the buffer).
//! Compressed input (gzip, bzip2, Zstandard, framed Snappy) is detected by its magic bytes
//! and decompressed (`sluice_cmd::compression`); a truncated stream is an error naming the
//! file and the format. A line longer than the limit is an error naming the file and line.
//!
//! Every line's message carries an acknowledgement token of its own ([`LineReport`]), so
//! that a line whose messages were not all delivered (one that failed on its own, such as
//! a message without a lock key, or everything unfinished when the run failed) is named at
//! the end, by file and line, instead of disappearing.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sluice_engine::Message;
use sluice_engine::ack::{AckStatus, AckTag, AckTracker, AckWatch};
use tokio::sync::mpsc;

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
    /// Bytes of lines per batch: a batch is handed on when it holds this much, whatever
    /// its count, so read-ahead is bounded in bytes for large lines too.
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

const CHUNK: usize = 256 * 1024;

/// Where a line came from: the tag of its tracker.
struct LinePlace {
    source: Arc<str>,
    /// The source's position in the argument list (for ordering the report).
    source_index: usize,
    line: u64,
}

/// A line whose messages were not all delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undelivered {
    /// The file (or `<stdin>`).
    pub source: Arc<str>,
    /// Its position among the inputs.
    pub source_index: usize,
    /// The line number, from 1.
    pub line: u64,
    /// Why, as the transform that failed it said.
    pub reason: String,
}

/// The lines that were not delivered, told by the trackers of every line as they finish
/// (a watch that only records, so memory grows with the failures, not with the input).
#[derive(Default)]
pub struct LineReport {
    failed: Mutex<Vec<Undelivered>>,
}

impl AckWatch for LineReport {
    fn done(&self, tracker: &Arc<AckTracker>) {
        if tracker.status() != AckStatus::Failed {
            return;
        }
        let Some(place) = tracker.tag().and_then(|t| t.downcast_ref::<LinePlace>()) else {
            return;
        };
        let reason = tracker
            .failure_reason()
            .unwrap_or_else(|| "not delivered".into());
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Undelivered {
                source: place.source.clone(),
                source_index: place.source_index,
                line: place.line,
                reason,
            });
    }
}

impl LineReport {
    /// The undelivered lines so far, in input order.
    pub fn undelivered(&self) -> Vec<Undelivered> {
        let mut v = self
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        v.sort_by_key(|u| (u.source_index, u.line));
        v
    }
}

/// Reads every source in order and sends batches of messages until done or the receiver
/// goes away. Runs on a blocking thread.
pub fn read_all(
    sources: &[Source],
    opts: ReadOptions,
    report: &Arc<LineReport>,
    tx: &mpsc::Sender<Vec<Message>>,
) -> Result<(), InputError> {
    for (source_index, src) in sources.iter().enumerate() {
        let name = src.name();
        let lines = Lines {
            source: name.as_str().into(),
            source_index,
            report: report.clone(),
        };
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
        if !split_lines(stream, &lines, opts, tx)? {
            return Ok(());
        }
    }
    Ok(())
}

/// Where the lines being split come from, and who hears of their fate.
struct Lines {
    source: Arc<str>,
    source_index: usize,
    report: Arc<LineReport>,
}

impl Lines {
    fn message(&self, line: u64, data: Vec<u8>) -> Message {
        let place: AckTag = Arc::new(LinePlace {
            source: self.source.clone(),
            source_index: self.source_index,
            line,
        });
        let (_, token) =
            AckTracker::watched(Some(place), Some(self.report.clone() as Arc<dyn AckWatch>));
        let mut m = Message::new(Bytes::from(data));
        m.add_ack(token);
        m
    }
}

/// Splits a stream into line messages; `false` when the receiver went away.
///
/// Each line gets its own allocation, sized from the previous line, and the read buffer is
/// reused: sharing large read buffers between messages would make every buffer fresh
/// memory, and the kernel's page zeroing then costs more than copying the lines.
fn split_lines(
    r: impl Read,
    lines: &Lines,
    opts: ReadOptions,
    tx: &mpsc::Sender<Vec<Message>>,
) -> Result<bool, InputError> {
    let name = &*lines.source;
    let mut reader = BufReader::with_capacity(CHUNK, r);
    let mut batch = Vec::with_capacity(opts.batch_messages);
    let mut batch_bytes = 0usize;
    let mut line_no: u64 = 0;
    let mut hint = 512usize;
    // Read at most the limit plus a CRLF, so a huge line is never held whole.
    let bound = opts.max_line_bytes.saturating_add(2) as u64;
    loop {
        let mut line = Vec::with_capacity(hint);
        let n = (&mut reader)
            .take(bound)
            .read_until(b'\n', &mut line)
            .map_err(|error| InputError::Io {
                source_name: name.to_string(),
                error,
            })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let ended = line.last() == Some(&b'\n');
        if ended {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.len() > opts.max_line_bytes || (!ended && n as u64 == bound) {
            return Err(InputError::LineTooLong {
                source_name: name.to_string(),
                line: line_no,
                limit: opts.max_line_bytes,
            });
        }
        hint = (line.len() + line.len() / 4 + 16).clamp(64, 64 * 1024);
        batch_bytes += line.len();
        batch.push(lines.message(line_no, line));
        if batch.len() >= opts.batch_messages || batch_bytes >= opts.batch_bytes {
            batch_bytes = 0;
            if !send(tx, &mut batch, opts) {
                return Ok(false);
            }
        }
    }
    if !batch.is_empty() {
        return Ok(send(tx, &mut batch, opts));
    }
    Ok(true)
}

fn send(tx: &mpsc::Sender<Vec<Message>>, batch: &mut Vec<Message>, opts: ReadOptions) -> bool {
    let full = std::mem::replace(batch, Vec::with_capacity(opts.batch_messages));
    tx.blocking_send(full).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(name: &str) -> Lines {
        Lines {
            source: name.into(),
            source_index: 0,
            report: Arc::default(),
        }
    }

    fn collect(data: &[u8], opts: ReadOptions) -> Result<Vec<String>, InputError> {
        let (tx, mut rx) = mpsc::channel(1024);
        split_lines(data, &lines("test"), opts, &tx)?;
        drop(tx);
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.extend(
                b.into_iter()
                    .map(|m| String::from_utf8_lossy(m.data()).into_owned()),
            );
        }
        Ok(out)
    }

    const OPTS: ReadOptions = ReadOptions {
        batch_messages: 2,
        batch_bytes: 1 << 20,
        max_line_bytes: 16,
    };

    /// The sizes of the batches `data` is cut into.
    fn batch_sizes(data: &[u8], opts: ReadOptions) -> Vec<usize> {
        let (tx, mut rx) = mpsc::channel(1024);
        split_lines(data, &lines("test"), opts, &tx).unwrap();
        drop(tx);
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.push(b.len());
        }
        out
    }

    #[test]
    fn a_batch_closes_at_its_count_or_its_bytes() {
        let opts = |batch_messages, batch_bytes| ReadOptions {
            batch_messages,
            batch_bytes,
            max_line_bytes: 1 << 20,
        };
        let ten_lines_of_100: Vec<u8> = (0..10)
            .flat_map(|_| {
                let mut l = vec![b'x'; 100];
                l.push(b'\n');
                l
            })
            .collect();
        // (messages, bytes) -> batch sizes
        let table: &[(usize, usize, &[usize])] = &[
            (4, 1 << 20, &[4, 4, 2]),
            (1024, 250, &[3, 3, 3, 1]),
            (1024, 100, &[1; 10]),
            (2, 250, &[2, 2, 2, 2, 2]),
            (1024, 1 << 20, &[10]),
        ];
        for &(messages, bytes, want) in table {
            assert_eq!(
                batch_sizes(&ten_lines_of_100, opts(messages, bytes)),
                want,
                "{messages} messages, {bytes} bytes"
            );
        }
    }

    #[test]
    fn lines_table() {
        let cases: &[(&[u8], &[&str])] = &[
            (b"a\nb\nc\n", &["a", "b", "c"]),
            (b"a\nb", &["a", "b"]),
            (b"a\r\nb\r\n", &["a", "b"]),
            (b"\n\n", &["", ""]),
            (b"", &[]),
            (b"\xff\xfe\n", &["\u{fffd}\u{fffd}"]),
        ];
        for (input, want) in cases {
            assert_eq!(collect(input, OPTS).unwrap(), *want, "{input:?}");
        }
    }

    #[test]
    fn long_lines_are_errors_with_their_line_number() {
        let e = collect(b"ok\n0123456789abcdefXYZ\n", OPTS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "test:2: line is longer than 16 bytes (raise --max-line-bytes)"
        );
        let e = collect(b"0123456789abcdefXYZ", OPTS).unwrap_err();
        assert!(e.to_string().starts_with("test:1:"), "{e}");
    }

    #[test]
    fn lines_whose_messages_fail_are_reported_with_their_place() {
        let (tx, mut rx) = mpsc::channel(16);
        let report: Arc<LineReport> = Arc::default();
        let l = Lines {
            source: "in.jsonl".into(),
            source_index: 1,
            report: report.clone(),
        };
        split_lines(&b"a\nb\nc\n"[..], &l, OPTS, &tx).unwrap();
        drop(tx);
        let mut msgs = Vec::new();
        while let Ok(b) = rx.try_recv() {
            msgs.extend(b);
        }
        msgs[1].fail_acks("no key");
        drop(msgs);
        assert_eq!(
            report.undelivered(),
            vec![Undelivered {
                source: "in.jsonl".into(),
                source_index: 1,
                line: 2,
                reason: "no key".into()
            }]
        );
    }

    #[test]
    fn gzip_files_are_detected_and_truncation_reported() {
        let dir = std::env::temp_dir().join(format!("sluice-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"x\ny\n").unwrap();
        let gz = enc.finish().unwrap();
        let good = dir.join("good.gz");
        std::fs::write(&good, &gz).unwrap();
        let bad = dir.join("bad.gz");
        std::fs::write(&bad, &gz[..gz.len() - 6]).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let report = Arc::default();
        read_all(&[Source::File(good)], OPTS, &report, &tx).unwrap();
        let b = rx.try_recv().unwrap();
        assert_eq!(
            b.iter().map(|m| &m.data()[..]).collect::<Vec<_>>(),
            vec![b"x", b"y"]
        );
        let e = read_all(&[Source::File(bad.clone())], OPTS, &report, &tx).unwrap_err();
        assert!(e.to_string().contains("bad.gz"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
