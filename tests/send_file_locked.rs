//! Exactly once into files across a crash, through the real `sluice` binary:
//! `meta_kv_store_lock` (sqlite) around `send_file`. Each run starts from the state a crash
//! after the write and before the commit leaves (the batch's keys pending since T0 under a
//! dead owner, lease ended, written with the sqlite lock store's own API): the first run
//! writes the batch's file, the second, over the same input, writes it again under the same
//! name (its keys' hash and T0's day), so one file holds the batch, not two.

use std::path::{Path, PathBuf};

use sluice_transforms::kv_store::lock::sqlite::SqliteStore;
use sluice_transforms::kv_store::lock::{AcquireRequest, LockStore};

use crate::common::{Dir, runtime};

/// 2024-01-02T03:04:05Z: when the first attempt at the batch took its keys.
pub(crate) const T0: i64 = 1_704_164_645_000;

const CONFIG: &str = r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.sqlite({ file: 'state/locks.sqlite' }),
      prefix: 'test',
      // The fabricated crash is at T0 (2024): a window that still holds it.
      ttl_offset: '87600h',
      object: { source_key: 'id' },
      duplicates: 'drop',
      transforms: [
        sub.tf.send.file({
          file_path: { prefix: 'out', time_format: '2006/01/02', uuid: true, suffix: '.jsonl' },
          separator: '\n',
        }),
      ],
    }),
    sub.tf.util.drop(),
  ],
}
"#;

/// Leaves the lock store as a crash after the write leaves it: `keys` pending since T0
/// under a dead owner whose lease ended, nothing else.
pub(crate) fn crashed_before_commit(dir: &Path, keys: &[&str]) {
    let state = dir.join("state");
    let _ = std::fs::remove_dir_all(&state);
    std::fs::create_dir_all(&state).unwrap();
    let store = SqliteStore::open(state.join("locks.sqlite")).unwrap();
    let ttl = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 3600;
    let requests: Vec<AcquireRequest> = keys
        .iter()
        .map(|k| AcquireRequest {
            key: k.to_string(),
            ttl,
            lease_until_ms: T0 + 1,
            skew_ms: 0,
            fresh_before_ms: None,
        })
        .collect();
    for r in runtime().block_on(store.acquire("crashed-owner", T0, &requests, 4)) {
        r.expect("acquired");
    }
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// How many locks are committed.
pub(crate) fn committed(dir: &Path) -> i64 {
    let c = rusqlite::Connection::open(dir.join("state/locks.sqlite")).unwrap();
    c.query_row(
        "SELECT count(*) FROM sluice_locks WHERE committed = 1",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_batch_written_again_after_a_crash_replaces_its_file() {
    let d = Dir::new();
    d.write("cfg.jsonnet", CONFIG);
    let input = "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
    let keys = ["test:a", "test:b", "test:c"];

    crashed_before_commit(d.path(), &keys);
    d.sluice(&["run", "-c", "cfg.jsonnet"], input)
        .assert_clean_success();
    assert_eq!(committed(d.path()), 3);
    let first = files(&d.path().join("out"));
    assert_eq!(first.len(), 1, "{first:?}");
    let name = first[0]
        .strip_prefix(d.path())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("out/2024/01/02/") && name.ends_with(".jsonl"),
        "named after T0's day: {name}"
    );

    // The run crashed before its commit: the keys are pending again, the file is there,
    // and the source delivers the same input again.
    crashed_before_commit(d.path(), &keys);
    d.sluice(&["run", "-c", "cfg.jsonnet"], input)
        .assert_clean_success();
    assert_eq!(committed(d.path()), 3);
    assert_eq!(
        files(&d.path().join("out")),
        first,
        "the same file, not a second"
    );
    assert_eq!(
        d.read(&name),
        "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}"
    );

    // Without the earlier attempt (fresh keys), another batch is another file.
    d.sluice(
        &["run", "-c", "cfg.jsonnet"],
        "{\"id\":\"d\"}\n{\"id\":\"e\"}\n",
    )
    .assert_clean_success();
    assert_eq!(files(&d.path().join("out")).len(), 2);
}

/// Issue 50, finding 3: "once per key per window" into objects named after their keys: an
/// alert keyed on its host, deduplicated for the TTL, got the same name in the next window
/// and replaced the earlier, legitimately written file. The name now holds each key's first
/// attempt, which a key taken afresh after its TTL does not share.
#[test]
fn a_recurring_key_after_its_ttl_writes_a_new_file_beside_the_earlier_one() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.sqlite({ file: 'state/locks.sqlite' }),
      prefix: 'alert',
      lease: '1s',
      ttl_offset: '1s',
      object: { source_key: 'host' },
      duplicates: 'drop',
      transforms: [sub.tf.send.file({ file_path: { prefix: 'alerts', uuid: true, suffix: '.json' } })],
    }),
    sub.tf.util.drop(),
  ],
}
"#,
    );
    let first = "{\"host\":\"h1\",\"alert\":1}";
    d.sluice(&["run", "-c", "cfg.jsonnet"], format!("{first}\n"))
        .assert_clean_success();
    // Within the TTL the same host is a duplicate; past it, the next window's alert.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let second = "{\"host\":\"h1\",\"alert\":2}";
    d.sluice(&["run", "-c", "cfg.jsonnet"], format!("{second}\n"))
        .assert_clean_success();
    let written = files(&d.path().join("alerts"));
    assert_eq!(written.len(), 2, "{written:?}");
    let mut texts: Vec<String> = written
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    texts.sort();
    assert_eq!(texts, [first, second]);
}

/// Issue 50's review, F3: a message fanned out into records that a send writes in several
/// batches (`batch.count: 1`) gave every batch the same key-named file, each replacing the
/// last: two of three records lost in a clean run. Each batch now names its copies.
#[test]
fn a_message_fanned_out_over_several_batches_writes_each_batch_once() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.sqlite({ file: 'state/locks.sqlite' }),
      object: { source_key: 'id' },
      transforms: [
        sub.tf.obj.cp({ obj: { src: 'events' } }),
        sub.tf.agg.from.arr(),
        sub.tf.send.file({ file_path: { prefix: 'out', uuid: true, suffix: '.json' }, batch: { count: 1 } }),
      ],
    }),
    sub.tf.util.drop(),
  ],
}
"#,
    );
    let input = "{\"id\":\"f-1\",\"events\":[{\"e\":1},{\"e\":2},{\"e\":3}]}\n";
    d.sluice(&["run", "-c", "cfg.jsonnet"], input)
        .assert_clean_success();
    let mut texts: Vec<String> = files(&d.path().join("out"))
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    texts.sort();
    assert_eq!(texts, ["{\"e\":1}", "{\"e\":2}", "{\"e\":3}"]);
    assert_eq!(committed(d.path()), 1);
}

/// The large fault run's `ddb_file`/`retry` cell: a batch's file written, the run killed
/// before its commit, its messages redelivered split between two runs. Each finds the file
/// the killed run recorded in its locks and writes nothing again.
#[test]
fn a_redelivery_split_between_runs_writes_no_file_again() {
    let d = Dir::new();
    let sink = "sub.tf.send.file({ file_path: { prefix: 'out', uuid: true, suffix: '.jsonl' }, \
                separator: '\\n', batch: { count: 3 } })";
    let out = d.path().join("out");
    crate::common::objects::assert_a_split_redelivery_writes_nothing_again(&d, sink, &[], || {
        files(&out)
            .into_iter()
            .filter(|f| !f.file_name().unwrap().to_string_lossy().starts_with('.'))
            .map(|f| (f.display().to_string(), std::fs::read(&f).unwrap()))
            .collect()
    });
}
