//! One object per batch under the lock: a batch's messages that come back split between
//! processes after a crash (the large fault run's `ddb_file`/`retry` cell: two live
//! workers each took over part of a killed run's batch) find the object the crashed
//! attempt wrote, through the placement it recorded in their locks, and are not written
//! again; if the object is not there, they are.

use super::*;

/// The files under `dir`, by name, with their contents.
fn files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A lock around `send_file` writing one file per 4 messages into `out`, separated by
/// commas.
fn objects_lock(f: &Fixture, out: &Path) -> Transform {
    let inner = json!([{"type": "send_file", "settings": {
        "file_path": {"prefix": out.to_str().unwrap(), "uuid": true},
        "separator": ",",
        "batch": {"count": 4}}}]);
    f.lock(inner, json!({"lease": "300ms", "pending_wait": "3s"}))
}

/// A process that wrote the file of `a,b,c,d` and died before committing their keys.
fn crash_after_writing(f: &Fixture, out: &Path) {
    let p = pipeline(vec![("lock", objects_lock(f, out))]);
    let sent = testing::block_on(p.apply(vec![msg("a"), msg("b"), msg("c"), msg("d")])).unwrap();
    std::mem::forget(sent); // its tokens never resolve, as in a killed process
    drop(p); // and it settles nothing
    assert_eq!(files(out), ["a,b,c,d"]);
    for k in ["a", "b", "c", "d"] {
        let r = f.record(&hash(k)).unwrap();
        assert!(!r.committed, "{k} pending");
        assert!(
            r.progress.as_deref().is_some_and(|p| p.contains('>')),
            "{k}'s record names the object its message went into: {r:?}"
        );
    }
}

/// Two processes take over two halves of the batch each.
fn take_over_in_halves(f: &Fixture, out: &Path) {
    for half in [["a", "b"], ["c", "d"]] {
        let p = pipeline(vec![("lock", objects_lock(f, out))]);
        let mut msgs: Vec<Message> = half.iter().map(|d| msg(d)).collect();
        msgs.push(ctrl());
        apply_and_settle(&p, msgs).unwrap();
    }
    for k in ["a", "b", "c", "d"] {
        assert!(f.record(&hash(k)).unwrap().committed, "{k} committed");
    }
}

#[test]
fn a_batch_split_between_takers_is_not_written_again() {
    let f = Fixture::new();
    let out = f._dir.path().join("split");
    crash_after_writing(&f, &out);
    take_over_in_halves(&f, &out);
    assert_eq!(files(&out), ["a,b,c,d"], "no message written twice");
}

#[test]
fn a_placement_whose_object_is_missing_is_written_by_the_taker() {
    let f = Fixture::new();
    let out = f._dir.path().join("missing");
    crash_after_writing(&f, &out);
    // The object never made it (the crash came between the record and the write).
    for e in std::fs::read_dir(&out).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    take_over_in_halves(&f, &out);
    assert_eq!(files(&out), ["a,b", "c,d"], "each message written once");
}
