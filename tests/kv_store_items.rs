//! The item kv stores through the real `sluice` binary: the `enrich_kv_store_*`
//! transforms against the DynamoDB emulator (get, set, set-add, TTL), and the file stores
//! reading their files from an HTTP server this test starts on loopback and from S3
//! (moto). The process reaches the emulators only through the standard AWS environment
//! variables, as in production.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{Dir, dynamodb, moto};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn dynamodb_items_get_set_and_set_add() {
    let endpoint = dynamodb::endpoint();
    let table = dynamodb::unique_table("kv-items");
    let rt = runtime();
    rt.block_on(dynamodb::create_table(&endpoint, &table, "PK", Some("SK")));
    let dir = Dir::new();
    dir.write(
        "cfg.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
local kv = sub.kv_store.aws.dynamodb({{
  aws: {{ arn: '{table}' }},
  attributes: {{ partition_key: 'PK', sort_key: 'SK', value: 'val', ttl: 'exp' }},
  consistent_read: true,
}});
{{ transforms: [
  sub.tf.enrich.kv_store.iset({{ kv_store: kv, prefix: 'user', ttl_offset: '1h', obj: {{ src: 'id', trg: 'profile' }} }}),
  sub.tf.enrich.kv_store.sadd({{ kv_store: kv, prefix: 'ips', obj: {{ src: 'id', trg: 'ip' }} }}),
  sub.tf.enrich.kv_store.iget({{ kv_store: kv, prefix: 'user', obj: {{ src: 'id', trg: 'got' }} }}),
  sub.tf.enrich.kv_store.iget({{ kv_store: kv, prefix: 'ips', obj: {{ src: 'id', trg: 'ips' }} }}),
  sub.tf.send.stdout(),
] }}
"#
        ),
    );
    let env = dynamodb::process_env(&endpoint);
    let out = dir.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        "{\"id\":\"ann\",\"profile\":{\"team\":\"red\",\"n\":7},\"ip\":\"10.0.0.1\"}\n",
        &env,
    );
    out.assert_stdout(
        "{\"id\":\"ann\",\"profile\":{\"team\":\"red\",\"n\":7},\"ip\":\"10.0.0.1\",\"got\":{\"n\":7,\"team\":\"red\"},\"ips\":[\"10.0.0.1\"]}\n",
    );
    // A second run adds to the set; the profile is there from the first.
    let out = dir.sluice_env(
        &["run", "-c", "cfg.jsonnet"],
        "{\"id\":\"ann\",\"ip\":[\"10.0.0.2\",\"10.0.0.1\"]}\n",
        &env,
    );
    out.assert_stdout(
        "{\"id\":\"ann\",\"ip\":[\"10.0.0.2\",\"10.0.0.1\"],\"got\":{\"n\":7,\"team\":\"red\"},\"ips\":[\"10.0.0.1\",\"10.0.0.2\"]}\n",
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let item = rt
        .block_on(dynamodb::get_item(
            &endpoint,
            &table,
            &[("PK", "user:ann"), ("SK", "substation:kv_store")],
        ))
        .expect("the profile item");
    let exp: i64 = item["exp"].parse().unwrap();
    assert!((now + 3500..=now + 3700).contains(&exp), "{exp} vs {now}");
    let set = rt
        .block_on(dynamodb::get_item(
            &endpoint,
            &table,
            &[("PK", "ips:ann"), ("SK", "substation:kv_store")],
        ))
        .expect("the set item");
    assert!(set["val"].contains("Ss("), "{set:?}");
    assert!(
        !set.contains_key("exp"),
        "no TTL given, none written: {set:?}"
    );

    // An expired item is not returned, whether DynamoDB deleted it yet or not.
    dir.write(
        "expired.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
local kv = sub.kv_store.aws.dynamodb({{
  aws: {{ arn: '{table}' }},
  attributes: {{ partition_key: 'PK', sort_key: 'SK', value: 'val', ttl: 'exp' }},
}});
{{ transforms: [
  sub.tf.enrich.kv_store.iset({{ kv_store: kv, obj: {{ src: 'id', trg: 'v', ttl_key: 't' }} }}),
  sub.tf.enrich.kv_store.iget({{ kv_store: kv, obj: {{ src: 'id', trg: 'got' }} }}),
  sub.tf.send.stdout(),
] }}
"#
        ),
    );
    dir.sluice_env(
        &["run", "-c", "expired.jsonnet"],
        "{\"id\":\"old\",\"v\":1,\"t\":1000}\n",
        &env,
    )
    .assert_stdout("{\"id\":\"old\",\"v\":1,\"t\":1000,\"got\":null}\n");

    // A missing table is an error naming the transform, the table and the key.
    dir.write(
        "missing.jsonnet",
        r#"local sub = std.extVar('sub');
{ transforms: [
  sub.tf.enrich.kv_store.iget({ kv_store: sub.kv_store.aws.dynamodb({
    aws: { arn: 'no-such-table' }, attributes: { partition_key: 'PK', value: 'v' } }),
    obj: { src: 'id', trg: 'got' } }),
] }
"#,
    );
    let out = dir.sluice_env(&["run", "-c", "missing.jsonnet"], "{\"id\":\"x\"}\n", &env);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("aws_dynamodb table no-such-table: GetItem of key \"x\": "),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("ResourceNotFound"), "{}", out.stderr);
}

/// Serves `body` at every path on a loopback port until dropped: its URL and how many
/// requests it answered.
struct Server {
    url: String,
    asked: Arc<AtomicUsize>,
}

fn serve(status: u16, body: &'static str) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Server { url, asked }
}

#[test]
fn file_stores_read_their_file_over_http_on_loopback() {
    let teams = serve(200, r#"{"red":{"lead":"ann"},"blue":{"lead":"bob"}}"#);
    let dir = Dir::new();
    dir.write(
        "cfg.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.enrich.kv_store.iget({{ kv_store: sub.kv_store.json_file({{ file: '{}/teams.json' }}),
    obj: {{ src: 'team', trg: 'info' }} }}),
  sub.tf.send.stdout(),
] }}
"#,
            teams.url
        ),
    );
    dir.sluice(
        &["run", "-c", "cfg.jsonnet"],
        "{\"team\":\"blue\"}\n{\"team\":\"red\"}\n{\"team\":\"green\"}\n",
    )
    .assert_stdout(
        "{\"team\":\"blue\",\"info\":{\"lead\":\"bob\"}}\n{\"team\":\"red\",\"info\":{\"lead\":\"ann\"}}\n{\"team\":\"green\",\"info\":null}\n",
    );
    assert_eq!(
        teams.asked.load(Ordering::SeqCst),
        1,
        "read once, on first use"
    );

    let gone = serve(404, "not here");
    dir.write(
        "gone.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.enrich.kv_store.iget({{ kv_store: sub.kv_store.text_file({{ file: '{}/list.txt' }}),
    obj: {{ src: 'd', trg: 'listed' }} }}),
] }}
"#,
            gone.url
        ),
    );
    let out = dir.sluice(&["run", "-c", "gone.jsonnet"], "{\"d\":\"x\"}\n");
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!(
            "text_file: reading {}/list.txt: HTTP 404",
            gone.url
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn file_stores_read_their_file_from_s3() {
    let endpoint = moto::endpoint();
    let bucket = dynamodb::unique_table("kv-files");
    moto::create_bucket(&endpoint, &bucket);
    moto::put_object(
        &endpoint,
        &bucket,
        "ref/users.csv",
        b"id;name\nu1;ann\nu2;bob\n",
    );
    let dir = Dir::new();
    dir.write(
        "cfg.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.enrich.kv_store.iget({{ kv_store: sub.kv_store.csv_file({{ file: 's3://{bucket}/ref/users.csv', column: 'id', delimiter: ';' }}),
    obj: {{ src: 'id', trg: 'user' }} }}),
  sub.tf.send.stdout(),
] }}
"#
        ),
    );
    let env = moto::process_env(&endpoint);
    dir.sluice_env(&["run", "-c", "cfg.jsonnet"], "{\"id\":\"u2\"}\n", &env)
        .assert_stdout("{\"id\":\"u2\",\"user\":{\"name\":\"bob\"}}\n");
    dir.write(
        "missing.jsonnet",
        format!(
            r#"local sub = std.extVar('sub');
{{ transforms: [
  sub.tf.enrich.kv_store.iget({{ kv_store: sub.kv_store.csv_file({{ file: 's3://{bucket}/nope.csv', column: 'id' }}),
    obj: {{ src: 'id', trg: 'user' }} }}),
] }}
"#
        ),
    );
    let out = dir.sluice_env(&["run", "-c", "missing.jsonnet"], "{\"id\":\"u2\"}\n", &env);
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!(
            "csv_file: reading s3://{bucket}/nope.csv: GetObject failed: NoSuchKey"
        )),
        "{}",
        out.stderr
    );
}
