//! `meta_kv_store_lock` through the real `sluice` binary with the embedded (sqlite) store:
//! exactly-once across runs, two processes at once over overlapping input, and a process
//! killed between acquisition and checkpoint.

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Dir;

/// A lock keyed by `id` whose inner list marks the message and prints it; duplicates are
/// dropped, so stdout holds exactly what this process processed.
fn config(extra: &str) -> String {
    format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.sqlite({{ file: 'state/locks.sqlite' }}),
      prefix: 'test',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      duplicates: 'drop',
      {extra}
      transforms: [
        sub.tf.obj.insert({{ obj: {{ trg: 'processed' }}, value: true }}),
        sub.tf.send.stdout(),
      ],
    }}),
  ],
}}
"#
    )
}

fn lines(ids: impl Iterator<Item = u32>) -> String {
    ids.map(|i| format!("{{\"id\":{i}}}\n")).collect()
}

/// The ids in a process's output, which must all be processed messages.
fn ids_of(stdout: &str) -> Vec<u32> {
    stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON output");
            assert_eq!(
                v["processed"], true,
                "only processed messages come out: {l}"
            );
            v["id"].as_u64().expect("an id") as u32
        })
        .collect()
}

/// Starts `sluice run` in `dir` reading `input` (a file there), writing `output` there.
fn spawn(dir: &Dir, input: &str, output: &str, extra_args: &[&str]) -> Child {
    let mut args = vec!["run", "-c", "cfg.jsonnet"];
    args.extend_from_slice(extra_args);
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(&args)
        .current_dir(dir.path())
        .env_remove("SLUICE_LOG")
        .stdin(File::open(dir.path().join(input)).expect("input"))
        .stdout(File::create(dir.path().join(output)).expect("output"))
        .stderr(File::create(dir.path().join(format!("{output}.err"))).expect("stderr"))
        .spawn()
        .expect("starting sluice")
}

fn wait(mut child: Child, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("waiting") {
            return s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{what} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// (pending, committed) lock counts in the store file ((0, 0) before it exists).
fn lock_counts(db: &Path) -> (i64, i64) {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let Ok(c) = rusqlite::Connection::open_with_flags(db, flags) else {
        return (0, 0);
    };
    let count = |committed: i64| {
        c.query_row(
            "SELECT count(*) FROM sluice_locks WHERE committed = ?1",
            [committed],
            |r| r.get(0),
        )
        .unwrap_or(0)
    };
    (count(0), count(1))
}

#[test]
fn a_second_run_skips_what_the_first_processed() {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(""));
    let first = d.sluice(
        &["run", "-c", "cfg.jsonnet"],
        lines([1, 2, 2, 3].into_iter()),
    );
    first.assert_clean_success();
    assert_eq!(ids_of(first.stdout_str()), vec![1, 2, 3]);
    let second = d.sluice(&["run", "-c", "cfg.jsonnet"], lines(2..=5));
    second.assert_clean_success();
    assert_eq!(ids_of(second.stdout_str()), vec![4, 5]);
    assert_eq!(lock_counts(&d.path().join("state/locks.sqlite")), (0, 5));
}

#[test]
fn two_processes_over_overlapping_input_process_each_key_once() {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(""));
    // Crossed order: each process meets the other's pending keys in its later batches.
    d.write("a.jsonl", lines(0..3000));
    d.write("b.jsonl", lines((1500..4500).rev()));
    let a = spawn(&d, "a.jsonl", "a.out", &["--batch-messages", "100"]);
    let b = spawn(&d, "b.jsonl", "b.out", &["--batch-messages", "100"]);
    let (sa, sb) = (wait(a, "process a"), wait(b, "process b"));
    assert!(sa.success(), "a: {}", d.read("a.out.err"));
    assert!(sb.success(), "b: {}", d.read("b.out.err"));
    let mut seen: HashMap<u32, u32> = HashMap::new();
    for id in ids_of(&d.read("a.out"))
        .into_iter()
        .chain(ids_of(&d.read("b.out")))
    {
        *seen.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "processed more than once: {twice:?}");
    assert_eq!(seen.len(), 4500, "every id processed");
    assert_eq!(lock_counts(&d.path().join("state/locks.sqlite")), (0, 4500));
}

#[test]
fn a_killed_run_leaves_pending_locks_that_a_rerun_processes() {
    let d = Dir::new();
    d.write("cfg.jsonnet", config("lease: '1s',"));
    let db = d.path().join("state/locks.sqlite");
    // The input stays open: the process locks and processes what it has read, then waits
    // for more, and never reaches its checkpoint.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "-c", "cfg.jsonnet", "--batch-messages", "1"])
        .current_dir(d.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting sluice");
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("stdin");
        stdin.write_all(lines(0..10).as_bytes()).expect("feeding");
        stdin.flush().expect("flushing");
    }
    let start = Instant::now();
    while lock_counts(&db).0 < 10 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no pending locks appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaping");
    assert_eq!(lock_counts(&db), (10, 0), "pending, never committed");

    // The source redelivers everything: the rerun waits out the dead owner's lease, takes
    // the keys over and processes all of it.
    let rerun = d.sluice(&["run", "-c", "cfg.jsonnet"], lines(0..12));
    rerun.assert_clean_success();
    assert_eq!(ids_of(rerun.stdout_str()), (0..12).collect::<Vec<_>>());
    assert_eq!(lock_counts(&db), (0, 12));

    // After a checkpoint, a redelivery is skipped.
    let again = d.sluice(&["run", "-c", "cfg.jsonnet"], lines(0..12));
    again.assert_stdout("");
}

#[test]
fn another_process_still_working_makes_the_run_fail_loudly_not_drop() {
    let d = Dir::new();
    d.write("cfg.jsonnet", config("lease: '1h', pending_wait: '300ms',"));
    let db = d.path().join("state/locks.sqlite");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "-c", "cfg.jsonnet", "--batch-messages", "1"])
        .current_dir(d.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting sluice");
    {
        use std::io::Write;
        let stdin = holder.stdin.as_mut().expect("stdin");
        stdin.write_all(lines(7..8).as_bytes()).expect("feeding");
        stdin.flush().expect("flushing");
    }
    let start = Instant::now();
    while lock_counts(&db).0 < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no pending lock appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = d.sluice(&["run", "-c", "cfg.jsonnet"], lines(6..9));
    out.assert_code(1);
    assert!(
        out.stderr.contains("key \"test:7\" is pending under"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("another process is processing that message"),
        "{}",
        out.stderr
    );
    holder.kill().expect("SIGKILL");
    holder.wait().expect("reaping");
    // The failed run released what it had taken: only the holder's key is locked.
    assert_eq!(lock_counts(&db), (1, 0));
}
