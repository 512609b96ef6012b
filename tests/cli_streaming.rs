//! `sluice run` over a pipe that stays open (`tail -f app.log | sluice run`): what is read
//! is out within `--flush-idle` once input pauses, through a send that batches (a
//! checkpoint follows), while the pipe is still open; `--flush-idle off` waits for the end.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::Dir;

/// A `sluice run` whose stdin stays open and whose stdout lines arrive on a channel.
struct Streaming {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Streaming {
    fn start(d: &Dir, args: &[&str]) -> Streaming {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .args(args)
            .current_dir(d.path())
            .env_remove("SLUICE_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting sluice");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Streaming {
            child,
            stdin,
            lines,
        }
    }

    fn write(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line out, if it comes within `within`.
    fn next(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    fn close(mut self) -> Vec<String> {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status:?}");
        self.lines.iter().collect()
    }
}

#[test]
fn a_line_is_out_within_the_flush_time_while_the_pipe_stays_open() {
    let d = Dir::new();
    // Without a config (send_stdout, which batches by 1,000 lines or a minute).
    let mut s = Streaming::start(&d, &[]);
    for line in ["{\"a\":1}", "{\"b\":2}"] {
        let sent = Instant::now();
        s.write(line);
        assert_eq!(s.next(Duration::from_secs(2)).as_deref(), Some(line));
        assert!(sent.elapsed() < Duration::from_secs(2));
    }
    assert!(s.close().is_empty());
}

/// A burst that exactly fills `--batch-messages` (here 10 lines, then 20: whole batches,
/// handed on at once) is out within the flush time too: the send holds those batches, and
/// the pause checkpoints them as it does a part batch.
#[test]
fn a_burst_of_whole_batches_is_out_within_the_flush_time() {
    let d = Dir::new();
    let mut s = Streaming::start(&d, &["--batch-messages", "10"]);
    for burst in [1..=10, 11..=30] {
        let lines: Vec<String> = burst.map(|i| format!("{{\"i\":{i}}}")).collect();
        let sent = Instant::now();
        s.write(&lines.join("\n")); // one write: the lines are ready together
        for line in &lines {
            assert_eq!(
                s.next(Duration::from_secs(2)).as_deref(),
                Some(line.as_str()),
                "out while the pipe stays open"
            );
        }
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "{:?}",
            sent.elapsed()
        );
    }
    assert!(s.close().is_empty());
}

#[test]
fn an_aggregate_is_flushed_at_the_pause_and_off_waits_for_the_end() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n\
         { transforms: [sub.tf.aggregate.to.array({ object: { target_key: 'all' } }), sub.tf.send.stdout()] }\n",
    );
    let mut s = Streaming::start(&d, &["-c", "cfg.jsonnet", "--flush-idle", "300ms"]);
    s.write("1\n2"); // one write: both lines are ready together
    assert_eq!(
        s.next(Duration::from_secs(2)).as_deref(),
        Some("{\"all\":[1,2]}")
    );
    s.write("3");
    assert_eq!(
        s.next(Duration::from_secs(2)).as_deref(),
        Some("{\"all\":[3]}")
    );
    assert!(s.close().is_empty());

    let mut s = Streaming::start(&d, &["-c", "cfg.jsonnet", "--flush-idle", "off"]);
    s.write("1");
    assert_eq!(
        s.next(Duration::from_millis(1500)),
        None,
        "held till the end"
    );
    s.write("2");
    assert_eq!(s.close(), ["{\"all\":[1,2]}"]);
}

/// The checkpoint at a pause marks a boundary within the input, not its end: under the
/// lock, a message whose key another process holds goes on waiting past it, and what was
/// delivered around it (here by a send after the lock, Substation's consumer pattern,
/// which holds its batch until the checkpoint) is out and committed within the flush time
/// instead of after the lock's `pending_wait`.
#[test]
fn a_pause_under_the_lock_does_not_wait_for_keys_another_process_holds() {
    let d = Dir::new();
    d.write("cfg.jsonnet", locked_insert("1h", "5s"));
    let db = d.path().join("locks.sqlite");
    let mut holder = holding_key_7(&d, &db);
    let mut s = Streaming::start(&d, &["-c", "cfg.jsonnet"]);
    let sent = Instant::now();
    s.write("{\"id\":6}\n{\"id\":7}\n{\"id\":8}");
    for want in ["{\"id\":6,\"locked\":true}", "{\"id\":8,\"locked\":true}"] {
        assert_eq!(s.next(Duration::from_secs(2)).as_deref(), Some(want));
    }
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    while crate::cli_lock::sqlite_counts(&db) != (1, 2) {
        assert!(
            sent.elapsed() < Duration::from_secs(3),
            "6 and 8 committed: {:?}",
            crate::cli_lock::sqlite_counts(&db)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // 7 fails once its wait is over; the holder still has it.
    drop(s.stdin.take());
    assert_eq!(s.child.wait().unwrap().code(), Some(1));
    let _ = holder.child.kill();
    let _ = holder.child.wait();
}

/// A message that waited for a key another process held, freed while the input is idle (the
/// holder crashed and its lease ended), is written and committed then, not when more input
/// or the end comes: the lock checkpoints what it let through (before, it sat in the send
/// after the lock for its `batch.duration`, a minute).
#[test]
fn a_key_freed_while_the_input_is_idle_is_written_then() {
    let d = Dir::new();
    d.write("cfg.jsonnet", locked_insert("2s", "30s"));
    let db = d.path().join("locks.sqlite");
    let mut holder = holding_key_7(&d, &db);
    // The holder crashes: its key is taken over once its 2 s lease ends.
    let _ = holder.child.kill();
    let _ = holder.child.wait();
    let mut s = Streaming::start(&d, &["-c", "cfg.jsonnet"]);
    let sent = Instant::now();
    s.write("{\"id\":6}\n{\"id\":7}\n{\"id\":8}");
    for want in ["{\"id\":6,\"locked\":true}", "{\"id\":8,\"locked\":true}"] {
        assert_eq!(s.next(Duration::from_secs(2)).as_deref(), Some(want));
    }
    // The pipe stays open and nothing more comes: 7 is out after the lease, and committed.
    assert_eq!(
        s.next(Duration::from_secs(10)).as_deref(),
        Some("{\"id\":7,\"locked\":true}"),
        "after {:?}",
        sent.elapsed()
    );
    while crate::cli_lock::sqlite_counts(&db) != (0, 3) {
        assert!(
            sent.elapsed() < Duration::from_secs(12),
            "6, 7 and 8 committed: {:?}",
            crate::cli_lock::sqlite_counts(&db)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(s.stdin.take());
    assert_eq!(s.child.wait().unwrap().code(), Some(0));
}

/// A config: a lock over SQLite with this `lease` and `pending_wait` around an insert of
/// `locked`, then `send_stdout` (Substation's consumer pattern).
fn locked_insert(lease: &str, pending_wait: &str) -> String {
    format!(
        "local sub = std.extVar('sub');\n\
         {{ transforms: [\n\
           sub.tf.meta.kv_store.lock({{\n\
             kv_store: sub.kv_store.sqlite({{ file: 'locks.sqlite' }}),\n\
             prefix: 'p', ttl_offset: '1h', lease: '{lease}', pending_wait: '{pending_wait}',\n\
             object: {{ source_key: 'id' }}, duplicates: 'drop',\n\
             transforms: [sub.tf.obj.insert({{ obj: {{ trg: 'locked' }}, value: true }})],\n\
           }}),\n\
           sub.tf.send.stdout(),\n\
         ] }}\n"
    )
}

/// A holder that takes key 7 (its line handed on alone) and, with no checkpoint while its
/// input stays open, keeps it pending in `db`.
fn holding_key_7(d: &Dir, db: &std::path::Path) -> Streaming {
    let args = [
        "-c",
        "cfg.jsonnet",
        "--batch-messages",
        "1",
        "--flush-idle",
        "off",
    ];
    let mut holder = Streaming::start(d, &args);
    holder.write("{\"id\":7}");
    let start = Instant::now();
    while crate::cli_lock::sqlite_counts(db) != (1, 0) {
        assert!(start.elapsed() < Duration::from_secs(30), "no pending key");
        std::thread::sleep(Duration::from_millis(20));
    }
    holder
}
