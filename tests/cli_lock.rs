//! `meta_kv_store_lock` through the real `sluice` binary, with the embedded store (sqlite)
//! and with DynamoDB (the emulator): exactly-once across runs, two processes at once over
//! overlapping input sharing one store, a process killed between acquisition and
//! checkpoint, a process frozen past its lease, and a process idle on an open input.
//! Every scenario runs against both stores.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Dir, dynamodb};

/// Where the locks are.
enum Store {
    /// `state/locks.sqlite` in the test's directory.
    Sqlite,
    /// A fresh table in the test binary's DynamoDB emulator, locks taken as `acquire`
    /// says (`lock_acquire`; `None`: the default).
    DynamoDb {
        endpoint: String,
        table: String,
        acquire: Option<&'static str>,
    },
}

impl Store {
    fn dynamodb() -> Store {
        Store::dynamodb_taking(None)
    }

    fn dynamodb_taking(acquire: Option<&'static str>) -> Store {
        let endpoint = dynamodb::endpoint();
        let table = dynamodb::unique_table("cli-lock");
        runtime().block_on(dynamodb::create_lock_table(
            &endpoint, &table, "PK", None, "ttl",
        ));
        Store::DynamoDb {
            endpoint,
            table,
            acquire,
        }
    }

    /// The `kv_store` setting.
    fn kv_store(&self) -> String {
        match self {
            Store::Sqlite => "sub.kv_store.sqlite({ file: 'state/locks.sqlite' })".into(),
            Store::DynamoDb { table, acquire, .. } => {
                let acquire = acquire.map_or(String::new(), |a| format!(", lock_acquire: '{a}'"));
                format!(
                    "sub.kv_store.aws.dynamodb({{ aws: {{ arn: 'arn:aws:dynamodb:us-east-1:000000000000:table/{table}' }}, attributes: {{ partition_key: 'PK', ttl: 'ttl' }}{acquire} }})"
                )
            }
        }
    }

    /// What a `sluice` process needs to reach the store.
    fn env(&self) -> Vec<(String, String)> {
        match self {
            Store::Sqlite => Vec::new(),
            Store::DynamoDb { endpoint, .. } => dynamodb::process_env(endpoint),
        }
    }

    /// (pending, committed) locks (sqlite: (0, 0) before the file exists).
    fn counts(&self, dir: &Dir) -> (i64, i64) {
        match self {
            Store::Sqlite => sqlite_counts(&dir.path().join("state/locks.sqlite")),
            Store::DynamoDb {
                endpoint, table, ..
            } => {
                let items = runtime().block_on(dynamodb::scan(endpoint, table));
                // A key pending in an epoch (`lock_acquire: 'epochs'`) is committed when its
                // slot is in its epoch record's committed set.
                let committed_in_epoch = |i: &dynamodb::Item| {
                    let epoch = format!("#epoch:{}:{}", i["lock_owner"], i["lock_epoch"]);
                    items.iter().any(|e| {
                        e["PK"] == epoch
                            && e.get("lock_committed")
                                .is_some_and(|c| c.contains(&format!("\"{}\"", i["lock_slot"])))
                    })
                };
                let state = |i: &dynamodb::Item| -> Option<String> {
                    match i.get("lock_status").map(String::as_str) {
                        Some("epoch") if committed_in_epoch(i) => Some("committed".into()),
                        Some("epoch") => Some("pending".into()),
                        other => other.map(str::to_string),
                    }
                };
                let status = |s: &str| {
                    items
                        .iter()
                        .filter(|i| state(i).as_deref() == Some(s))
                        .count() as i64
                };
                (status("pending"), status("committed"))
            }
        }
    }

    /// The owner of the lock on `key`.
    fn owner_of(&self, dir: &Dir, key: &str) -> String {
        match self {
            Store::Sqlite => {
                let c = rusqlite::Connection::open(dir.path().join("state/locks.sqlite"))
                    .expect("opening the lock store");
                c.query_row(
                    "SELECT owner FROM sluice_locks WHERE key = ?1",
                    [key],
                    |r| r.get(0),
                )
                .expect("the lock")
            }
            Store::DynamoDb {
                endpoint, table, ..
            } => {
                let item = runtime()
                    .block_on(dynamodb::get_item(endpoint, table, &[("PK", key)]))
                    .expect("the lock");
                item["lock_owner"].clone()
            }
        }
    }

    /// Every lock key in the store.
    fn keys(&self, dir: &Dir) -> Vec<String> {
        match self {
            Store::Sqlite => {
                let c = rusqlite::Connection::open(dir.path().join("state/locks.sqlite"))
                    .expect("opening the lock store");
                let mut st = c.prepare("SELECT key FROM sluice_locks").expect("a query");
                st.query_map([], |r| r.get(0))
                    .expect("the keys")
                    .map(Result::unwrap)
                    .collect()
            }
            Store::DynamoDb {
                endpoint, table, ..
            } => runtime()
                .block_on(dynamodb::scan(endpoint, table))
                .into_iter()
                .map(|i| i["PK"].clone())
                .collect(),
        }
    }

    /// A configured run of `sluice args...` in `dir`.
    fn command(&self, dir: &Dir, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.args(args)
            .current_dir(dir.path())
            .env_remove("SLUICE_LOG")
            .envs(self.env());
        c
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A lock keyed by `id` whose inner list marks the message and prints it; duplicates are
/// dropped, so stdout holds exactly what this process processed.
fn config(store: &Store, extra: &str) -> String {
    let kv = store.kv_store();
    format!(
        r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: {kv},
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
fn spawn(store: &Store, dir: &Dir, input: &str, output: &str, extra_args: &[&str]) -> Child {
    let mut args = vec!["run", "-c", "cfg.jsonnet"];
    args.extend_from_slice(extra_args);
    store
        .command(dir, &args)
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

/// (pending, committed) lock counts in an sqlite store file ((0, 0) before it exists).
pub(crate) fn sqlite_counts(db: &Path) -> (i64, i64) {
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

fn a_second_run_skips_what_the_first_processed(store: Store) {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&store, ""));
    let run = |input: String| d.sluice_env(&["run", "-c", "cfg.jsonnet"], input, &store.env());
    let first = run(lines([1, 2, 2, 3].into_iter()));
    first.assert_clean_success();
    assert_eq!(ids_of(first.stdout_str()), vec![1, 2, 3]);
    let second = run(lines(2..=5));
    second.assert_clean_success();
    assert_eq!(ids_of(second.stdout_str()), vec![4, 5]);
    assert_eq!(store.counts(&d), (0, 5));
}

/// New messages, in batches of many keys, then the same messages again: every one a
/// duplicate, dropped; nothing processed twice, every lock committed.
fn the_same_messages_again_are_all_duplicates(store: Store) {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&store, ""));
    let run = |input: String| {
        d.sluice_env(
            &["run", "-c", "cfg.jsonnet", "--batch-messages", "250"],
            input,
            &store.env(),
        )
    };
    let first = run(lines(0..600));
    first.assert_clean_success();
    assert_eq!(ids_of(first.stdout_str()), (0..600).collect::<Vec<_>>());
    assert_eq!(store.counts(&d), (0, 600));
    let again = run(lines(0..600));
    again.assert_clean_success();
    assert_eq!(ids_of(again.stdout_str()), Vec::<u32>::new());
    assert_eq!(store.counts(&d), (0, 600));
    // At debug level each duplicate is logged with its holder in words, not a Rust value.
    let mut env = store.env();
    env.push(("SLUICE_LOG".into(), "sluice_transforms=debug".into()));
    let logged = d.sluice_env(&["run", "-c", "cfg.jsonnet"], lines(0..2), &env);
    let stderr = &logged.assert_code(0).stderr;
    let held: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("duplicate: the key is held"))
        .collect();
    assert_eq!(held.len(), 2, "{stderr}");
    for line in held {
        assert!(
            line.contains("(committed)") && !line.contains("Some(") && !line.contains("LockRecord"),
            "{line}"
        );
    }
}

fn two_processes_over_overlapping_input_process_each_key_once(store: Store) {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&store, ""));
    // Crossed order: each process meets the other's pending keys in its later batches.
    d.write("a.jsonl", lines(0..3000));
    d.write("b.jsonl", lines((1500..4500).rev()));
    let a = spawn(&store, &d, "a.jsonl", "a.out", &["--batch-messages", "100"]);
    let b = spawn(&store, &d, "b.jsonl", "b.out", &["--batch-messages", "100"]);
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
    assert_eq!(store.counts(&d), (0, 4500));
}

/// Substation's consumer pattern (a send inside the lock, the send that matters after it)
/// over crossed, overlapping input in two processes: a key is committed only once the send
/// after the lock delivered it, so at the end of input each process would wait
/// `pending_wait` for keys the other commits only after its own wait, and fail them. The
/// checkpoint before the last ctrl commits what each delivered first: both end at once,
/// exit 0, and every id comes out once.
fn two_consumers_with_the_send_after_the_lock_do_not_wait_on_each_other(store: Store) {
    let d = Dir::new();
    let kv = store.kv_store();
    d.write(
        "cfg.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: {kv},
      prefix: 'test',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      duplicates: 'drop',
      // Waiting on each other would take this long (and then fail the keys): far above
      // what the two runs take on a loaded machine, so the time below tells them apart.
      pending_wait: '60s',
      transforms: [sub.tf.obj.insert({{ obj: {{ trg: 'processed' }}, value: true }})],
    }}),
    sub.tf.send.stdout(),
  ],
}}
"#
        ),
    );
    d.write("a.jsonl", lines(0..3000));
    d.write("b.jsonl", lines((0..3000).rev()));
    let started = std::time::Instant::now();
    let a = spawn(&store, &d, "a.jsonl", "a.out", &["--batch-messages", "10"]);
    let b = spawn(&store, &d, "b.jsonl", "b.out", &["--batch-messages", "10"]);
    let (sa, sb) = (wait(a, "process a"), wait(b, "process b"));
    assert!(sa.success(), "a: {}", d.read("a.out.err"));
    assert!(sb.success(), "b: {}", d.read("b.out.err"));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "they waited on each other: {:?}",
        started.elapsed()
    );
    let mut seen: HashMap<u32, u32> = HashMap::new();
    for id in ids_of(&d.read("a.out"))
        .into_iter()
        .chain(ids_of(&d.read("b.out")))
    {
        *seen.entry(id).or_default() += 1;
    }
    assert!(seen.values().all(|n| *n == 1), "an id came out twice");
    assert_eq!(seen.len(), 3000, "every id once");
    assert_eq!(store.counts(&d), (0, 3000));
}

/// Starts a `sluice run` that reads one message at a time from a pipe kept open, with no
/// checkpoint while it stays open (`--flush-idle off`: a holder whose send keeps its
/// messages, and so its keys pending); its outputs are piped when `captured`, else
/// discarded.
fn spawn_holding(store: &Store, d: &Dir, input: String, captured: bool) -> Child {
    let out = || {
        if captured {
            Stdio::piped()
        } else {
            Stdio::null()
        }
    };
    let mut child = store
        .command(
            d,
            &[
                "run",
                "-c",
                "cfg.jsonnet",
                "--batch-messages",
                "1",
                "--flush-idle",
                "off",
            ],
        )
        .stdin(Stdio::piped())
        .stdout(out())
        .stderr(out())
        .spawn()
        .expect("starting sluice");
    use std::io::Write;
    let stdin = child.stdin.as_mut().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("feeding");
    stdin.flush().expect("flushing");
    child
}

fn wait_for_pending(store: &Store, d: &Dir, n: i64) {
    let start = Instant::now();
    while store.counts(d).0 < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{n} pending locks did not appear"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn a_killed_run_leaves_pending_locks_that_a_rerun_processes(store: Store) {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&store, "lease: '1s',"));
    // The input stays open: the process locks and processes what it has read, then waits
    // for more, and never reaches its checkpoint.
    let mut child = spawn_holding(&store, &d, lines(0..10), false);
    wait_for_pending(&store, &d, 10);
    child.kill().expect("SIGKILL");
    child.wait().expect("reaping");
    assert_eq!(store.counts(&d), (10, 0), "pending, never committed");

    // The source redelivers everything: the rerun waits out the dead owner's lease, takes
    // the keys over and processes all of it.
    let run = |input: String| d.sluice_env(&["run", "-c", "cfg.jsonnet"], input, &store.env());
    let rerun = run(lines(0..12));
    rerun.assert_clean_success();
    // 10 and 11 were free and go first; 0..9 waited for the dead owner's lease.
    let mut ids = ids_of(rerun.stdout_str());
    assert_eq!(&ids[..2], [10, 11]);
    ids.sort_unstable();
    assert_eq!(ids, (0..12).collect::<Vec<_>>());
    assert_eq!(store.counts(&d), (0, 12));

    // After a checkpoint, a redelivery is skipped.
    run(lines(0..12)).assert_stdout("");
}

fn another_process_still_working_fails_only_its_message_loudly(store: Store) {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        config(&store, "lease: '1h', pending_wait: '300ms',"),
    );
    // The holder's send keeps its batch (up to a minute), so its key stays pending.
    let mut holder = spawn_holding(&store, &d, lines(7..8), false);
    wait_for_pending(&store, &d, 1);
    let out = d.sluice_env(&["run", "-c", "cfg.jsonnet"], lines(6..9), &store.env());
    out.assert_code(1);
    // The others went through; 7 is named, with why, and the run fails.
    assert_eq!(ids_of(out.stdout_str()), vec![6, 8]);
    for want in [
        "<stdin>:2: not delivered",
        "its lock key is pending under",
        "another process is processing that message",
        "1 of 3 input lines were not delivered",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
    holder.kill().expect("SIGKILL");
    holder.wait().expect("reaping");
    assert_eq!(
        store.counts(&d),
        (1, 2),
        "the holder's key, and 6 and 8 committed"
    );
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn a_late_owner_never_commits_a_lock_another_process_took_over(store: Store) {
    let d = Dir::new();
    d.write("cfg.jsonnet", config(&store, "lease: '500ms',"));
    // A takes the key; its send holds the message until the end of input.
    let mut a = spawn_holding(&store, &d, lines(5..6), true);
    wait_for_pending(&store, &d, 1);
    let a_pid = a.id();
    assert!(
        store
            .owner_of(&d, "test:#5")
            .contains(&format!("/{a_pid}/"))
    );
    // A is frozen (a paused machine, a stop signal) past its lease: it cannot renew.
    signal(a_pid, "-STOP");
    std::thread::sleep(Duration::from_millis(800));
    // B, a redelivery elsewhere, takes the expired lease over and commits.
    let b = d.sluice_env(&["run", "-c", "cfg.jsonnet"], lines(5..6), &store.env());
    b.assert_clean_success();
    assert_eq!(ids_of(b.stdout_str()), vec![5]);
    let b_owner = store.owner_of(&d, "test:#5");
    assert!(!b_owner.contains(&format!("/{a_pid}/")), "{b_owner}");
    // A wakes up and finishes: it checks its lease before sending, so it does not send the
    // message B processed (it fails the line, for its source to know), and its renewal and
    // settlement must not touch B's lock.
    signal(a_pid, "-CONT");
    drop(a.stdin.take());
    let out = a.wait_with_output().expect("a finishes");
    let a_err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{a_err}");
    assert_eq!(
        ids_of(&String::from_utf8_lossy(&out.stdout)),
        Vec::<u32>::new(),
        "A did not send it: {a_err}"
    );
    assert!(a_err.contains("data was not sent"), "{a_err}");
    assert_eq!(store.owner_of(&d, "test:#5"), b_owner, "still B's");
    assert_eq!(store.counts(&d), (0, 1));
}

fn a_holder_on_idle_input_commits_what_it_delivered(store: Store) {
    let d = Dir::new();
    // The send flushes after 200 ms; the input stays open and idle; the lease is short.
    d.write(
        "cfg.jsonnet",
        config(&store, "lease: '1s',").replace(
            "sub.tf.send.stdout()",
            "sub.tf.send.stdout({ batch: { duration: '200ms' } })",
        ),
    );
    let mut a = spawn_holding(&store, &d, lines(0..5), true);
    let start = Instant::now();
    while store.counts(&d) != (0, 5) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not committed while idle: {:?}",
            store.counts(&d)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Long past the lease, a redelivery elsewhere finds them all done.
    std::thread::sleep(Duration::from_millis(1500));
    let b = d.sluice_env(&["run", "-c", "cfg.jsonnet"], lines(0..5), &store.env());
    b.assert_clean_success();
    b.assert_stdout("");
    drop(a.stdin.take());
    let out = a.wait_with_output().expect("a finishes");
    assert!(out.status.success());
    assert_eq!(
        ids_of(&String::from_utf8_lossy(&out.stdout)),
        (0..5).collect::<Vec<_>>()
    );
}

/// A message that a transform inside the lock fails (here: id 2, refused by `utility_err`)
/// fails alone: the others are processed and committed, its line is named, the run exits
/// 1, and its key is given back, so a later run processes it.
fn a_message_failed_inside_the_lock_fails_alone_and_its_key_is_given_back(store: Store) {
    let d = Dir::new();
    let refusing = |refuse: &str| {
        config(
            &store,
            &format!(
                "transforms: [sub.tf.meta.switch({{ cases: [{{ condition: sub.cnd.str.eq({{ obj: {{ src: 'id' }}, value: '{refuse}' }}), transforms: [sub.tf.util.err({{ message: 'id {refuse} refused' }})] }}] }}), sub.tf.obj.insert({{ obj: {{ trg: 'processed' }}, value: true }}), sub.tf.send.stdout()],"
            ),
        )
        .replacen(
            "transforms: [\n        sub.tf.obj.insert({ obj: { trg: 'processed' }, value: true }),\n        sub.tf.send.stdout(),\n      ],",
            "",
            1,
        )
    };
    d.write("cfg.jsonnet", refusing("2"));
    let run = |input: String| d.sluice_env(&["run", "-c", "cfg.jsonnet"], input, &store.env());
    let first = run(lines(1..=3));
    first.assert_code(1);
    assert_eq!(ids_of(first.stdout_str()), vec![1, 3]);
    assert!(
        first.stderr.contains("<stdin>:2: not delivered:") && first.stderr.contains("id 2 refused"),
        "{}",
        first.stderr
    );
    assert_eq!(
        store.counts(&d),
        (0, 2),
        "2 committed, id 2's key given back"
    );
    d.write("cfg.jsonnet", refusing("none"));
    let second = run(lines(1..=3));
    second.assert_clean_success();
    assert_eq!(ids_of(second.stdout_str()), vec![2]);
}

/// A send inside the lock that gives up on a batch (here: one batch key's directory cannot
/// be made) fails that batch's messages alone: the others are written and committed, its
/// keys are given back, and once the path is fixed a rerun of the same input writes those
/// and nothing else again.
fn a_send_inside_the_lock_that_gives_up_fails_its_batch_alone(store: Store) {
    let d = Dir::new();
    let kv = store.kv_store();
    d.write(
        "cfg.jsonnet",
        format!(
            r#"
local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: {kv},
      prefix: 'test',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      transforms: [
        sub.tf.send.file({{
          file_path: {{ prefix: 'out', uuid: true }},
          use_batch_key_as_prefix: true,
          separator: '\n',
          object: {{ batch_key: 'g' }},
          batch: {{ count: 5 }},
        }}),
      ],
    }}),
  ],
}}
"#
        ),
    );
    std::fs::create_dir_all(d.path().join("out")).unwrap();
    d.write("out/blocked", "not a directory");
    let input: String = (1..=30)
        .map(|i| {
            let g = if i % 3 == 0 { "blocked" } else { "ok" };
            format!("{{\"id\":{i},\"g\":\"{g}\"}}\n")
        })
        .collect();
    fn walk(dir: &std::path::Path, ids: &mut Vec<u64>) {
        for f in std::fs::read_dir(dir).into_iter().flatten() {
            let path = f.unwrap().path();
            if path.is_dir() {
                walk(&path, ids);
                continue;
            }
            for l in std::fs::read_to_string(&path).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                ids.push(v["id"].as_u64().unwrap());
            }
        }
    }
    let ids_in = |dir: &str| -> Vec<u64> {
        let mut ids = Vec::new();
        walk(&d.path().join(dir), &mut ids);
        ids.sort_unstable();
        ids
    };
    let run = || d.sluice_env(&["run", "-c", "cfg.jsonnet"], input.clone(), &store.env());
    let first = run();
    first.assert_code(1);
    assert!(
        first
            .stderr
            .contains("10 of 30 input lines were not delivered")
            && first.stderr.contains("<stdin>:3: not delivered:")
            && first.stderr.contains("Not a directory"),
        "{}",
        first.stderr
    );
    let others: Vec<u64> = (1..=30).filter(|i| i % 3 != 0).collect();
    assert_eq!(ids_in("out/ok"), others);
    assert_eq!(store.counts(&d), (0, 20), "20 committed, 10 given back");

    std::fs::remove_file(d.path().join("out/blocked")).unwrap();
    let second = run();
    second.assert_code(0);
    assert_eq!(ids_in("out/ok"), others, "nothing written twice");
    let failed: Vec<u64> = (1..=30).filter(|i| i % 3 == 0).collect();
    assert_eq!(ids_in("out/blocked"), failed);
    assert_eq!(store.counts(&d), (0, 30));
}

/// A prefix of 1,100 bytes with a value of 1,000 (a key of 2,101 bytes, over DynamoDB's
/// 2,048-byte partition key: its text is hashed) and one of 947 (a key of exactly 2,048
/// bytes, kept as it is), in one batch with short keys and a duplicate: every message is
/// processed exactly once, the batch is not failed by the long keys, and a second run of the
/// same input processes nothing.
fn a_long_prefix_with_long_values_takes_its_locks_with_the_rest_of_the_batch(store: Store) {
    let d = Dir::new();
    let prefix = "p".repeat(1100);
    d.write(
        "cfg.jsonnet",
        config(&store, "").replacen("prefix: 'test'", &format!("prefix: '{prefix}'"), 1),
    );
    let hashed = "x".repeat(1000);
    let edge = "y".repeat(947);
    let ids = [
        "1".to_string(),
        format!("\"{hashed}\""),
        "2".to_string(),
        format!("\"{edge}\""),
        format!("\"{hashed}\""),
        "3".to_string(),
    ];
    let input: String = ids.iter().map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let run = || {
        d.sluice_env(
            &["run", "-c", "cfg.jsonnet", "--batch-messages", "100"],
            input.clone(),
            &store.env(),
        )
    };
    let processed = |stdout: &str| -> Vec<String> {
        stdout
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("JSON output");
                assert_eq!(v["processed"], true, "{l}");
                v["id"].to_string()
            })
            .collect()
    };
    let started = Instant::now();
    let first = run();
    first.assert_clean_success();
    let mut once: Vec<String> = ids.to_vec();
    once.remove(4);
    assert_eq!(processed(first.stdout_str()), once, "each message once");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no retries: {:?}",
        started.elapsed()
    );
    assert_eq!(store.counts(&d), (0, 5));
    let mut keys = store.keys(&d);
    keys.sort_unstable_by_key(|k| k.len());
    let lens: Vec<usize> = keys.iter().map(String::len).collect();
    assert_eq!(lens, [1103, 1103, 1103, 1100 + 1 + 72, 2048], "{keys:?}");
    assert!(
        keys[3].starts_with(&format!("{prefix}:#sha256:")),
        "{}",
        keys[3]
    );
    assert_eq!(keys[4], format!("{prefix}:{edge}"));
    let again = run();
    again.assert_clean_success();
    assert_eq!(processed(again.stdout_str()), Vec::<String>::new());
    assert_eq!(store.counts(&d), (0, 5));
}

/// One `#[test]` per scenario and store.
macro_rules! on_both_stores {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $scenario() { super::$scenario(super::Store::Sqlite) })*
        }
        mod aws_dynamodb {
            $(#[test] fn $scenario() { super::$scenario(super::Store::dynamodb()) })*
        }
    };
}

on_both_stores!(
    a_second_run_skips_what_the_first_processed,
    the_same_messages_again_are_all_duplicates,
    two_processes_over_overlapping_input_process_each_key_once,
    a_killed_run_leaves_pending_locks_that_a_rerun_processes,
    another_process_still_working_fails_only_its_message_loudly,
    a_late_owner_never_commits_a_lock_another_process_took_over,
    a_holder_on_idle_input_commits_what_it_delivered,
    a_message_failed_inside_the_lock_fails_alone_and_its_key_is_given_back,
    a_send_inside_the_lock_that_gives_up_fails_its_batch_alone,
    two_consumers_with_the_send_after_the_lock_do_not_wait_on_each_other,
    a_long_prefix_with_long_values_takes_its_locks_with_the_rest_of_the_batch,
);

/// The DynamoDB store taking and committing locks with PartiQL statements
/// (`lock_acquire: 'statements'`), through the scenarios that take, hold, commit, take over
/// and deduplicate keys.
mod aws_dynamodb_statements {
    fn store() -> super::Store {
        super::Store::dynamodb_taking(Some("statements"))
    }

    #[test]
    fn a_second_run_skips_what_the_first_processed() {
        super::a_second_run_skips_what_the_first_processed(store())
    }

    #[test]
    fn the_same_messages_again_are_all_duplicates() {
        super::the_same_messages_again_are_all_duplicates(store())
    }

    #[test]
    fn two_processes_over_overlapping_input_process_each_key_once() {
        super::two_processes_over_overlapping_input_process_each_key_once(store())
    }

    #[test]
    fn a_killed_run_leaves_pending_locks_that_a_rerun_processes() {
        super::a_killed_run_leaves_pending_locks_that_a_rerun_processes(store())
    }

    #[test]
    fn a_late_owner_never_commits_a_lock_another_process_took_over() {
        super::a_late_owner_never_commits_a_lock_another_process_took_over(store())
    }

    #[test]
    fn a_long_prefix_with_long_values_takes_its_locks_with_the_rest_of_the_batch() {
        super::a_long_prefix_with_long_values_takes_its_locks_with_the_rest_of_the_batch(store())
    }
}

/// The DynamoDB store taking locks one `UpdateItem` per key (`lock_acquire: 'items'`).
mod aws_dynamodb_items {
    #[test]
    fn a_long_prefix_with_long_values_takes_its_locks_with_the_rest_of_the_batch() {
        super::a_long_prefix_with_long_values_takes_its_locks_with_the_rest_of_the_batch(
            super::Store::dynamodb_taking(Some("items")),
        )
    }
}

/// The DynamoDB store committing by epoch (`lock_acquire: 'epochs'`), through the
/// scenarios that take, hold, commit, take over and deduplicate keys.
mod aws_dynamodb_epochs {
    fn store() -> super::Store {
        super::Store::dynamodb_taking(Some("epochs"))
    }

    #[test]
    fn a_second_run_skips_what_the_first_processed() {
        super::a_second_run_skips_what_the_first_processed(store())
    }

    #[test]
    fn the_same_messages_again_are_all_duplicates() {
        super::the_same_messages_again_are_all_duplicates(store())
    }

    #[test]
    fn two_processes_over_overlapping_input_process_each_key_once() {
        super::two_processes_over_overlapping_input_process_each_key_once(store())
    }

    #[test]
    fn a_killed_run_leaves_pending_locks_that_a_rerun_processes() {
        super::a_killed_run_leaves_pending_locks_that_a_rerun_processes(store())
    }

    #[test]
    fn a_late_owner_never_commits_a_lock_another_process_took_over() {
        super::a_late_owner_never_commits_a_lock_another_process_took_over(store())
    }
}
