//! Stopping `sluice run` with SIGTERM and SIGINT (the real binary, a lock over SQLite): what
//! was read is finished, flushed and its keys committed within `--grace`; the exit status
//! and one line on standard error say what happened; a second signal exits at once; a
//! grace period too short fails what is held and names what is still on its way. And a
//! lock store that cannot commit at the end fails the run, naming the pending keys.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli_lock::sqlite_counts;
use crate::common::Dir;

/// A lock over `locks.sqlite` keyed by `id` whose inner list is `inner`; duplicates are
/// dropped, and a key pending under another process is waited for 200 ms.
fn locked(inner: &str) -> String {
    format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.sqlite({{ file: 'locks.sqlite' }}),
      prefix: 'stop',
      ttl_offset: '1h',
      lease: '1h',
      pending_wait: '200ms',
      object: {{ source_key: 'id' }},
      duplicates: 'drop',
      transforms: [{inner}],
    }}),
  ],
}}
"#
    )
}

fn lines(ids: impl Iterator<Item = u32>) -> String {
    ids.map(|i| format!("{{\"id\":{i}}}\n")).collect()
}

/// A `sluice run` reading a pipe that stays open, its outputs in files of `d`.
struct Running {
    child: Child,
}

impl Running {
    fn start(d: &Dir, args: &[&str], input: &str) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .args(args)
            .current_dir(d.path())
            .env_remove("SLUICE_LOG")
            .stdin(Stdio::piped())
            .stdout(std::fs::File::create(d.path().join("out")).expect("out"))
            .stderr(std::fs::File::create(d.path().join("err")).expect("err"))
            .spawn()
            .expect("starting sluice");
        let stdin = child.stdin.as_mut().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("feeding");
        stdin.flush().expect("flushing");
        Running { child }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) with our child's pid and a valid signal number.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// The exit code once it exits (failing after `within`); the pipe stays open till then.
    fn exit(&mut self, within: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("waiting") {
                return s.code();
            }
            if start.elapsed() > within {
                let _ = self.child.kill();
                panic!("sluice did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("waiting").is_none()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the lock store holds (pending, committed) = `want`.
fn wait_for_locks(d: &Dir, want: (i64, i64)) {
    let start = Instant::now();
    let db = d.path().join("locks.sqlite");
    while sqlite_counts(&db) != want {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "locks {want:?} did not appear: {:?}",
            sqlite_counts(&db)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last line of standard error.
fn last_line(err: &str) -> &str {
    err.lines().last().unwrap_or_default()
}

#[test]
fn sigterm_finishes_what_was_read_commits_its_keys_and_says_where_reading_stopped() {
    let d = Dir::new();
    // The send holds everything until the final ctrl: only a stop that flushes delivers.
    d.write("cfg.jsonnet", locked("sub.tf.send.stdout()"));
    let args = [
        "-c",
        "cfg.jsonnet",
        "--batch-messages",
        "2",
        "--undelivered",
        "undelivered.txt",
    ];
    // Lines 1-4 go to the pipeline in two batches; line 5 waits in the reader for a
    // batch of two; the input stays open.
    let mut run = Running::start(&d, &args, &lines(0..5));
    wait_for_locks(&d, (4, 0));
    run.signal(libc::SIGTERM);
    assert_eq!(run.exit(Duration::from_secs(30)), Some(143));
    let err = d.read("err");
    assert_eq!(
        last_line(&err),
        "sluice: stopped by SIGTERM: 5 lines read, 5 delivered; the first line not read: <stdin>:6",
        "{err}"
    );
    assert_eq!(d.read("out"), lines(0..5), "what was read was delivered");
    assert_eq!(d.read("undelivered.txt"), "");
    assert_eq!(sqlite_counts(&d.path().join("locks.sqlite")), (0, 5));

    // The same input again (and one line more): skipped at once, nothing waits for a
    // pending key.
    let started = Instant::now();
    let again = d.sluice(&["run", "-c", "cfg.jsonnet"], lines(0..6));
    again.assert_clean_success();
    assert_eq!(again.stdout_str(), lines(5..6));
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// An aggregate holding an open batch when the stop comes (no idle flush: the batch would
/// close at the pause otherwise) writes it before the run exits.
#[test]
fn sigterm_writes_an_aggregates_open_batch_then_exits() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub'); { transforms: [sub.tf.aggregate.to.array({ batch: { count: 1000 } }), sub.tf.send.stdout()] }",
    );
    let mut run = Running::start(
        &d,
        &[
            "-c",
            "cfg.jsonnet",
            "--batch-messages",
            "3",
            "--flush-idle",
            "off",
        ],
        "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n",
    );
    // The three lines are one input batch at once; nothing can come out before the stop.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(d.read("out"), "", "the aggregate's batch is still open");
    run.signal(libc::SIGTERM);
    assert_eq!(run.exit(Duration::from_secs(30)), Some(143));
    assert_eq!(d.read("out"), "[{\"n\":1},{\"n\":2},{\"n\":3}]\n");
    let err = d.read("err");
    assert_eq!(
        last_line(&err),
        "sluice: stopped by SIGTERM: 3 lines read, 3 delivered; the first line not read: <stdin>:4",
        "{err}"
    );
}

#[test]
fn sigint_exits_130_after_the_lines_read() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub'); { transforms: [sub.tf.send.stdout({ batch: { count: 1 } })] }",
    );
    let mut run = Running::start(
        &d,
        &["-c", "cfg.jsonnet", "--batch-messages", "1"],
        "a\nb\nc\n",
    );
    let start = Instant::now();
    while d.read("out") != "a\nb\nc\n" {
        assert!(start.elapsed() < Duration::from_secs(30), "no output");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.signal(libc::SIGINT);
    assert_eq!(run.exit(Duration::from_secs(30)), Some(130));
    let err = d.read("err");
    assert_eq!(
        err,
        "sluice: stopped by SIGINT: 3 lines read, 3 delivered; the first line not read: <stdin>:4\n"
    );
}

#[test]
fn a_second_signal_exits_at_once_leaving_the_keys_pending() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        locked("sub.tf.util.delay({ duration: '1m' }), sub.tf.send.stdout()"),
    );
    let args = [
        "-c",
        "cfg.jsonnet",
        "--batch-messages",
        "1",
        "--undelivered",
        "undelivered.txt",
    ];
    let mut run = Running::start(&d, &args, &lines(7..8));
    wait_for_locks(&d, (1, 0));
    run.signal(libc::SIGTERM);
    // The grace period (25 s by default) is running: the delay holds the message.
    std::thread::sleep(Duration::from_millis(500));
    assert!(run.is_running(), "waits within its grace period");
    let second = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(run.exit(Duration::from_secs(20)), Some(143));
    assert!(second.elapsed() < Duration::from_secs(5));
    let err = d.read("err");
    assert_eq!(
        last_line(&err),
        "sluice: SIGTERM again: exiting at once, as a crash would: 1 lines read, 1 not known to be delivered (1 listed in undelivered.txt); lock keys not settled stay pending until their lease ends; the first line not read: <stdin>:2",
        "{err}"
    );
    assert_eq!(
        d.read("undelivered.txt"),
        "<stdin>:1\tstill in the pipeline when a second signal (SIGTERM) ended the run at once: it may have been delivered\n"
    );
    assert_eq!(sqlite_counts(&d.path().join("locks.sqlite")), (1, 0));
}

#[test]
fn a_grace_period_too_short_fails_what_is_held_and_names_what_is_on_its_way() {
    let d = Dir::new();
    // Line 1 waits in the send's batch of two, line 2 flushes both; line 3 waits in the
    // batch; line 4 is held up for a minute before the send.
    let inner = "
      sub.tf.meta.switch({ cases: [{
        condition: sub.cnd.num.eq({ obj: { src: 'id' }, value: 4 }),
        transforms: [sub.tf.util.delay({ duration: '1m' })],
      }] }),
      sub.tf.send.stdout({ batch: { count: 2 } }),";
    d.write("cfg.jsonnet", locked(inner));
    let args = [
        "-c",
        "cfg.jsonnet",
        "--batch-messages",
        "1",
        "--grace",
        "1s",
        "--undelivered",
        "undelivered.txt",
    ];
    let mut run = Running::start(&d, &args, &lines(1..5));
    wait_for_locks(&d, (2, 2));
    let stopped = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(run.exit(Duration::from_secs(20)), Some(143));
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(d.read("out"), lines(1..3));
    assert_eq!(
        d.read("undelivered.txt"),
        "<stdin>:3\tstopped by SIGTERM, and the grace period (1s) ran out first\n\
         <stdin>:4\tstill in the pipeline when the grace period (1s) after SIGTERM ran out: it may have been delivered\n"
    );
    let err = d.read("err");
    assert_eq!(
        last_line(&err),
        "sluice: stopped by SIGTERM, and the grace period (1s) ran out before the pipeline finished: 4 lines read, 2 delivered (2 not: listed in undelivered.txt); the first line not read: <stdin>:5",
        "{err}"
    );
    // 1 and 2 committed; 3 given back; 4, on its way, pending until its lease ends.
    assert_eq!(sqlite_counts(&d.path().join("locks.sqlite")), (1, 2));
}

#[test]
fn a_lock_store_that_cannot_commit_at_the_end_fails_the_run_naming_the_pending_keys() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        locked("sub.tf.send.stdout()").replace("lease: '1h'", "lease: '1s'"),
    );
    // No checkpoint while the input stays open (`--flush-idle off`): the keys stay
    // pending until the end.
    let mut run = Running::start(
        &d,
        &[
            "-c",
            "cfg.jsonnet",
            "--batch-messages",
            "1",
            "--flush-idle",
            "off",
        ],
        &lines(0..3),
    );
    wait_for_locks(&d, (3, 0));
    // The table goes away under it: from now on every write fails at once, as on a full
    // disk (whose failures a test cannot make as root, whom permissions do not stop).
    let db = rusqlite::Connection::open(d.path().join("locks.sqlite")).expect("opening");
    db.execute_batch("ALTER TABLE sluice_locks RENAME TO away")
        .expect("moving the table");
    drop(run.child.stdin.take());
    // The settle tries again for 30 s (the least it tries, past a short lease).
    assert_eq!(run.exit(Duration::from_secs(90)), Some(1));
    db.execute_batch("ALTER TABLE away RENAME TO sluice_locks")
        .expect("moving it back");
    assert_eq!(d.read("out"), lines(0..3), "every line was delivered");
    let err = d.read("err");
    for want in [
        "3 lock key(s) left pending in",
        "3 delivered message(s) whose keys could not be committed",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    assert_eq!(
        last_line(&err),
        "error: all 3 input lines were delivered, but the lock store kept failing: not every lock key could be settled (above)",
        "{err}"
    );
    assert_eq!(sqlite_counts(&d.path().join("locks.sqlite")), (3, 0));
}

#[test]
fn a_pipeline_error_ends_the_run_while_its_input_stays_open() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub'); { transforms: [sub.tf.util.err({ id: 'reject', message: 'no' })] }",
    );
    // The input stays open and idle after its line: the reader waits for more. (Without
    // --fail-fast the line would fail alone and the run go on reading.)
    let mut run = Running::start(
        &d,
        &["-c", "cfg.jsonnet", "--fail-fast", "--batch-messages", "1"],
        "a\n",
    );
    assert_eq!(run.exit(Duration::from_secs(20)), Some(1));
    assert_eq!(
        d.read("err"),
        "error: running cfg.jsonnet: transforms[0] (utility_err, id reject): no\n"
    );
}

#[test]
fn a_stop_with_a_failing_lock_store_ends_within_its_grace_period_naming_the_pending_keys() {
    let d = Dir::new();
    d.write("cfg.jsonnet", locked("sub.tf.send.stdout()"));
    // No checkpoint while the input stays open (`--flush-idle off`): the keys stay
    // pending until the stop.
    let args = [
        "-c",
        "cfg.jsonnet",
        "--batch-messages",
        "1",
        "--flush-idle",
        "off",
        "--grace",
        "2s",
    ];
    let mut run = Running::start(&d, &args, &lines(0..2));
    wait_for_locks(&d, (2, 0));
    // Every write fails from now on (as in the test above).
    let db = rusqlite::Connection::open(d.path().join("locks.sqlite")).expect("opening");
    db.execute_batch("ALTER TABLE sluice_locks RENAME TO away")
        .expect("moving the table");
    let stopped = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(run.exit(Duration::from_secs(20)), Some(143));
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopped.elapsed()
    );
    db.execute_batch("ALTER TABLE away RENAME TO sluice_locks")
        .expect("moving it back");
    assert_eq!(d.read("out"), lines(0..2), "flushed");
    let err = d.read("err");
    assert!(
        err.contains("2 lock key(s) left pending in"),
        "the lock says what it could not settle: {err}"
    );
    assert_eq!(
        last_line(&err),
        "sluice: stopped by SIGTERM, and the grace period (2s) ran out before the pipeline finished: 2 lines read, 2 delivered; the first line not read: <stdin>:3",
        "{err}"
    );
    assert_eq!(sqlite_counts(&d.path().join("locks.sqlite")), (2, 0));
}
