//! `send_stdout`: writes each item of a batch to standard output, one line per item.
//!
//! Substation compatibility: the same settings (`batch`, `auxiliary_transforms`,
//! `object.batch_key`) and output (each item followed by a newline, at flush). Data messages
//! pass through unchanged. The Go defaults apply when a setting is absent (1000 items,
//! 1 MiB, 1 minute); the Jsonnet library's defaults (1000 / 1,000,000 / `1m`) come from the
//! library. Unlike Substation, a batch is written under one lock of the stream, so batches
//! of concurrent pipelines never interleave line by line, and `batch.duration` is a real
//! maximum age (see [`super::batcher`]).
//!
//! Without auxiliary transforms or a batch key, all it does with a message is write its data
//! as a line, and it is built with that stream ([`sluice_engine::LineSink`]): at the end of a pipeline
//! whose outputs are dropped (`sluice run`) with several workers, the workers then write the
//! lines of the chunks they made themselves, in input order, each chunk's at once, and the
//! messages never reach the send's batches (`engine/src/pipeline/lines.rs`).
//!
//! "Standard output" is the process's unless the build context names a writer in its place
//! ([`sluice_engine::Context::with_stdout`]): `sluice test` captures each test's output that
//! way and shows it under the test in its report.

use std::io::Write;
use std::sync::{Arc, Mutex};

use sluice_engine::context::OutputSink;

use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, LineSink, Transform, TransformError, Value, async_trait};

use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};

/// Settings of `send_stdout`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// Batch limits.
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is written.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
}

/// Where the lines go.
#[derive(Clone)]
enum Sink {
    Stdout,
    /// The writer the build context gave in place of standard output.
    Writer(OutputSink),
}

/// Standard output as a destination.
pub(crate) struct Stdout {
    sink: Sink,
    // The output of one flush to a writer standing in for standard output (standard output
    // itself is written from the items, see `write_lines`), kept between flushes: a fresh
    // megabyte per flush would be fresh pages the kernel must zero every time. Deliveries
    // are serialised by the sender, so this lock is never contended, and it is not held
    // across an await.
    scratch: Mutex<Vec<u8>>,
}

impl Stdout {
    /// The process's standard output.
    pub(crate) fn new() -> Self {
        Stdout {
            sink: Sink::Stdout,
            scratch: Mutex::new(Vec::new()),
        }
    }

    /// `sink` standing in for standard output.
    pub(crate) fn writer(sink: OutputSink) -> Self {
        Stdout {
            sink: Sink::Writer(sink),
            scratch: Mutex::new(Vec::new()),
        }
    }

    /// A buffer standing in for standard output (tests).
    #[cfg(test)]
    pub(crate) fn memory(buf: Arc<Mutex<Vec<u8>>>) -> Self {
        Stdout::writer(buf)
    }
}

impl Default for Stdout {
    fn default() -> Self {
        Stdout::new()
    }
}

#[async_trait]
impl Destination for Stdout {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        match &self.sink {
            Sink::Stdout => {
                // Straight from the items (no copy into one buffer: with several workers
                // this runs on the driver's one thread), under one lock of the stream.
                let mut out = std::io::stdout().lock();
                write_lines(&mut out, &batch.items)
                    .and_then(|_| out.flush())
                    .map_err(Sink::Stdout.error())?;
            }
            Sink::Writer(_) => {
                let mut buf = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
                buf.clear();
                buf.reserve(batch.size() + batch.items.len());
                for item in &batch.items {
                    buf.extend_from_slice(item);
                    buf.push(b'\n');
                }
                self.sink.write_lines(&buf[..])?;
            }
        }
        Ok(())
    }

    fn line_sink(&self) -> Option<Arc<dyn LineSink>> {
        Some(Arc::new(self.sink.clone()))
    }
}

impl Sink {
    /// The error of a failed write, saying where to.
    fn error(&self) -> impl FnOnce(std::io::Error) -> TransformError {
        let context = match self {
            Sink::Stdout => "writing to standard output",
            Sink::Writer(_) => "writing to the output sink",
        };
        move |e| TransformError::external(context, e)
    }
}

/// Lines written at once, under one lock of the stream: what the pipeline's workers write
/// when it ends in this send (see [`sluice_engine::LineSink`]).
impl LineSink for Sink {
    fn write_lines(&self, lines: &[u8]) -> Result<(), TransformError> {
        match self {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(lines).and_then(|_| out.flush())
            }
            Sink::Writer(w) => {
                let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                w.write_all(lines).and_then(|_| w.flush())
            }
        }
        .map_err(self.error())
    }
}

/// Writes each item followed by a newline with vectored writes, as many pieces per call as
/// the writer takes, until all are written.
fn write_lines(w: &mut impl Write, items: &[bytes::Bytes]) -> std::io::Result<()> {
    use std::io::{ErrorKind, IoSlice};
    let mut slices: Vec<IoSlice<'_>> = items
        .iter()
        .flat_map(|item| [IoSlice::new(item), IoSlice::new(b"\n")])
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The `send_stdout` transform.
pub(crate) type SendStdout = Sender<Stdout>;

impl Sender<Stdout> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps::NONE,
            match b.context().stdout() {
                Some(sink) => Stdout::writer(sink.clone()),
                None => Stdout::new(),
            },
        )
    }

    /// Built with the stream it writes lines to, when that is all it does with a message.
    pub(crate) fn into_transform(self) -> Transform {
        match self.line_sink() {
            Some(lines) => Transform::writing_lines(lines, self),
            None => Transform::stateful(self),
        }
    }
}

/// What registers the `send_stdout` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_stdout",
    aliases: &[],
    library: "sub.tf.send.stdout",
    summary: "writes each batch to standard output, one line per item",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use sluice_engine::StatefulTransform;
    use sluice_engine::batch::BatchLimits;
    use sluice_engine::{Message, json, testing};
    use std::time::Duration;

    fn sender(count: usize, aux: Option<Value>) -> (SendStdout, Arc<Mutex<Vec<u8>>>) {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let aux = aux.map(|a| testing::build_pipeline(&registry(), a).unwrap());
        let limits = BatchLimits {
            count,
            size: 1000,
            max_age: Duration::ZERO,
        };
        let s = Sender::from_parts(Stdout::memory(buf.clone()), limits, usize::MAX, None, aux);
        (s, buf)
    }

    /// Takes at most two pieces and five bytes per call, and is interrupted every third.
    struct Stingy {
        got: Vec<u8>,
        calls: usize,
    }

    impl Write for Stingy {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.write_vectored(&[std::io::IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let mut room = 5;
            for b in bufs.iter().take(2) {
                let n = b.len().min(room);
                self.got.extend_from_slice(&b[..n]);
                room -= n;
            }
            Ok(5 - room)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_written_in_pieces_come_out_whole_and_in_order() {
        let items: Vec<bytes::Bytes> = ["", "a", "bcdefgh", "ij", ""]
            .into_iter()
            .map(bytes::Bytes::from)
            .collect();
        let mut w = Stingy {
            got: Vec::new(),
            calls: 0,
        };
        write_lines(&mut w, &items).unwrap();
        assert_eq!(w.got, b"\na\nbcdefgh\nij\n\n");
        assert!(w.calls > 4, "written over several calls: {}", w.calls);
        write_lines(&mut w, &[]).unwrap();
    }

    #[test]
    fn cases() {
        // (name, batch count, aux transforms, inputs, what is written)
        let cases = [
            ("one line per item", 100, None, vec!["a", "b"], "a\nb\n"),
            (
                "batches by count",
                1,
                None,
                vec!["a", "b", "c"],
                "a\nb\nc\n",
            ),
            (
                "empty item is an empty line",
                100,
                None,
                vec!["", "x"],
                "\nx\n",
            ),
            (
                "aux aggregate",
                100,
                Some(json!([{"type": "aggregate_to_array"}])),
                vec![r#"{"a":1}"#, "b"],
                "[{\"a\":1},\"b\"]\n",
            ),
        ];
        for (name, count, aux, inputs, want) in cases {
            let (s, buf) = sender(count, aux);
            let mut msgs: Vec<Message> = inputs
                .iter()
                .map(|i| Message::new(i.as_bytes().to_vec()))
                .collect();
            msgs.push(Message::ctrl());
            let mut out = Vec::new();
            for m in msgs {
                testing::block_on(s.transform(m, &mut out)).unwrap();
            }
            assert_eq!(
                String::from_utf8_lossy(&buf.lock().unwrap()),
                want,
                "{name}"
            );
            assert_eq!(out.len(), inputs.len() + 1, "{name}: data passes through");
        }
    }

    #[test]
    fn writes_at_flush_not_before() {
        let (s, buf) = sender(100, None);
        testing::block_on(s.transform(Message::new(&b"a"[..]), &mut Vec::new())).unwrap();
        assert!(buf.lock().unwrap().is_empty());
        testing::block_on(s.transform(Message::ctrl(), &mut Vec::new())).unwrap();
        assert_eq!(&buf.lock().unwrap()[..], b"a\n");
    }

    /// A writer on the build context takes standard output's place: `sluice test` relies
    /// on this to keep a config's output out of its report.
    #[test]
    fn the_build_context_can_name_the_output() {
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let ctx = Arc::new(sluice_engine::Context::default().with_stdout(buf.clone()));
        let built = registry()
            .build_pipeline_in(&ctx, &json!([{"type": "send_stdout"}]), "transforms")
            .unwrap();
        let out = testing::block_on(
            built
                .value
                .apply(vec![Message::new(&b"captured"[..]), Message::ctrl()]),
        )
        .unwrap();
        assert_eq!(out.len(), 2, "data and ctrl pass through");
        assert_eq!(&buf.lock().unwrap()[..], b"captured\n");
    }

    /// Whether the send says it only writes lines (so the pipeline's workers may write them).
    fn writes_only_lines(cfg: Value) -> bool {
        match testing::build(&registry(), cfg).unwrap() {
            sluice_engine::Transform::Stateful(_, lines) => lines.is_some(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_writes_lines_without_auxiliary_transforms_or_a_batch_key() {
        // (settings, whether the lines are its messages' data, in order)
        let cases = [
            (json!({}), true),
            (
                json!({"batch": {"count": 1, "size": 10, "duration": "1s"}}),
                true,
            ),
            (json!({"object": {"batch_key": "k"}}), false),
            (json!({"object": {"batch_key": "meta k"}}), false),
            (
                json!({"auxiliary_transforms": [{"type": "aggregate_to_array"}]}),
                false,
            ),
            (json!({"auxiliary_transforms": []}), true),
        ];
        for (settings, want) in cases {
            let cfg = json!({"type": "send_stdout", "settings": settings.clone()});
            assert_eq!(writes_only_lines(cfg), want, "{settings}");
        }
    }

    /// Runs `config` on two workers over `batches`, its standard output `sink`; with
    /// `discarding`, as `sluice run` does (the workers write the send's lines).
    fn drive_two_workers(
        config: &Value,
        sink: OutputSink,
        discarding: bool,
        batches: Vec<Vec<Message>>,
    ) -> Result<sluice_engine::driver::RunStats, TransformError> {
        let ctx = Arc::new(sluice_engine::Context::default().with_stdout(sink));
        let mut pipeline = registry()
            .build_pipeline_in(&ctx, config, "transforms")
            .unwrap()
            .value
            .with_workers(2);
        if discarding {
            pipeline = pipeline.discarding_outputs();
        }
        let (tx, rx) = tokio::sync::mpsc::channel(batches.len().max(1));
        for b in batches {
            tx.try_send(b).unwrap();
        }
        drop(tx);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap()
            .block_on(sluice_engine::driver::drive(&pipeline, rx, |_| {}))
    }

    /// Messages with data `{"i":N}` for these N.
    fn numbered(ns: std::ops::Range<usize>) -> Vec<Message> {
        ns.map(|i| Message::new(format!(r#"{{"i":{i}}}"#)))
            .collect()
    }

    /// Written by the pipeline's workers, in order, into the writer the build context
    /// names; a writer that fails is the send's error.
    #[test]
    fn lines_written_by_the_workers_go_where_the_send_writes() {
        let config = json!([
            {"type": "object_insert", "settings": {"object": {"target_key": "n"}, "value": 1}},
            {"type": "send_stdout", "settings": {"id": "out"}},
        ]);
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let batches = (0..5).map(|b| numbered(b * 300..(b + 1) * 300)).collect();
        let stats = drive_two_workers(&config, buf.clone(), true, batches).unwrap();
        assert_eq!(stats.messages_out, 1500);
        let want: String = (0..1500)
            .map(|i| format!("{{\"i\":{i},\"n\":1}}\n"))
            .collect();
        assert_eq!(String::from_utf8_lossy(&buf.lock().unwrap()), want);

        struct Refuses;
        impl Write for Refuses {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::StorageFull.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let refuses = Arc::new(Mutex::new(Refuses));
        let err = drive_two_workers(&config, refuses, true, vec![numbered(0..300)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "transforms[1] (send_stdout, id out): writing to the output sink: no storage space"
        );
    }

    /// An item larger than the batch size is the same error whether the workers write the
    /// lines or the send does (Substation's "data could not be added to batch").
    #[test]
    fn an_item_larger_than_the_batch_is_the_same_error_either_way() {
        let config = json!([
            {"type": "object_insert", "settings": {"object": {"target_key": "n"}, "value": 1}},
            {"type": "send_stdout", "settings": {"id": "out", "batch": {"size": 20}}},
        ]);
        let errors: Vec<String> = [true, false]
            .into_iter()
            .map(|discarding| {
                let batch = vec![
                    Message::new(r#"{"i":1}"#),
                    Message::new(r#"{"i":"a long value"}"#),
                ];
                let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
                drive_two_workers(&config, buf, discarding, vec![batch])
                    .unwrap_err()
                    .to_string()
            })
            .collect();
        assert_eq!(
            errors[0],
            "transforms[1] (send_stdout, id out): data could not be added to batch: an item of 26 bytes exceeds the batch size limit of 20 bytes (the transform's batch.size: raise it to take larger items)"
        );
        assert_eq!(errors[0], errors[1], "the same as the send's");
    }

    #[test]
    fn settings() {
        let r = registry();
        let ok = json!({"type": "send_stdout", "settings": {
            "batch": {"count": 2, "size": 10, "duration": "5s"},
            "object": {"batch_key": "k"},
            "auxiliary_transforms": [{"type": "aggregate_to_string", "settings": {"separator": "\n"}}],
        }});
        let t = testing::build(&r, ok).unwrap();
        assert!(t.deadline().is_none());
        let bad = json!({"type": "send_stdout", "settings": {"batch": {"duration": "5 days"}}});
        let e = testing::build(&r, bad).err().unwrap().to_string();
        assert!(e.contains("batch.duration"), "{e}");
    }
}
