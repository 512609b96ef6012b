//! What the tests of the sends that write one object per batch (`send_aws_s3`,
//! `send_gcp_storage`) share: the input lines and the check of the objects they become.

/// `n` JSON lines `{"n":I,"k":"0"|"1"}`, numbered, with a batch key of two values.
pub fn numbered_lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"n":{i},"k":"{}"}}"#, i % 2))
        .collect()
}

/// An object as read back: its name, its contents and its content type.
pub struct Object<'a> {
    /// The key or name.
    pub name: &'a str,
    /// Its bytes.
    pub body: &'a [u8],
    /// Its `Content-Type`.
    pub content_type: &'a str,
}

/// Checks objects written from `input` (numbered lines) in batches joined by `\n`: each is
/// named `PREFIX/YYYY/MM/DD/<uuid>SUFFIX` for today, is UTF-8 text, has no separator after
/// its last line; their line counts, sorted, are `sizes`; and every input line is in them
/// once, intact.
pub fn assert_batches_of_lines(
    objects: &[Object<'_>],
    prefix: &str,
    suffix: &str,
    sizes: &[usize],
    input: &[String],
) {
    let date = chrono::Utc::now().format("%Y/%m/%d").to_string();
    let mut got: Vec<String> = Vec::new();
    let mut counts = Vec::new();
    for o in objects {
        let id = o
            .name
            .strip_prefix(&format!("{prefix}/{date}/"))
            .and_then(|rest| rest.strip_suffix(suffix));
        assert!(
            id.is_some_and(|id| id.len() == 36 && id.split('-').count() == 5),
            "{}",
            o.name
        );
        assert_eq!(o.content_type, "text/plain; charset=utf-8", "{}", o.name);
        let text = std::str::from_utf8(o.body).unwrap();
        assert!(!text.ends_with('\n'), "the separator goes between items");
        counts.push(text.lines().count());
        got.extend(text.lines().map(String::from));
    }
    counts.sort();
    assert_eq!(counts, sizes);
    got.sort_by_key(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["n"].as_u64());
    assert_eq!(got, input, "every line once, intact");
}

/// Batch keys that would leave `file_path.prefix` if taken as they are.
pub const ESCAPING_BATCH_KEYS: [&str; 3] = ["../../escaped", "/rooted", "a/../../b"];

/// Runs `send` (a closure that runs the send's config with `use_batch_key_as_prefix` and
/// `file_path.prefix: 'logs'` over the input lines, keyed by `k`) once per escaping key:
/// each run fails naming the key and the setting; then every name `list` reads back stays
/// under `logs/`.
pub fn assert_escaping_batch_keys_refused(
    mut send: impl FnMut(&[String]) -> crate::common::Output,
    list: impl FnOnce() -> Vec<String>,
) {
    for key in ESCAPING_BATCH_KEYS {
        let input = vec![
            r#"{"k":"tenant"}"#.to_string(),
            format!(r#"{{"k":"{key}"}}"#),
        ];
        let out = send(&input);
        assert_ne!(out.code, Some(0), "{key}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("batch key {key:?}")),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("use_batch_key_as_prefix"),
            "{}",
            out.stderr
        );
    }
    let names = list();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("logs/") && !n.contains("..")),
        "{names:?}"
    );
}

/// A lock (sqlite, lease 1 s) around `sink` (a Jsonnet send, with `batch: { count: 3 }`
/// among its settings), keyed on `id`, then, when `stall`, a step that holds every message
/// for a minute, so the batch's object is written and its keys are never committed.
fn locked_sink_config(sink: &str, stall: bool) -> String {
    let after = if stall {
        ", sub.tf.util.delay({ duration: '60s' })"
    } else {
        ""
    };
    format!(
        r#"local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.sqlite({{ file: 'state/locks.sqlite' }}),
      prefix: 'test', ttl_offset: '1h', lease: '1s', pending_wait: '20s',
      object: {{ source_key: 'id' }}, duplicates: 'drop',
      transforms: [{sink}{after}],
    }}),
    sub.tf.util.drop(),
  ],
}}
"#
    )
}

/// The large fault run's `ddb_file`/`retry` cell, through the real binary: a run writes the
/// object of a batch of three messages and is killed (SIGKILL) before their keys are
/// committed; the source then redelivers them split in two, to two runs, which each take
/// over part of the crashed owner's keys. `objects` lists what the sink holds, as
/// `(name, contents)`. Each part finds the object the crashed run recorded in its locks and
/// writes nothing: one object holds each message, once.
pub fn assert_a_split_redelivery_writes_nothing_again(
    d: &super::Dir,
    sink: &str,
    env: &[(String, String)],
    objects: impl Fn() -> Vec<(String, Vec<u8>)>,
) {
    use std::time::{Duration, Instant};
    d.write("stall.jsonnet", locked_sink_config(sink, true));
    d.write("cfg.jsonnet", locked_sink_config(sink, false));
    let input = ["{\"id\":\"a\"}", "{\"id\":\"b\"}", "{\"id\":\"c\"}"];
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "-c", "stall.jsonnet"])
        .current_dir(d.path())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env_remove("SLUICE_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(d.path().join("stall.err")).expect("stderr file"))
        .spawn()
        .expect("starting sluice");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(format!("{}\n", input.join("\n")).as_bytes())
            .expect("feeding");
    }
    let start = Instant::now();
    while objects().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the stalled run never wrote its object: {}",
            std::fs::read_to_string(d.path().join("stall.err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("killing the run");
    child.wait().expect("reaping the run");
    let first = objects();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].1, input.join("\n").into_bytes());
    for part in [&input[..2], &input[2..]] {
        d.sluice_env(
            &["run", "-c", "cfg.jsonnet"],
            format!("{}\n", part.join("\n")),
            env,
        )
        .assert_clean_success();
    }
    assert_eq!(objects(), first, "nothing written again");
    let c = rusqlite::Connection::open(d.path().join("state/locks.sqlite")).expect("the locks");
    let committed: i64 = c
        .query_row(
            "SELECT count(*) FROM sluice_locks WHERE committed = 1",
            [],
            |r| r.get(0),
        )
        .expect("counting");
    assert_eq!(committed, 3, "every key committed");
}
