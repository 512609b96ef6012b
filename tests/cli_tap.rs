//! `sluice tap` as a process against Kinesis emulators: records printed as they arrive
//! (KPL aggregates taken apart), a config run with the Lambda Kinesis handler's metadata,
//! Ctrl-C (SIGINT) draining what was read and sending the one ctrl that flushes the
//! config's batches (exit 130, with the records read and delivered and where each shard
//! resumes), a grace period too short naming what was not delivered, and errors in one
//! line (moto); reshards followed, parents before
//! children, both those that happened before tap started and one while it runs
//! (kinesalite, since moto keeps writing into a split shard).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::primitives::Blob;
use serde_json::{Value, json};

use crate::common::dynamodb::unique_table;
use crate::common::{Dir, kinesalite, moto, runtime};

/// A running `sluice tap`, its standard output read line by line.
struct Tap {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Tap {
    fn start(endpoint: &str, args: &[&str]) -> Tap {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("tap")
            .args(args)
            .env_remove("SLUICE_LOG")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .env("AWS_ENDPOINT_URL_KINESIS", endpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sluice tap");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Tap {
            child,
            lines,
            stderr: Some(stderr),
        }
    }

    /// The next `n` lines, failing after `within`.
    fn lines(&mut self, n: usize, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => got.push(l),
                Err(_) => self.fail(&format!(
                    "{} of {n} lines within {within:?}: {got:?}",
                    got.len()
                )),
            }
        }
        got
    }

    /// Lines up to and including `last`, failing after `within`.
    fn lines_until_line(&mut self, last: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let done = l == last;
                    got.push(l);
                    if done {
                        return got;
                    }
                }
                Err(_) => self.fail(&format!("no {last:?} within {within:?}: {got:?}")),
            }
        }
    }

    /// Sends SIGINT and waits for the exit: its code, the lines written after, stderr.
    fn interrupt(mut self) -> (Option<i32>, Vec<String>, String) {
        // SAFETY: kill(2) with our child's pid and a valid signal number.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.exit(Duration::from_secs(20))
    }

    /// Waits for the exit: its code, the lines not read yet, stderr.
    fn exit(&mut self, within: Duration) -> (Option<i32>, Vec<String>, String) {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("waiting for tap") {
                break s;
            }
            if Instant::now() > deadline {
                self.fail(&format!("did not stop within {within:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let rest: Vec<String> = self.lines.iter().collect();
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        (status.code(), rest, stderr)
    }

    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("sluice tap: {what}");
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn put(endpoint: &str, stream: &str, key: &str, data: &[u8]) {
    moto::kinesis(endpoint)
        .put_record()
        .stream_name(stream)
        .partition_key(key)
        .data(Blob::new(data))
        .send()
        .await
        .expect("put_record");
}

#[test]
fn tap_prints_records_as_they_arrive() {
    let endpoint = moto::endpoint();
    let stream = unique_table("tap");
    let rt = runtime();
    rt.block_on(async {
        moto::create_stream(&endpoint, &stream, 1).await;
        put(&endpoint, &stream, "a", b"first").await;
        put(&endpoint, &stream, "b", b"second").await;
        let agg = sluice_platform::kpl::aggregate(&[("c", b"user-1"), ("d", b"user-2")]);
        put(&endpoint, &stream, "c", &agg).await;
    });
    let mut tap = Tap::start(&endpoint, &["--stream", &stream, "--from", "trim-horizon"]);
    // What the stream held, in order, the aggregate as its user records.
    assert_eq!(
        tap.lines(4, Duration::from_secs(30)),
        ["first", "second", "user-1", "user-2"]
    );
    // Records written now are printed as they arrive.
    for i in 0..3 {
        let data = format!("live-{i}");
        rt.block_on(put(&endpoint, &stream, "e", data.as_bytes()));
        assert_eq!(tap.lines(1, Duration::from_secs(15)), [data]);
    }
    let (code, rest, stderr) = tap.interrupt();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(rest.is_empty(), "{rest:?}");
    // One line: what was read and delivered, and where the shard resumes.
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "sluice: stopped by SIGINT: 6 records read, 6 delivered; resume shardId-000000000000 after sequence "
        ),
        "{stderr}"
    );
}

#[test]
fn tap_out_of_grace_names_what_was_not_delivered_and_where_each_shard_resumes() {
    let endpoint = moto::endpoint();
    let stream = unique_table("tapgrace");
    let rt = runtime();
    let seq = rt.block_on(async {
        moto::create_stream(&endpoint, &stream, 1).await;
        moto::kinesis(&endpoint)
            .put_record()
            .stream_name(&stream)
            .partition_key("a")
            .data(Blob::new(&b"slow"[..]))
            .send()
            .await
            .expect("put_record")
            .sequence_number()
            .to_string()
    });
    let dir = Dir::new();
    // Printed as it is read, then held up for a minute before its second send.
    let config = dir.write(
        "config.jsonnet",
        "local sub = std.extVar('sub'); { transforms: [
           sub.tf.send.stdout({ batch: { count: 1 } }),
           sub.tf.util.delay({ duration: '1m' }),
           sub.tf.send.stdout({ batch: { count: 1 } }),
         ] }",
    );
    let mut tap = Tap::start(
        &endpoint,
        &[
            "--stream",
            &stream,
            "--from",
            "trim-horizon",
            "--grace",
            "1s",
            "-c",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(tap.lines(1, Duration::from_secs(30)), ["slow"]);
    let stopped = Instant::now();
    let (code, rest, stderr) = tap.interrupt();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stopped.elapsed() < Duration::from_secs(10));
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(
        stderr.lines().last().unwrap_or_default(),
        format!(
            "sluice: stopped by SIGINT, and the grace period (1s) ran out before the pipeline finished: \
             1 records read, 0 delivered (1 not, first: not known to be delivered); \
             resume shardId-000000000000 at sequence {seq}"
        ),
        "{stderr}"
    );
}

/// Puts `data` with key `key` into a kinesalite stream.
async fn put_kl(endpoint: &str, stream: &str, key: &str, data: &str) {
    kinesalite::kinesis(endpoint)
        .put_record()
        .stream_name(stream)
        .partition_key(key)
        .data(Blob::new(data.as_bytes()))
        .send()
        .await
        .expect("put_record");
}

/// Splits `shard` of a kinesalite stream at the middle of its hash key range.
async fn split(endpoint: &str, stream: &str, shard: &str) -> Vec<String> {
    let c = kinesalite::kinesis(endpoint);
    let shards = c
        .list_shards()
        .stream_name(stream)
        .send()
        .await
        .expect("list_shards");
    let s = shards
        .shards()
        .iter()
        .find(|s| s.shard_id() == shard)
        .expect("the shard");
    let range = s.hash_key_range().expect("a hash key range");
    let lo: u128 = range.starting_hash_key().parse().unwrap();
    let hi: u128 = range.ending_hash_key().parse().unwrap();
    c.split_shard()
        .stream_name(stream)
        .shard_to_split(shard)
        .new_starting_hash_key((lo / 2 + hi / 2 + 1).to_string())
        .send()
        .await
        .expect("split_shard");
    kinesalite::wait_active(endpoint, stream).await;
    let after = c
        .list_shards()
        .stream_name(stream)
        .send()
        .await
        .expect("list_shards");
    after
        .shards()
        .iter()
        .filter(|s| s.parent_shard_id() == Some(shard))
        .map(|s| s.shard_id().to_string())
        .collect()
}

#[test]
fn tap_reads_parents_before_children_and_follows_a_reshard_while_it_runs() {
    let endpoint = kinesalite::endpoint();
    let stream = unique_table("tapsplit");
    let rt = runtime();
    let keys: Vec<String> = (0..8).map(|i| format!("key-{i}")).collect();
    let children = rt.block_on(async {
        kinesalite::kinesis(&endpoint)
            .create_stream()
            .stream_name(&stream)
            .shard_count(1)
            .send()
            .await
            .expect("create_stream");
        kinesalite::wait_active(&endpoint, &stream).await;
        for k in &keys {
            put_kl(&endpoint, &stream, k, &format!("before {k}")).await;
        }
        let children = split(&endpoint, &stream, "shardId-000000000000").await;
        for k in &keys {
            put_kl(&endpoint, &stream, k, &format!("after {k}")).await;
        }
        children
    });
    assert_eq!(children.len(), 2);
    let mut tap = Tap::start(&endpoint, &["--stream", &stream, "--from", "trim-horizon"]);
    let got = tap.lines(16, Duration::from_secs(30));
    // The closed parent first, whole and in order; then its children's records.
    let before: Vec<String> = keys.iter().map(|k| format!("before {k}")).collect();
    assert_eq!(got[..8], before[..], "{got:?}");
    let mut after: Vec<String> = got[8..].to_vec();
    after.sort();
    let mut want: Vec<String> = keys.iter().map(|k| format!("after {k}")).collect();
    want.sort();
    assert_eq!(after, want, "{got:?}");

    // A reshard while tap runs: one child is split; what is written next lands in the
    // grandchildren, which tap finds once the child's last record was read.
    rt.block_on(async {
        let grandchildren = split(&endpoint, &stream, &children[0]).await;
        assert_eq!(grandchildren.len(), 2);
        for k in &keys {
            put_kl(&endpoint, &stream, k, &format!("later {k}")).await;
        }
    });
    let mut later = tap.lines(8, Duration::from_secs(40));
    later.sort();
    let mut want: Vec<String> = keys.iter().map(|k| format!("later {k}")).collect();
    want.sort();
    assert_eq!(later, want);
    let (code, rest, stderr) = tap.interrupt();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn tap_runs_a_config_with_the_handlers_metadata_and_flushes_at_ctrl_c() {
    let endpoint = moto::endpoint();
    let stream = unique_table("tapcfg");
    let rt = runtime();
    rt.block_on(async {
        moto::create_stream(&endpoint, &stream, 1).await;
        let agg = sluice_platform::kpl::aggregate(&[("k1", br#"{"n":1}"#), ("k2", br#"{"n":2}"#)]);
        put(&endpoint, &stream, "outer", &agg).await;
    });
    let dir = Dir::new();
    // Each message printed at once with its metadata copied in, and all of them gathered
    // into one array that only the ctrl at the end flushes.
    let config = dir.write(
        "config.jsonnet",
        r#"local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.cp({ obj: { src: 'meta partitionKey', trg: 'pk' } }),
    sub.tf.obj.cp({ obj: { src: 'meta stream', trg: 'stream' } }),
    sub.tf.obj.cp({ obj: { src: 'meta subSequenceNumber', trg: 'sub' } }),
    sub.tf.send.stdout({ batch: { count: 1 } }),
    sub.tf.aggregate.to.array({ batch: { count: 1000, duration: '1h' } }),
    sub.tf.send.stdout({ batch: { count: 1 } }),
  ],
}
"#,
    );
    let mut tap = Tap::start(
        &endpoint,
        &[
            "--stream",
            &moto::stream_arn(&stream),
            "--from",
            "earliest",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let arn = moto::stream_arn(&stream);
    let first: Vec<Value> = tap
        .lines(2, Duration::from_secs(30))
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(
        first,
        [
            json!({"n": 1, "pk": "k1", "stream": arn, "sub": 0}),
            json!({"n": 2, "pk": "k2", "stream": arn, "sub": 1}),
        ]
    );
    rt.block_on(put(&endpoint, &stream, "k3", br#"{"n":3}"#));
    let third: Value =
        serde_json::from_str(&tap.lines(1, Duration::from_secs(15))[0]).expect("JSON");
    assert_eq!(third, json!({"n": 3, "pk": "k3", "stream": arn}));
    // Ctrl-C: the held array is flushed, once, and tap exits cleanly.
    let (code, rest, stderr) = tap.interrupt();
    assert_eq!(code, Some(130), "{stderr}");
    let rest: Vec<Value> = rest
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(rest, [json!([first[0], first[1], third])], "{stderr}");
}

#[test]
fn tap_from_latest_skips_what_was_there_and_from_a_time_starts_there() {
    let endpoint = moto::endpoint();
    let stream = unique_table("tapfrom");
    let rt = runtime();
    let from = rt.block_on(async {
        moto::create_stream(&endpoint, &stream, 1).await;
        put(&endpoint, &stream, "a", b"old-1").await;
        put(&endpoint, &stream, "a", b"old-2").await;
        // moto keeps arrival times in seconds with a fraction; leave a clear gap.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let from = chrono::Utc::now();
        tokio::time::sleep(Duration::from_millis(500)).await;
        put(&endpoint, &stream, "a", b"new-1").await;
        put(&endpoint, &stream, "a", b"new-2").await;
        from
    });
    // From a time: what arrived after it, in order.
    let at = from.to_rfc3339();
    let mut tap = Tap::start(&endpoint, &["--stream", &stream, "--from", &at]);
    assert_eq!(tap.lines(2, Duration::from_secs(30)), ["new-1", "new-2"]);
    let (code, rest, stderr) = tap.interrupt();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(rest.is_empty(), "{rest:?}");
    // The same as seconds since the epoch.
    let secs = format!("{:.3}", from.timestamp_millis() as f64 / 1000.0);
    let mut tap = Tap::start(&endpoint, &["--stream", &stream, "--from", &secs]);
    assert_eq!(tap.lines(2, Duration::from_secs(30)), ["new-1", "new-2"]);
    drop(tap);

    // From latest (the default): nothing already in the stream, only what comes. Tap is
    // ready once it has its iterator, which the test cannot see: it writes until a record
    // comes out, then checks that none of what was there before did.
    let mut tap = Tap::start(&endpoint, &["--stream", &stream]);
    let mut n = 0;
    let first = loop {
        n += 1;
        assert!(n < 60, "nothing came out of tap --from latest");
        rt.block_on(put(&endpoint, &stream, "a", format!("live-{n}").as_bytes()));
        if let Ok(line) = tap.lines.recv_timeout(Duration::from_millis(500)) {
            break line;
        }
    };
    assert!(first.starts_with("live-"), "{first}");
    rt.block_on(put(&endpoint, &stream, "a", b"last"));
    let got = tap.lines_until_line("last", Duration::from_secs(15));
    for line in &got {
        assert!(line.starts_with("live-") || line == "last", "{got:?}");
    }
    let (code, _, stderr) = tap.interrupt();
    assert_eq!(code, Some(130), "{stderr}");
}

#[test]
fn tap_names_a_missing_stream_and_a_bad_start() {
    let endpoint = moto::endpoint();
    let (code, rest, stderr) =
        Tap::start(&endpoint, &["--stream", "no-such-stream-here"]).exit(Duration::from_secs(30));
    assert_eq!(code, Some(1));
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(
        stderr.trim(),
        "error: Kinesis DescribeStreamSummary on stream no-such-stream-here: \
         ResourceNotFoundException (Stream no-such-stream-here under account 123456789012 not found.)",
    );
    let (code, _, stderr) =
        Tap::start(&endpoint, &["--stream", "x", "--from", "soon"]).exit(Duration::from_secs(30));
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("error: --from: \"soon\" is not where to start"),
        "{stderr}"
    );
}
