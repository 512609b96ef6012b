//! The reader: lines and batches, read-ahead, stops, failures named by their place.

use super::*;
use std::io::Write;

/// [`split_buffered`] over `r` with read buffers of [`BLOCK`] bytes, never stopped.
fn split_lines(
    r: impl Read,
    lines: &Lines,
    opts: ReadOptions,
    read_ahead: &ReadAhead,
    tx: &mpsc::Sender<InputBatch>,
) -> Result<bool, InputError> {
    split_buffered(
        ReadBuffer::new(r, BLOCK),
        lines,
        opts,
        read_ahead,
        None,
        false,
        tx,
    )
}

fn unbounded() -> ReadAhead {
    ReadAhead::new(usize::MAX)
}

fn lines(name: &str) -> Lines {
    Lines::new(name, 0, &Arc::default(), 1024)
}

fn collect(data: &[u8], opts: ReadOptions) -> Result<Vec<String>, InputError> {
    collect_in(data, opts, BLOCK)
}

/// The lines read from `data` with read buffers of `block` bytes.
fn collect_in(data: &[u8], opts: ReadOptions, block: usize) -> Result<Vec<String>, InputError> {
    let (tx, mut rx) = mpsc::channel(1024);
    let reader = ReadBuffer::new(data, block);
    split_buffered(reader, &lines("test"), opts, &unbounded(), None, false, &tx)?;
    drop(tx);
    let mut out = Vec::new();
    while let Ok(b) = rx.try_recv() {
        out.extend(
            b.into_messages()
                .iter()
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
    split_lines(data, &lines("test"), opts, &unbounded(), &tx).unwrap();
    drop(tx);
    let mut out = Vec::new();
    while let Ok(b) = rx.try_recv() {
        out.push(b.len());
    }
    out
}

#[test]
fn a_batch_closes_at_its_count_or_before_its_bytes() {
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
    // (messages, bytes) -> batch sizes: a batch never holds more than its bytes, unless
    // one line is longer (it then goes alone).
    let table: &[(usize, usize, &[usize])] = &[
        (4, 1 << 20, &[4, 4, 2]),
        (1024, 250, &[2, 2, 2, 2, 2]),
        (1024, 300, &[3, 3, 3, 1]),
        (1024, 100, &[1; 10]),
        (1024, 99, &[1; 10]),
        (1, 250, &[1; 10]),
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
fn lines_are_the_same_whatever_the_read_buffers_and_batches() {
    // Lines within a buffer, cut by its end, longer than it, at the end, and batches
    // closed by count and by bytes (before a line, which moves with the buffer's rest).
    let long = "y".repeat(100);
    let input = format!("ab\n{long}\nc\r\n\n\r\nlast\r");
    let want = ["ab", long.as_str(), "c", "", "", "last"];
    for block in [1, 2, 3, 7, 8, 64, 101, 102, BLOCK] {
        for (messages, bytes) in [(1, 1 << 20), (2, 1 << 20), (1024, 3), (1024, 1 << 20)] {
            let opts = ReadOptions {
                batch_messages: messages,
                batch_bytes: bytes,
                max_line_bytes: 1000,
            };
            assert_eq!(
                collect_in(input.as_bytes(), opts, block).unwrap(),
                want,
                "block {block}, {messages} messages, {bytes} bytes"
            );
        }
    }
    // A `\r` within a line stays.
    assert_eq!(collect_in(b"a\rb\r", OPTS, 2).unwrap(), ["a\rb"]);
    // A line of exactly the limit, with its CRLF, across buffers; one byte more is an
    // error, even when its buffer holds less than the bound.
    let at_limit = format!("{}\r\n", "z".repeat(16));
    assert_eq!(
        collect_in(at_limit.as_bytes(), OPTS, 5).unwrap(),
        ["z".repeat(16)]
    );
    let over = format!("ok\n{}\r\n", "z".repeat(17));
    for block in [5, 64] {
        let e = collect_in(over.as_bytes(), OPTS, block).unwrap_err();
        assert!(e.to_string().starts_with("test:2: line is longer"), "{e}");
    }
}

/// A source that gives at most `most` bytes a read, and is interrupted before every
/// other read (as a pipe read by a signalled process is).
struct Trickle<'a> {
    data: &'a [u8],
    most: usize,
    interrupt: bool,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.most).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn short_and_interrupted_reads_give_the_same_lines() {
    let input = b"first\nsecond line\r\n\nthird\nlast";
    for most in [1, 2, 5, 64] {
        for block in [4, 16, BLOCK] {
            let (tx, mut rx) = mpsc::channel(1024);
            let source = Trickle {
                data: input,
                most,
                interrupt: false,
            };
            let opts = ReadOptions {
                batch_messages: 2,
                batch_bytes: 1 << 20,
                max_line_bytes: 100,
            };
            let reader = ReadBuffer::new(source, block);
            assert!(
                split_buffered(reader, &lines("test"), opts, &unbounded(), None, false, &tx)
                    .unwrap()
            );
            drop(tx);
            let mut got = Vec::new();
            while let Ok(b) = rx.try_recv() {
                for m in b.into_messages() {
                    got.push(String::from_utf8(m.data().to_vec()).unwrap());
                }
            }
            assert_eq!(
                got,
                ["first", "second line", "", "third", "last"],
                "{most} bytes a read, buffers of {block}"
            );
        }
    }
}

#[test]
fn a_full_read_ahead_hands_on_the_batch_being_built_and_waits() {
    let read_ahead = Arc::new(ReadAhead::new(250));
    let (tx, mut rx) = mpsc::channel(16);
    let ten_lines_of_100: Vec<u8> = (0..10)
        .flat_map(|_| {
            let mut l = vec![b'x'; 100];
            l.push(b'\n');
            l
        })
        .collect();
    let ra = read_ahead.clone();
    let reader = std::thread::spawn(move || {
        let opts = ReadOptions {
            batch_messages: 1024,
            batch_bytes: 1 << 20,
            max_line_bytes: 1 << 20,
        };
        split_lines(&ten_lines_of_100[..], &lines("test"), opts, &ra, &tx)
    });
    let mut sizes = Vec::new();
    while let Some(batch) = rx.blocking_recv() {
        // The limit, plus the line read when it was not reached yet.
        assert!(read_ahead.held() <= 249 + 100, "{}", read_ahead.held());
        sizes.push(batch.len());
        read_ahead.release(batch.data_bytes());
    }
    assert!(reader.join().unwrap().unwrap());
    assert_eq!(sizes, vec![3, 3, 3, 1]);
    // A closed bound stops the reader.
    read_ahead.close();
    let (tx, _rx) = mpsc::channel(16);
    assert!(!split_lines(&b"a\n"[..], &lines("test"), OPTS, &read_ahead, &tx).unwrap());
}

/// Lines read that the pipeline never took (it stopped) are named as not delivered:
/// a batch the driver no longer receives, and one in hand when the bound closes.
#[test]
fn lines_read_after_the_pipeline_stopped_are_named_not_delivered() {
    let named = |report: &LineReport| -> Vec<(u64, String)> {
        report
            .undelivered()
            .into_iter()
            .map(|u| (u.line, u.reason))
            .collect()
    };
    let report = Arc::new(LineReport::default());
    let (tx, rx) = mpsc::channel(16);
    drop(rx);
    let opts = ReadOptions {
        batch_messages: 2,
        ..OPTS
    };
    let read = split_lines(
        &b"a\nb\nc\n"[..],
        &Lines::new("in", 0, &report, 2),
        opts,
        &unbounded(),
        &tx,
    );
    assert!(!read.unwrap(), "stops");
    assert_eq!(
        named(&report),
        [(1, STOPPED.to_string()), (2, STOPPED.to_string())],
        "the batch it could not hand on (line 3 was never read)"
    );

    /// Closes the bound once its data is read.
    struct ClosesBound<'a>(&'a [u8], &'a ReadAhead);
    impl Read for ClosesBound<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.close();
            Ok(n)
        }
    }
    let report = Arc::new(LineReport::default());
    let bound = unbounded();
    let (tx, _rx) = mpsc::channel(16);
    let reader = ReadBuffer::new(ClosesBound(b"a\nb\n", &bound), BLOCK);
    let read = split_buffered(
        reader,
        &Lines::new("in", 0, &report, 2),
        OPTS,
        &bound,
        None,
        false,
        &tx,
    );
    assert!(!read.unwrap(), "stops");
    assert_eq!(
        named(&report),
        [(1, STOPPED.to_string())],
        "the line in hand"
    );
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
    let l = Lines::new("in.jsonl", 1, &report, OPTS.batch_messages);
    split_lines(&b"a\nb\nc\n"[..], &l, OPTS, &unbounded(), &tx).unwrap();
    drop(tx);
    let mut msgs = Vec::new();
    while let Ok(b) = rx.try_recv() {
        msgs.extend(b.into_messages());
    }
    // Two batches of two lines and one (OPTS), so two groups; line 3 is failed on a
    // copy, then again, and is named once with the first reason.
    let copy = msgs[2].clone();
    copy.fail_acks("throttled");
    msgs[2].fail_acks("refused");
    msgs[1].fail_acks("no key");
    drop((msgs, copy));
    let at = |line, reason: &str| Undelivered {
        source: "in.jsonl".into(),
        source_index: 1,
        line,
        reason: reason.into(),
    };
    assert_eq!(
        report.undelivered(),
        vec![at(2, "no key"), at(3, "throttled")]
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
    let bound = Arc::new(unbounded());
    let stop = StopReading::new(bound.clone(), None).unwrap();
    read_all(&[Source::File(good)], OPTS, &report, &bound, &stop, &tx).unwrap();
    let b = rx.try_recv().unwrap().into_messages();
    assert_eq!(
        b.iter().map(|m| &m.data()[..]).collect::<Vec<_>>(),
        vec![b"x", b"y"]
    );
    let e = read_all(
        &[Source::File(bad.clone())],
        OPTS,
        &report,
        &bound,
        &stop,
        &tx,
    )
    .unwrap_err();
    assert!(e.to_string().contains("bad.gz"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Gives its chunks one read at a time; asks the stop before giving the chunk at `stop_at`,
/// and fails every read after the last chunk as a stopped read does.
struct StopsPartWay<'a> {
    chunks: Vec<&'a [u8]>,
    stop_at: usize,
    stop: Arc<StopReading>,
}

impl Read for StopsPartWay<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop_at == 0 {
            self.stop.request();
        }
        self.stop_at = self.stop_at.wrapping_sub(1);
        if self.chunks.is_empty() {
            return Err(io::Error::other("reading stopped"));
        }
        let c = self.chunks.remove(0);
        buf[..c.len()].copy_from_slice(c);
        Ok(c.len())
    }
}

/// The lines of every batch received, in order.
fn received(rx: &mut mpsc::Receiver<InputBatch>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    while let Ok(b) = rx.try_recv() {
        out.push(
            b.into_messages()
                .iter()
                .map(|m| String::from_utf8_lossy(m.data()).into_owned())
                .collect(),
        );
    }
    out
}

#[test]
fn a_stop_hands_on_every_line_read_and_says_where_reading_stopped() {
    let report = Arc::new(LineReport::default());
    let bound = Arc::new(unbounded());
    let stop = StopReading::new(bound.clone(), None).unwrap();
    let lines = Lines::new("in", 0, &report, 2);
    report.reading(&lines.watch.source);
    // "a", "b" and "c" are read whole before the stop; "d" is cut (no newline yet).
    let source = StopsPartWay {
        chunks: vec![b"a\nb\n", b"c\nd"],
        stop_at: 1,
        stop: stop.clone(),
    };
    let (tx, mut rx) = mpsc::channel(16);
    let opts = ReadOptions {
        batch_messages: 2,
        ..OPTS
    };
    let reader = ReadBuffer::new(source, BLOCK);
    let more = split_buffered(reader, &lines, opts, &bound, Some(&stop), false, &tx).unwrap();
    assert!(!more, "no more sources are read");
    assert_eq!(received(&mut rx), [vec!["a", "b"], vec!["c"]]);
    assert_eq!(report.read(), 3);
    assert_eq!(report.next_unread(), Some(("in".into(), 4)));

    // A stop asked before a source is opened reads none of it.
    let report = Arc::new(LineReport::default());
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::write(&a, "1\n2\n").unwrap();
    std::fs::write(&b, "3\n").unwrap();
    let sources = [Source::File(a.clone()), Source::File(b)];
    read_all(&sources, OPTS, &report, &bound, &stop, &tx).unwrap();
    assert!(received(&mut rx).is_empty());
    assert_eq!(report.read(), 0);
    assert_eq!(
        report.next_unread(),
        Some((a.display().to_string().into(), 1))
    );

    // Without a stop, every source is read to its end.
    let bound = Arc::new(unbounded());
    let stop = StopReading::new(bound.clone(), None).unwrap();
    read_all(&sources, OPTS, &report, &bound, &stop, &tx).unwrap();
    assert_eq!(received(&mut rx), [vec!["1", "2"], vec!["3"]]);
    assert_eq!((report.read(), report.next_unread()), (3, None));
}

/// The next batch received within `within`, its lines (a ctrl as `<ctrl>`, or as
/// `<checkpoint>` when it marks a boundary within the input), if one comes.
fn next_within(
    rx: &mut mpsc::Receiver<InputBatch>,
    within: std::time::Duration,
) -> Option<Vec<String>> {
    let until = std::time::Instant::now() + within;
    loop {
        match rx.try_recv() {
            Ok(b) => {
                return Some(
                    b.into_messages()
                        .iter()
                        .map(|m| match (m.is_ctrl(), m.ends_input()) {
                            (true, true) => "<ctrl>".to_string(),
                            (true, false) => "<checkpoint>".to_string(),
                            _ => String::from_utf8_lossy(m.data()).into_owned(),
                        })
                        .collect(),
                );
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) if std::time::Instant::now() >= until => {
                return None;
            }
            Err(mpsc::error::TryRecvError::Empty) => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

/// `--flush-idle` over a pipe held open: a pause is followed by a checkpoint whether the
/// lines read before it were still held (a part batch, handed on with it) or had all gone
/// on in full batches (which the sends may hold as much); a pause with nothing read since
/// the last checkpoint is not.
#[test]
fn a_pause_after_full_batches_is_followed_by_a_checkpoint_too() {
    use std::os::fd::OwnedFd;
    use std::time::Duration;
    let bound = Arc::new(unbounded());
    let stop = StopReading::new(bound.clone(), Some(Duration::from_millis(50))).unwrap();
    let (pipe_rx, mut pipe_tx) = std::io::pipe().unwrap();
    let source = stop.reader(File::from(OwnedFd::from(pipe_rx))).unwrap();
    let (tx, mut rx) = mpsc::channel(16);
    let reading = {
        let (stop, bound) = (stop.clone(), bound.clone());
        std::thread::spawn(move || {
            let lines = Lines::new("in", 0, &Arc::default(), 2);
            let reader = ReadBuffer::new(source, BLOCK);
            split_buffered(reader, &lines, OPTS, &bound, Some(&stop), true, &tx)
        })
    };
    let wait = Duration::from_secs(2);
    // Exactly two batches' worth: both go on full, then the pause checkpoints them.
    pipe_tx.write_all(b"a\nb\nc\nd\n").unwrap();
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["a", "b"]);
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["c", "d"]);
    assert_eq!(
        next_within(&mut rx, wait).unwrap(),
        ["<checkpoint>"],
        "a checkpoint follows the full batches while the pipe stays open"
    );
    assert_eq!(
        next_within(&mut rx, Duration::from_millis(300)),
        None,
        "one checkpoint a pause"
    );
    // A part batch goes on at the pause, with its checkpoint.
    pipe_tx.write_all(b"e\n").unwrap();
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["e"]);
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["<checkpoint>"]);
    // A full batch and a part one: the part batch, then one checkpoint for both.
    pipe_tx.write_all(b"f\ng\nh\n").unwrap();
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["f", "g"]);
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["h"]);
    assert_eq!(next_within(&mut rx, wait).unwrap(), ["<checkpoint>"]);
    drop(pipe_tx);
    assert!(reading.join().unwrap().unwrap(), "read to the end");
    assert_eq!(
        next_within(&mut rx, wait),
        None,
        "the end adds nothing here"
    );
}
