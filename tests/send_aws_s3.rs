//! `send_aws_s3` through the real `sluice` binary against moto's S3: lines go in, and the
//! objects are read back (keys, contents, content types), including a multipart upload and
//! gzip through an auxiliary transform.

use std::io::Read;

use crate::common::objects::{
    Object, assert_batches_of_lines, assert_escaping_batch_keys_refused, numbered_lines as lines,
};
use crate::common::{Dir, Output, dynamodb::unique_table, moto};

/// Runs `sluice run` with a config whose only step is `sub.tf.send.aws.s3(SETTINGS)` (then
/// a drop), over `input` lines.
fn run(endpoint: &str, settings: &str, input: &[String]) -> Output {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        format!(
            "local sub = std.extVar('sub');\n\
             {{ transforms: [sub.tf.send.aws.s3({settings}), sub.tf.util.drop()] }}\n"
        ),
    );
    let stdin: String = input.iter().map(|l| format!("{l}\n")).collect();
    d.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        stdin,
        &moto::process_env(endpoint),
    )
}

fn bucket() -> (String, String) {
    let endpoint = moto::endpoint();
    let name = unique_table("sluice-s3");
    moto::create_bucket(&endpoint, &name);
    (endpoint, name)
}

#[test]
fn one_object_per_batch_named_by_file_path() {
    let (endpoint, bucket) = bucket();
    let input = lines(250);
    run(
        &endpoint,
        &format!(
            "{{ aws: {{ arn: 'arn:aws:s3:::{bucket}' }}, batch: {{ count: 100 }}, separator: '\\n',
               file_path: {{ prefix: 'logs', suffix: '.jsonl' }} }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = moto::bucket_objects_full(&endpoint, &bucket);
    assert_eq!(objects.len(), 3, "250 lines in batches of 100");
    for o in &objects {
        assert!(!o.headers.contains_key("content-encoding"));
    }
    let read: Vec<Object<'_>> = objects
        .iter()
        .map(|o| Object {
            name: &o.key,
            body: &o.body,
            content_type: o.headers.get("content-type").map_or("", String::as_str),
        })
        .collect();
    assert_batches_of_lines(&read, "logs", ".jsonl", &[50, 100, 100], &input);
}

#[test]
fn batch_keys_as_prefixes_with_a_bare_bucket_name_and_options() {
    let (endpoint, bucket) = bucket();
    let input = lines(10);
    run(
        &endpoint,
        &format!(
            "{{ aws: {{ arn: '{bucket}' }}, obj: {{ btch: 'k' }}, use_batch_key_as_prefix: true,
               file_path: {{ time_format: '', suffix: '.json' }},
               storage_class: 'STANDARD_IA', checksum_algorithm: 'CRC32' }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = moto::bucket_objects_full(&endpoint, &bucket);
    let keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys[0].starts_with("0/") && keys[0].ends_with(".json"),
        "{keys:?}"
    );
    assert!(keys[1].starts_with("1/"), "{keys:?}");
    for (o, parity) in objects.iter().zip(["0", "1"]) {
        // No separator: Substation's concatenation.
        let want: String = input
            .iter()
            .filter(|l| l.ends_with(&format!(r#""k":"{parity}"}}"#)))
            .cloned()
            .collect();
        assert_eq!(String::from_utf8_lossy(&o.body), want);
        assert_eq!(
            o.headers.get("x-amz-storage-class").map(String::as_str),
            Some("STANDARD_IA")
        );
    }
}

#[test]
fn a_batch_over_the_part_size_is_a_multipart_upload() {
    let (endpoint, bucket) = bucket();
    // 12,000 lines of 1,000 bytes: 12 MB, uploaded in parts of 5 MiB (three parts).
    let input: Vec<String> = (0..12_000)
        .map(|i| format!("{i:08}{}", "x".repeat(992)))
        .collect();
    run(
        &endpoint,
        &format!(
            "{{ aws: {{ arn: 'arn:aws:s3:::{bucket}' }}, separator: '\\n', part_size: 5242880,
               checksum_algorithm: 'SHA256',
               batch: {{ count: 100000, size: 50000000 }}, file_path: {{ uuid: true, suffix: '.txt' }} }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = moto::bucket_objects_full(&endpoint, &bucket);
    assert_eq!(objects.len(), 1);
    let o = &objects[0];
    let etag = o.headers.get("etag").cloned().unwrap_or_default();
    assert!(
        etag.trim_matches('"').ends_with("-3"),
        "a 3-part upload's ETag: {etag}"
    );
    assert_eq!(o.body.len(), 12_000 * 1_001 - 1);
    assert_eq!(String::from_utf8(o.body.clone()).unwrap(), input.join("\n"));
}

#[test]
fn gzip_through_an_auxiliary_transform() {
    let (endpoint, bucket) = bucket();
    let input = lines(300);
    run(
        &endpoint,
        &format!(
            "{{ aws: {{ arn: 'arn:aws:s3:::{bucket}' }}, file_path: {{ prefix: 'gz', suffix: '.jsonl.gz' }},
               aux_tforms: [sub.tf.agg.to.str({{ sep: '\\n' }}), sub.tf.fmt.to.gzip()] }}"
        ),
        &input,
    )
    .assert_clean_success();
    let objects = moto::bucket_objects_full(&endpoint, &bucket);
    assert_eq!(objects.len(), 1);
    let o = &objects[0];
    assert!(
        o.key.starts_with("gz/") && o.key.ends_with(".jsonl.gz"),
        "{}",
        o.key
    );
    assert_eq!(
        o.headers.get("content-type").map(String::as_str),
        Some("application/gzip")
    );
    assert!(
        !o.headers.contains_key("content-encoding"),
        "stored and served as the .gz file it is"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(&o.body[..])
        .read_to_string(&mut text)
        .expect("a gzip object");
    assert_eq!(text, input.join("\n"));
}

#[test]
fn a_missing_bucket_fails_the_run_naming_bucket_key_and_code() {
    let endpoint = moto::endpoint();
    let bucket = unique_table("sluice-s3-missing");
    let out = run(
        &endpoint,
        &format!(
            "{{ aws: {{ arn: 'arn:aws:s3:::{bucket}' }},
               file_path: {{ prefix: 'p', time_format: '', uuid: false, suffix: '.txt' }} }}"
        ),
        &lines(3),
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!(
            "s3 bucket {bucket}, key p.txt: PutObject failed: NoSuchBucket (The specified bucket does not exist)"
        )),
        "{}",
        out.stderr
    );
}

/// A batch key from data never leaves `file_path.prefix` (docs/security.md): `..`
/// components and a leading `/` are refused with an error naming the key and the setting,
/// and no object is written outside the prefix.
#[test]
fn batch_keys_that_would_leave_the_prefix_are_refused() {
    let (endpoint, bucket) = bucket();
    let settings = format!(
        "{{ aws: {{ arn: '{bucket}' }}, obj: {{ btch: 'k' }}, use_batch_key_as_prefix: true,
           file_path: {{ prefix: 'logs', uuid: true, suffix: '.json' }} }}"
    );
    assert_escaping_batch_keys_refused(
        |input| run(&endpoint, &settings, input),
        || {
            moto::bucket_objects_full(&endpoint, &bucket)
                .into_iter()
                .map(|o| o.key)
                .collect()
        },
    );
}

/// The large fault run's `ddb_file`/`retry` cell, into S3: a batch's object written, the
/// run killed before its commit, its messages redelivered split between two runs; each
/// finds the object (`HeadObject`) and writes nothing again.
#[test]
fn a_redelivery_split_between_runs_writes_no_object_again() {
    let (endpoint, bucket) = bucket();
    let d = Dir::new();
    let sink = format!(
        "sub.tf.send.aws.s3({{ aws: {{ arn: 'arn:aws:s3:::{bucket}' }}, \
         file_path: {{ prefix: 'out', uuid: true, suffix: '.jsonl' }}, separator: '\\n', \
         batch: {{ count: 3 }} }})"
    );
    crate::common::objects::assert_a_split_redelivery_writes_nothing_again(
        &d,
        &sink,
        &moto::process_env(&endpoint),
        || {
            moto::bucket_objects_full(&endpoint, &bucket)
                .into_iter()
                .map(|o| (o.key, o.body))
                .collect()
        },
    );
}
