//! `send_gcp_storage` through the real `sluice` binary against the Cloud Storage emulator
//! (`STORAGE_EMULATOR_HOST`, as Google's clients read it): lines go in, and the objects are
//! read back (names, contents, content types), including a resumable upload of an object
//! larger than one chunk and gzip through an auxiliary transform.

use std::io::Read;

use crate::common::objects::{
    Object, assert_batches_of_lines, assert_escaping_batch_keys_refused, numbered_lines as lines,
};
use crate::common::{Dir, Output, dynamodb::unique_table, gcs};
use crate::send_file_locked::{committed, crashed_before_commit};

/// Runs `sluice run` with a config whose only step is `sub.tf.send.gcp.storage(SETTINGS)`
/// (then a drop), over `input` lines.
fn run(endpoint: &str, settings: &str, input: &[String]) -> Output {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        format!(
            "local sub = std.extVar('sub');\n\
             {{ transforms: [sub.tf.send.gcp.storage({settings}), sub.tf.util.drop()] }}\n"
        ),
    );
    let stdin: String = input.iter().map(|l| format!("{l}\n")).collect();
    let host = endpoint.trim_start_matches("http://").to_string();
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        stdin,
        &[("STORAGE_EMULATOR_HOST".to_string(), host)],
    )
}

fn bucket() -> (String, String) {
    let endpoint = gcs::endpoint();
    let name = unique_table("sluice-gcs");
    gcs::create_bucket(&endpoint, &name);
    (endpoint, name)
}

/// Every object of `bucket`: name, contents, content type.
fn objects(endpoint: &str, bucket: &str) -> Vec<(String, Vec<u8>, String)> {
    let mut names = gcs::list(endpoint, bucket);
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let (body, kind) = gcs::object(endpoint, bucket, &n).expect("a listed object");
            (n, body, kind)
        })
        .collect()
}

/// Substation's `send_gcp_storage` writes only a batch's first item: sluice writes them all.
#[test]
fn one_object_per_batch_holding_every_item() {
    let (endpoint, bucket) = bucket();
    let input = lines(250);
    run(
        &endpoint,
        &format!(
            "{{ gcp: {{ resource: 'projects/_/buckets/{bucket}' }}, batch: {{ count: 100 }},
               separator: '\\n', file_path: {{ prefix: 'logs', time_format: '2006/01/02', uuid: true, suffix: '.jsonl' }} }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = objects(&endpoint, &bucket);
    assert_eq!(objects.len(), 3, "250 lines in batches of 100");
    let read: Vec<Object<'_>> = objects
        .iter()
        .map(|(name, body, kind)| Object {
            name,
            body,
            content_type: kind,
        })
        .collect();
    assert_batches_of_lines(&read, "logs", ".jsonl", &[50, 100, 100], &input);
}

#[test]
fn a_bare_bucket_name_batch_keys_as_prefixes_items_concatenated_as_substation_does() {
    let (endpoint, bucket) = bucket();
    let input = lines(10);
    run(
        &endpoint,
        &format!(
            "{{ gcp: {{ resource: '{bucket}' }}, obj: {{ btch: 'k' }},
               use_batch_key_as_prefix: true, file_path: {{ uuid: true, suffix: '.json' }} }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = objects(&endpoint, &bucket);
    assert_eq!(
        objects.len(),
        2,
        "{:?}",
        objects.iter().map(|o| &o.0).collect::<Vec<_>>()
    );
    for ((name, body, _), parity) in objects.iter().zip(["0", "1"]) {
        assert!(
            name.starts_with(&format!("{parity}/")) && name.ends_with(".json"),
            "{name}"
        );
        let want: String = input
            .iter()
            .filter(|l| l.ends_with(&format!(r#""k":"{parity}"}}"#)))
            .cloned()
            .collect();
        assert_eq!(String::from_utf8_lossy(body), want);
    }
}

#[test]
fn an_object_over_one_chunk_is_a_resumable_upload() {
    let (endpoint, bucket) = bucket();
    // 18,000 lines of 1,000 bytes: 18 MB, more than one 16 MiB chunk.
    let input: Vec<String> = (0..18_000)
        .map(|i| format!("{i:08}{}", "x".repeat(992)))
        .collect();
    run(
        &endpoint,
        &format!(
            "{{ gcp: {{ resource: 'projects/_/buckets/{bucket}' }}, separator: '\\n',
               batch: {{ count: 100000, size: 50000000 }}, file_path: {{ uuid: true, suffix: '.txt' }} }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = objects(&endpoint, &bucket);
    assert_eq!(objects.len(), 1);
    let (_, body, kind) = &objects[0];
    assert_eq!(kind, "text/plain; charset=utf-8");
    assert_eq!(body.len(), 18_000 * 1_001 - 1);
    assert!(
        *body == input.join("\n").into_bytes(),
        "the object is whole"
    );
}

#[test]
fn gzip_through_an_auxiliary_transform() {
    let (endpoint, bucket) = bucket();
    let input = lines(300);
    run(
        &endpoint,
        &format!(
            "{{ gcp: {{ resource: 'projects/_/buckets/{bucket}' }},
               file_path: {{ prefix: 'gz', uuid: true, suffix: '.jsonl.gz' }},
               aux_tforms: [sub.tf.agg.to.str({{ sep: '\\n' }}), sub.tf.fmt.to.gzip()] }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = objects(&endpoint, &bucket);
    assert_eq!(objects.len(), 1);
    let (name, body, kind) = &objects[0];
    assert!(
        name.starts_with("gz/") && name.ends_with(".jsonl.gz"),
        "{name}"
    );
    assert_eq!(kind, "application/gzip");
    let mut text = String::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_string(&mut text)
        .expect("a gzip object");
    assert_eq!(text, input.join("\n"));
}

#[test]
fn a_missing_bucket_fails_the_run_naming_bucket_and_object() {
    let endpoint = gcs::endpoint();
    let bucket = unique_table("sluice-gcs-missing");
    let out = run(
        &endpoint,
        &format!(
            "{{ gcp: {{ resource: 'projects/_/buckets/{bucket}' }},
               file_path: {{ prefix: 'p', suffix: '.txt' }} }}"
        ),
        &lines(3),
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!(
            "gcs bucket {bucket}, object p.txt: upload: HTTP 404"
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn a_bad_resource_is_a_config_error_naming_the_field() {
    let out = run(
        "http://127.0.0.1:9",
        "{ gcp: { resource: 'gs://logs' }, file_path: { uuid: true } }",
        &lines(1),
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "gcp.resource: \"gs://logs\" names no Cloud Storage bucket (expected projects/_/buckets/BUCKET or BUCKET): ':' is not allowed in a bucket name"
        ),
        "{}",
        out.stderr
    );
}

/// Exactly once across a crash, as `send_file_locked.rs` shows for files: a batch whose
/// keys a crashed run left pending (after its upload, before its commit) is written again
/// under the same name, replacing its object instead of adding one.
#[test]
fn a_batch_written_again_after_a_crash_replaces_its_object() {
    let (endpoint, bucket) = bucket();
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.sqlite({{ file: 'state/locks.sqlite' }}),
      prefix: 'test', ttl_offset: '87600h', object: {{ source_key: 'id' }}, duplicates: 'drop',
      transforms: [
        sub.tf.send.gcp.storage({{
          gcp: {{ resource: 'projects/_/buckets/{bucket}' }},
          file_path: {{ prefix: 'out', time_format: '2006/01/02', uuid: true, suffix: '.jsonl' }},
          separator: '\n',
        }}),
      ],
    }}),
    sub.tf.util.drop(),
  ],
}}
"#
        ),
    );
    let env = [(
        "STORAGE_EMULATOR_HOST".to_string(),
        endpoint.trim_start_matches("http://").to_string(),
    )];
    let input = "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n";
    let keys = ["test:a", "test:b", "test:c"];
    for attempt in ["first", "after the crash"] {
        crashed_before_commit(d.path(), &keys);
        d.sluice_env(&["run", "-c", "cfg.jsonnet"], input, &env)
            .assert_clean_success();
        assert_eq!(committed(d.path()), 3, "{attempt}");
        let names = gcs::list(&endpoint, &bucket);
        assert_eq!(names.len(), 1, "{attempt}: {names:?}");
        assert!(
            names[0].starts_with("out/2024/01/02/") && names[0].ends_with(".jsonl"),
            "named after the first attempt's day: {}",
            names[0]
        );
        let (body, _) = gcs::object(&endpoint, &bucket, &names[0]).unwrap();
        assert_eq!(body, b"{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}");
    }
    d.sluice_env(&["run", "-c", "cfg.jsonnet"], "{\"id\":\"d\"}\n", &env)
        .assert_clean_success();
    assert_eq!(
        gcs::list(&endpoint, &bucket).len(),
        2,
        "fresh keys: another object"
    );
}

/// A batch key from data never leaves `file_path.prefix` (docs/security.md): `..`
/// components and a leading `/` are refused with an error naming the key and the setting,
/// and no object is written outside the prefix.
#[test]
fn batch_keys_that_would_leave_the_prefix_are_refused() {
    let (endpoint, bucket) = bucket();
    let settings = format!(
        "{{ gcp: {{ resource: '{bucket}' }}, obj: {{ btch: 'k' }}, use_batch_key_as_prefix: true,
           file_path: {{ prefix: 'logs', uuid: true, suffix: '.json' }} }}"
    );
    assert_escaping_batch_keys_refused(
        |input| run(&endpoint, &settings, input),
        || gcs::list(&endpoint, &bucket),
    );
}

/// The large fault run's `ddb_file`/`retry` cell, into Cloud Storage: a batch's object
/// written, the run killed before its commit, its messages redelivered split between two
/// runs; each finds the object (its metadata) and writes nothing again.
#[test]
fn a_redelivery_split_between_runs_writes_no_object_again() {
    let (endpoint, bucket) = bucket();
    let d = Dir::new();
    let sink = format!(
        "sub.tf.send.gcp.storage({{ gcp: {{ resource: 'projects/_/buckets/{bucket}' }}, \
         file_path: {{ prefix: 'out', uuid: true, suffix: '.jsonl' }}, separator: '\\n', \
         batch: {{ count: 3 }} }})"
    );
    let env = [(
        "STORAGE_EMULATOR_HOST".to_string(),
        endpoint.trim_start_matches("http://").to_string(),
    )];
    crate::common::objects::assert_a_split_redelivery_writes_nothing_again(&d, &sink, &env, || {
        objects(&endpoint, &bucket)
            .into_iter()
            .map(|(name, body, _)| (name, body))
            .collect()
    });
}
