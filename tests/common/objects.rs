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
