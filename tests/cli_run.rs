//! `sluice run` as a real process: input reading (files, gzip, limits, bytes), order,
//! batching at the end of input, external strings and runtime errors.

use crate::common::{Dir, gzip};

const UPPER: &str = r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),
    sub.tf.str.to.upper({ obj: { src: 'a', trg: 'a' } }),
    sub.tf.send.stdout(),
  ],
}
"#;

#[test]
fn stdin_to_stdout_through_a_config() {
    let d = Dir::new();
    d.write("cfg.jsonnet", UPPER);
    let out = d.sluice(
        &["run", "--config", "cfg.jsonnet"],
        "{\"a\":\"b\"}\n{\"a\":\"xy\",\"n\":1}\n",
    );
    out.assert_stdout(
        "{\"a\":\"B\",\"greeting\":\"hello\"}\n{\"a\":\"XY\",\"n\":1,\"greeting\":\"hello\"}\n",
    );
}

#[test]
fn short_config_flag_works_too() {
    let d = Dir::new();
    d.write("cfg.jsonnet", UPPER);
    let out = d.sluice(&["run", "-c", "cfg.jsonnet"], "{\"a\":\"q\"}\n");
    out.assert_stdout("{\"a\":\"Q\",\"greeting\":\"hello\"}\n");
}

#[test]
fn without_a_config_lines_are_echoed() {
    let d = Dir::new();
    let out = d.sluice(&["run"], "one\n{\"two\":2}\n\nlast-without-newline");
    out.assert_clean_success();
    // Empty lines are messages too; the last line gets its newline.
    assert_eq!(
        out.stdout_str(),
        "one\n{\"two\":2}\n\nlast-without-newline\n"
    );
}

#[test]
fn several_files_are_read_in_the_order_given() {
    let d = Dir::new();
    d.write("1.txt", "a\nb\n");
    d.write("2.txt", "c\nd"); // no final newline
    d.write("3.txt", "e\r\nf\r\n"); // CRLF line ends
    let out = d.sluice(&["run", "3.txt", "1.txt", "2.txt"], "ignored\n");
    out.assert_stdout("e\nf\na\nb\nc\nd\n");

    let out = d.sluice(&["run", "1.txt", "2.txt", "3.txt"], "");
    out.assert_stdout("a\nb\nc\nd\ne\nf\n");
}

#[test]
fn gzip_input_is_detected_and_decompressed() {
    let d = Dir::new();
    d.write("cfg.jsonnet", UPPER);
    d.write("plain.txt", "{\"a\":\"plain\"}\n");
    d.write("events.gz", gzip(b"{\"a\":\"x\"}\n{\"a\":\"y\"}\n"));
    // Two gzip members back to back (as `cat a.gz b.gz` makes) are one stream.
    let mut two = gzip(b"{\"a\":\"m1\"}\n");
    two.extend(gzip(b"{\"a\":\"m2\"}\n"));
    // Gzip is detected by its magic bytes, not by the file name.
    d.write("members.log", two);
    let out = d.sluice(
        &[
            "run",
            "--config",
            "cfg.jsonnet",
            "events.gz",
            "plain.txt",
            "members.log",
        ],
        "",
    );
    out.assert_clean_success();
    assert_eq!(
        out.stdout_str(),
        concat!(
            "{\"a\":\"X\",\"greeting\":\"hello\"}\n",
            "{\"a\":\"Y\",\"greeting\":\"hello\"}\n",
            "{\"a\":\"PLAIN\",\"greeting\":\"hello\"}\n",
            "{\"a\":\"M1\",\"greeting\":\"hello\"}\n",
            "{\"a\":\"M2\",\"greeting\":\"hello\"}\n",
        )
    );
}

#[test]
fn gzip_on_stdin_is_detected_too() {
    let d = Dir::new();
    let out = d.sluice(&["run"], gzip(b"l1\nl2\n"));
    out.assert_stdout("l1\nl2\n");
}

#[test]
fn a_truncated_gzip_file_is_an_error_naming_the_file() {
    let d = Dir::new();
    let body: Vec<u8> = (0..2000)
        .flat_map(|i| format!("{{\"n\":{i}}}\n").into_bytes())
        .collect();
    let gz = gzip(&body);
    d.write("ok.txt", "fine\n");
    // Cut inside the trailer (CRC and length) and inside the compressed data.
    d.write("cut-trailer.gz", &gz[..gz.len() - 6]);
    d.write("cut-middle.gz", &gz[..gz.len() / 2]);
    for name in ["cut-trailer.gz", "cut-middle.gz"] {
        let out = d.sluice(&["run", "ok.txt", name], "");
        out.assert_failure(&format!(
            "error: {name}: gzip: truncated stream (unexpected end of file)\n"
        ));
    }
}

#[test]
fn a_line_over_max_line_bytes_is_an_error_naming_file_and_line() {
    let d = Dir::new();
    d.write("long.txt", "ab\nabcde\nabcdefgh\nok\n");
    let out = d.sluice(&["run", "--max-line-bytes", "5", "long.txt"], "");
    out.assert_failure("error: long.txt:3: line is longer than 5 bytes (raise --max-line-bytes)\n");

    // The last line, without a newline, counts too; so does stdin.
    d.write("tail.txt", "ab\nabcdefgh");
    let out = d.sluice(&["run", "--max-line-bytes", "5", "tail.txt"], "");
    out.assert_failure("error: tail.txt:2: line is longer than 5 bytes (raise --max-line-bytes)\n");
    let out = d.sluice(&["run", "--max-line-bytes", "5"], "123456\n");
    out.assert_failure("error: <stdin>:1: line is longer than 5 bytes (raise --max-line-bytes)\n");

    // A line of exactly the limit is fine.
    let out = d.sluice(&["run", "--max-line-bytes", "5"], "12345\nab\n");
    out.assert_stdout("12345\nab\n");
}

/// A CRLF line of exactly `--max-line-bytes` is accepted wherever the read boundaries fall
/// (the `\r` is not part of the line). Shifting the lines by 2 bytes at a time puts a read
/// boundary between a `\r` and its `\n` in one of the seven files.
#[test]
fn a_crlf_line_of_exactly_the_limit_is_accepted_at_any_read_boundary() {
    let d = Dir::new();
    for pad in 0..7 {
        let name = format!("crlf{pad}.txt");
        let mut text = "a\n".repeat(pad);
        text.push_str(&"12345\r\n".repeat(50_000));
        d.write(&name, text);
        let out = d.sluice(&["run", "--max-line-bytes", "5", &name], "");
        out.assert_clean_success();
        let want = format!("{}{}", "a\n".repeat(pad), "12345\n".repeat(50_000));
        assert!(out.stdout_str() == want, "{name}: output differs");
    }
}

#[test]
fn a_long_line_in_a_gzip_file_is_reported_with_its_line_number() {
    let d = Dir::new();
    d.write("big.gz", gzip(b"1\n22\n333333333333\n"));
    let out = d.sluice(&["run", "--max-line-bytes", "4", "big.gz"], "");
    out.assert_failure("error: big.gz:3: line is longer than 4 bytes (raise --max-line-bytes)\n");
}

#[test]
fn invalid_utf8_passes_through_byte_exact() {
    let d = Dir::new();
    let input: &[u8] = b"\xff\xfe\x00z\n\xc3\x28 half\n{\"a\":\"\xe2\x82\"}\nplain\n";
    let out = d.sluice(&["run"], input);
    out.assert_clean_success();
    assert_eq!(out.stdout, input);

    // Through a config whose transforms read keys: not JSON, so they pass unchanged.
    d.write(
        "cfg.jsonnet",
        UPPER.replace(
            "sub.tf.obj.insert({ obj: { trg: 'greeting' }, value: 'hello' }),",
            "",
        ),
    );
    let out = d.sluice(&["run", "--config", "cfg.jsonnet"], input);
    out.assert_clean_success();
    assert_eq!(out.stdout, input);
}

#[test]
fn empty_input_produces_no_output() {
    let d = Dir::new();
    let out = d.sluice(&["run"], "");
    out.assert_clean_success();
    assert_eq!(out.stdout, b"");

    // The end-of-input ctrl flushes nothing when nothing was batched.
    d.write(
        "agg.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.agg.to.array(), sub.tf.send.stdout()] }\n",
    );
    let out = d.sluice(&["run", "--config", "agg.jsonnet"], "");
    out.assert_clean_success();
    assert_eq!(out.stdout, b"");

    d.write("empty.txt", "");
    let out = d.sluice(&["run", "empty.txt"], "");
    out.assert_clean_success();
    assert_eq!(out.stdout, b"");
}

#[test]
fn order_is_kept_with_four_workers_over_20000_lines() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.copy({ obj: { src: 'n', trg: 'm' } }),
    sub.tf.str.to.upper({ obj: { src: 's', trg: 's' } }),
    sub.tf.hash.sha256({ obj: { src: 's', trg: 'h' } }),
    sub.tf.obj.delete({ obj: { src: 'h' } }),
    sub.tf.send.stdout(),
  ],
}
"#,
    );
    let input: String = (0..20_000)
        .map(|i| format!("{{\"n\":{i},\"s\":\"x{i}\"}}\n"))
        .collect();
    let want: String = (0..20_000)
        .map(|i| format!("{{\"n\":{i},\"s\":\"X{i}\",\"m\":{i}}}\n"))
        .collect();
    for batch in ["1024", "7"] {
        let out = d.sluice(
            &[
                "run",
                "--workers",
                "4",
                "--batch-messages",
                batch,
                "--config",
                "cfg.jsonnet",
            ],
            input.clone(),
        );
        out.assert_clean_success();
        assert!(
            out.stdout_str() == want,
            "output differs from the input order with --batch-messages {batch}"
        );
    }
}

#[test]
fn the_end_of_input_ctrl_flushes_batches_once() {
    let d = Dir::new();
    // A count far above the input: only the ctrl at the end of input can flush it.
    d.write(
        "agg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.agg.to.array({ batch: { count: 100000, size: 100000000 } }),
    sub.tf.send.stdout(),
  ],
}
"#,
    );
    let input: String = (0..2500).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    let want = format!(
        "[{}]\n",
        (0..2500)
            .map(|i| format!("{{\"n\":{i}}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let out = d.sluice(
        &["run", "--batch-messages", "100", "--config", "agg.jsonnet"],
        input,
    );
    out.assert_clean_success();
    assert_eq!(
        out.stdout_str().lines().count(),
        1,
        "one batch, emitted once"
    );
    assert!(
        out.stdout_str() == want,
        "the batch holds every message in order"
    );
}

#[test]
fn batches_are_flushed_per_batch_key_at_the_end() {
    let d = Dir::new();
    d.write(
        "agg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.agg.to.array({ obj: { trg: 'events', batch_key: 'user' }, batch: { count: 1000 } }),
    sub.tf.send.stdout(),
  ],
}
"#,
    );
    let out = d.sluice(
        &["run", "--config", "agg.jsonnet"],
        "{\"user\":\"a\",\"n\":1}\n{\"user\":\"b\",\"n\":2}\n{\"user\":\"a\",\"n\":3}\n",
    );
    out.assert_clean_success();
    // Batches are flushed in the order they were opened.
    assert_eq!(
        out.stdout_str(),
        concat!(
            "{\"events\":[{\"user\":\"a\",\"n\":1},{\"user\":\"a\",\"n\":3}]}\n",
            "{\"events\":[{\"user\":\"b\",\"n\":2}]}\n",
        )
    );
}

const EXT: &str = r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.obj.insert({ obj: { trg: 'env' }, value: std.extVar('env') }),
    sub.tf.send.stdout(),
  ],
}
"#;

#[test]
fn ext_str_reaches_std_ext_var() {
    let d = Dir::new();
    d.write("ext.jsonnet", EXT);
    let out = d.sluice(
        &["run", "--config", "ext.jsonnet", "--ext-str", "env=prod=eu"],
        "{\"a\":1}\n",
    );
    out.assert_stdout("{\"a\":1,\"env\":\"prod=eu\"}\n");

    // Without it, the Jsonnet error names the place.
    let out = d.sluice(&["run", "--config", "ext.jsonnet"], "{\"a\":1}\n");
    out.assert_code(1);
    assert!(
        out.stderr
            .starts_with("error: ext.jsonnet: external variable is not defined: env\n"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("ext.jsonnet:5:"), "{}", out.stderr);
    assert_eq!(out.stdout, b"");
}

#[test]
fn ext_str_cannot_replace_the_library_or_be_malformed() {
    let d = Dir::new();
    d.write("ext.jsonnet", EXT);
    let out = d.sluice(
        &["run", "--config", "ext.jsonnet", "--ext-str", "sub=x"],
        "",
    );
    out.assert_failure("error: --ext-str sub: the name `sub` is reserved for the sluice library (std.extVar('sub'))\n");

    let out = d.sluice(&["run", "--ext-str", "novalue"], "");
    out.assert_code(2);
    assert!(
        out.stderr.starts_with(
            "error: invalid value 'novalue' for '--ext-str <KEY=VALUE>': expected KEY=VALUE, got \"novalue\"\n"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn a_runtime_transform_error_exits_non_zero_and_is_printed_once() {
    let d = Dir::new();
    d.write(
        "err.jsonnet",
        r#"
local sub = std.extVar('sub');
{ transforms: [sub.tf.util.err({ id: 'reject', message: 'no user' }), sub.tf.send.stdout()] }
"#,
    );
    let input: String = (0..100).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    for workers in ["1", "4"] {
        // Each line fails alone: the first ten are listed, then the count.
        let out = d.sluice(
            &["run", "--workers", workers, "--config", "err.jsonnet"],
            input.clone(),
        );
        out.assert_code(1);
        let listed: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(
            listed.first().copied(),
            Some(
                "sluice: <stdin>:1: not delivered: transforms[0] (utility_err, id reject): no user"
            ),
            "with --workers {workers}: {}",
            out.stderr
        );
        assert_eq!(
            listed.last().copied(),
            Some("error: 100 of 100 input lines were not delivered"),
            "with --workers {workers}: {}",
            out.stderr
        );
        assert_eq!(out.stdout, b"", "nothing reaches the send");
        // --fail-fast stops at the first, printed once.
        let out = d.sluice(
            &[
                "run",
                "--fail-fast",
                "--workers",
                workers,
                "--config",
                "err.jsonnet",
            ],
            input.clone(),
        );
        out.assert_code(1);
        assert_eq!(
            out.stderr,
            "error: running err.jsonnet: transforms[0] (utility_err, id reject): no user\n",
            "with --workers {workers}"
        );
        assert_eq!(out.stdout, b"", "nothing reaches the send");
    }
}

/// A transform inside another is named by its place in the config, which names the one
/// around it, once (not `transform route: transform inner:`).
#[test]
fn a_nested_transform_error_is_named_by_its_place_in_the_config() {
    let d = Dir::new();
    d.write(
        "nest.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.meta.switch({ id: 'route', cases: [{
      condition: sub.cnd.str.eq({ obj: { src: 'a' }, value: 'x' }),
      transforms: [sub.tf.util.err({ id: 'inner', message: 'bad a' })],
    }] }),
    sub.tf.send.stdout(),
  ],
}
"#,
    );
    let out = d.sluice(&["run", "--config", "nest.jsonnet"], "{\"a\":\"x\"}\n");
    out.assert_failure(
        "sluice: <stdin>:1: not delivered: transforms[0].settings.cases[0].transforms[0] (utility_err, id inner): bad a\n\
         error: 1 of 1 input lines were not delivered\n",
    );
    let out = d.sluice(
        &["run", "--fail-fast", "--config", "nest.jsonnet"],
        "{\"a\":\"x\"}\n",
    );
    out.assert_failure("error: running nest.jsonnet: transforms[0].settings.cases[0].transforms[0] (utility_err, id inner): bad a\n");

    // Messages the error case does not match pass.
    let out = d.sluice(&["run", "--config", "nest.jsonnet"], "{\"a\":\"y\"}\n");
    out.assert_stdout("{\"a\":\"y\"}\n");
}

#[test]
fn object_transforms_on_non_json_data() {
    let d = Dir::new();
    // Reading a key of non-JSON data: the key does not exist, the message passes unchanged.
    d.write(
        "read.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.str.to.upper({ obj: { src: 'a', trg: 'b' } }),
    sub.tf.obj.copy({ obj: { src: 'a', trg: 'c' } }),
    sub.tf.obj.delete({ obj: { src: 'a' } }),
    sub.tf.send.stdout(),
  ],
}
"#,
    );
    let out = d.sluice(
        &["run", "--config", "read.jsonnet"],
        "not json\n{\"a\":\"x\"}\n[1,2\n",
    );
    out.assert_stdout("not json\n{\"b\":\"X\",\"c\":\"x\"}\n[1,2\n");

    // Writing a key into non-JSON data fails the line, named with the transform.
    d.write(
        "write.jsonnet",
        r#"
local sub = std.extVar('sub');
{ transforms: [sub.tf.obj.insert({ id: 'ins', obj: { trg: 'b' }, value: 1 }), sub.tf.send.stdout()] }
"#,
    );
    let out = d.sluice(&["run", "--config", "write.jsonnet"], "not json\n");
    out.assert_failure(
        "sluice: <stdin>:1: not delivered: transforms[0] (object_insert, id ins): cannot set a key: the data is not JSON\n\
         error: 1 of 1 input lines were not delivered\n",
    );

    // Empty data is an empty object for writes.
    let out = d.sluice(&["run", "--config", "write.jsonnet"], "\n");
    out.assert_stdout("{\"b\":1}\n");
}

#[test]
fn a_missing_input_file_is_an_error_naming_it() {
    let d = Dir::new();
    d.write("here.txt", "x\n");
    let out = d.sluice(&["run", "here.txt", "absent.txt"], "");
    out.assert_failure("error: absent.txt: No such file or directory (os error 2)\n");
}

#[test]
fn a_closed_stdout_is_an_error_not_a_panic() {
    let d = Dir::new();
    let out = crate::common::run_with_closed_stdout(d.path(), &["run"], b"a\nb\n");
    out.assert_failure("error: running <default config>: transforms[0] (send_stdout): writing to standard output: Broken pipe (os error 32)\n");
}

/// With a transform before the send and two workers, the workers write the lines: a closed
/// standard output is the same error, and every line is named as not delivered.
#[test]
fn a_closed_stdout_written_by_the_workers_fails_every_line_with_the_sends_error() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.obj.insert({ obj: { trg: 'n' }, value: 1 }), sub.tf.send.stdout({ id: 'out' })] }\n",
    );
    let input: String = (0..3000).map(|i| format!("{{\"i\":{i}}}\n")).collect();
    d.write("in.jsonl", &input);
    let args = [
        "run",
        "--workers",
        "2",
        "-c",
        "cfg.jsonnet",
        "--undelivered",
        "und.txt",
        "in.jsonl",
    ];
    let out = crate::common::run_with_closed_stdout(d.path(), &args, b"");
    let error = "transforms[1] (send_stdout, id out): writing to standard output: Broken pipe (os error 32)";
    out.assert_failure(&format!("error: running cfg.jsonnet: {error}\n"));
    // Every line read is named, from the first on (what a caller redelivers from): those
    // the pipeline had with the send's error, those the reader still held as not
    // processed. How far the reader had got when the run stopped depends on timing.
    let listed: Vec<String> = d.read("und.txt").lines().map(str::to_string).collect();
    assert!(
        listed.len() >= 1024,
        "the first batch at least: {}",
        listed.len()
    );
    for (n, line) in (1..).zip(&listed) {
        let sent = format!("in.jsonl:{n}\t{error}");
        let held = format!("in.jsonl:{n}\tnot processed: the pipeline stopped at an error");
        assert!(*line == sent || *line == held, "line {n}: {line}");
    }
    assert!(listed[0].ends_with(error), "{}", listed[0]);
}

/// Logs go to standard error without colour codes when it is not a terminal (a file, a
/// pipe, a log collector): the fault campaign reads the lock's warnings back from files.
#[test]
fn logs_to_a_file_have_no_colour_codes() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.meta.kv_store.lock({ kv_store: sub.kv_store.memory(), transforms: [sub.tf.send.stdout()] })] }\n",
    );
    d.write("in.jsonl", "{\"a\":1}\n");
    // The common helpers clear SLUICE_LOG; this test needs it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "-c", "cfg.jsonnet", "in.jsonl"])
        .current_dir(d.path())
        .env("SLUICE_LOG", "debug")
        .output()
        .expect("running sluice");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no ttl_offset or ttl_key"),
        "the debug line is logged: {stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no escape codes: {stderr:?}");
}

#[test]
fn a_line_that_fails_alone_is_named_and_the_rest_goes_through() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        r#"
local sub = std.extVar('sub');
{
  transforms: [
    sub.tf.meta.kv_store.lock({
      kv_store: sub.kv_store.sqlite({ file: 'locks.sqlite' }),
      object: { source_key: 'id' },
      transforms: [sub.tf.send.stdout()],
    }),
  ],
}
"#,
    );
    let input = "{\"id\":\"a\"}\n{\"id\":\"\"}\n{\"id\":1}\n{\"other\":true}\n";
    let out = d.sluice(&["run", "-c", "cfg.jsonnet"], input);
    out.assert_code(1);
    assert_eq!(out.stdout_str(), "{\"id\":\"a\"}\n{\"id\":1}\n");
    for want in [
        "<stdin>:2: not delivered: transform",
        "object.source_key \"id\" is an empty string",
        "<stdin>:4: not delivered: transform",
        "object.source_key \"id\" has no value in the message",
        "error: 2 of 4 input lines were not delivered",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
    // --undelivered lists them in a file for a retry of just those.
    let input2 = "{\"id\":\"\"}\n{\"id\":\"b\"}\n";
    d.write("in.jsonl", input2);
    let out = d.sluice(
        &[
            "run",
            "-c",
            "cfg.jsonnet",
            "--undelivered",
            "undelivered.txt",
            "in.jsonl",
        ],
        "",
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("(listed in undelivered.txt)"),
        "{}",
        out.stderr
    );
    let listed = d.read("undelivered.txt");
    assert!(listed.starts_with("in.jsonl:1\ttransforms["), "{listed}");
    assert_eq!(listed.lines().count(), 1);
    // Nothing undelivered: an empty file and success.
    let out = d.sluice(
        &[
            "run",
            "-c",
            "cfg.jsonnet",
            "--undelivered",
            "undelivered.txt",
        ],
        "{\"id\":\"c\"}\n",
    );
    out.assert_clean_success();
    assert_eq!(d.read("undelivered.txt"), "");
}

/// A line that a transform fails (here: not JSON, where a key is set) fails alone: the
/// other 2,999 lines are written, the bad one is named by file and line with the error,
/// and the exit status is non-zero with the count. `--fail-fast` stops at it, as
/// Substation does.
#[test]
fn a_bad_line_fails_alone_and_is_named_by_file_and_line() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n\
         { transforms: [sub.tf.object.insert({ object: { target_key: 'x' }, value: 1 }), sub.tf.send.stdout()] }\n",
    );
    let input: String = (1..=3000)
        .map(|i| {
            if i == 1500 {
                "not json\n".to_string()
            } else {
                format!("{{\"n\":{i}}}\n")
            }
        })
        .collect();
    d.write("in.jsonl", &input);
    let out = d.sluice(&["run", "-c", "cfg.jsonnet", "in.jsonl"], "");
    out.assert_code(1);
    let lines: Vec<&str> = out.stdout_str().lines().collect();
    assert_eq!(lines.len(), 2999);
    assert_eq!(lines[1498], "{\"n\":1499,\"x\":1}");
    assert_eq!(lines[1499], "{\"n\":1501,\"x\":1}");
    let err = &out.stderr;
    assert!(
        err.contains("in.jsonl:1500: not delivered:") && err.contains("the data is not JSON"),
        "{err}"
    );
    assert!(
        err.contains("1 of 3000 input lines were not delivered"),
        "{err}"
    );

    let out = d.sluice(&["run", "--fail-fast", "-c", "cfg.jsonnet", "in.jsonl"], "");
    out.assert_code(1);
    assert!(out.stdout_str().lines().count() < 2999);
    assert!(
        out.stderr.contains("the data is not JSON"),
        "{}",
        out.stderr
    );
}

/// Without a config every line passes unchanged whatever its size (up to
/// `--max-line-bytes`); with one, a send's batch size error names the setting to raise.
#[test]
fn a_10_mb_line_passes_without_a_config_and_a_send_names_its_batch_size() {
    let d = Dir::new();
    let line = format!("{{\"a\":\"{}\"}}", "x".repeat(10 << 20));
    let out = d.sluice(&["run"], format!("{line}\n"));
    out.assert_clean_success();
    assert!(out.stdout == format!("{line}\n").into_bytes(), "unchanged");
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n{ transforms: [sub.tf.send.stdout()] }\n",
    );
    let out = d.sluice(&["run", "-c", "cfg.jsonnet"], format!("{line}\n"));
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "exceeds the batch size limit of 1000000 bytes (the transform's batch.size: raise it"
        ),
        "{}",
        out.stderr
    );
}

/// A line larger than a send's batch size (which no batch could take) fails alone: the
/// lines around it are written, it is named by file and line with the setting to raise,
/// and the run ends non-zero with the count; whether the send sees its messages or the
/// workers write its lines for it (a transform before it), and however many come in a
/// row. `--fail-fast` stops at it.
#[test]
fn a_line_over_the_batch_size_fails_alone_and_the_rest_goes_on() {
    let d = Dir::new();
    let big = format!("\"{}\"", "x".repeat(2 << 20));
    d.write("in.jsonl", format!("{{\"i\":1}}\n{big}\n{{\"i\":3}}\n"));
    let many: String = (1..=10)
        .map(|i| match i {
            3..=7 => format!("{big}\n"),
            i => format!("{{\"i\":{i}}}\n"),
        })
        .collect();
    d.write("many.jsonl", &many);
    d.write(
        "send.jsonnet",
        "local sub = import 'sluice.libsonnet';\n{ transforms: [sub.tf.send.stdout()] }\n",
    );
    d.write(
        "lead.jsonnet",
        "local sub = import 'sluice.libsonnet';\n\
         { transforms: [sub.tf.string.to.upper(), sub.tf.send.stdout()] }\n",
    );
    for (cfg, case) in [("send.jsonnet", "i"), ("lead.jsonnet", "I")] {
        let out = d.sluice(&["run", "-c", cfg, "in.jsonl"], "");
        out.assert_code(1);
        assert_eq!(
            out.stdout_str(),
            format!("{{\"{case}\":1}}\n{{\"{case}\":3}}\n"),
            "{cfg}: lines 1 and 3"
        );
        let err = &out.stderr;
        assert!(
            err.contains("in.jsonl:2: not delivered: ")
                && err.contains(
                    "exceeds the batch size limit of 1000000 bytes (the transform's batch.size: raise it"
                ),
            "{cfg}: {err}"
        );
        assert!(
            err.contains("error: 1 of 3 input lines were not delivered"),
            "{cfg}: {err}"
        );
        // Five in a row are not a destination that is down: the run goes on.
        let out = d.sluice(&["run", "-c", cfg, "many.jsonl"], "");
        out.assert_code(1);
        assert_eq!(out.stdout_str().lines().count(), 5, "{cfg}");
        assert!(
            out.stderr
                .contains("error: 5 of 10 input lines were not delivered"),
            "{cfg}: {}",
            out.stderr
        );
        let out = d.sluice(&["run", "--fail-fast", "-c", cfg, "in.jsonl"], "");
        out.assert_code(1);
        assert!(
            !out.stdout_str().contains("3}"),
            "{cfg}: --fail-fast stops at it"
        );
        assert!(
            out.stderr.contains("exceeds the batch size limit"),
            "{cfg}: {}",
            out.stderr
        );
    }
}

/// Issue 51: jq's `halt` and `halt_error` end jq's process; in `object_jq` they ended
/// sluice's, with exit 0 and the message never written. Now they are that message's error.
#[test]
fn jq_halt_is_an_error_not_an_exit() {
    let d = Dir::new();
    for filter in ["halt", "halt_error", ".a | halt_error(3)"] {
        d.write(
            "jq.jsonnet",
            format!(
                "local sub = std.extVar('sub');\n\
                 {{ transforms: [sub.tf.obj.jq({{ filter: '{filter}' }}), sub.tf.send.stdout()] }}\n"
            ),
        );
        let out = d.sluice(&["run", "-c", "jq.jsonnet"], "{\"a\":\"bye\"}\n");
        out.assert_code(1);
        assert!(
            out.stderr.contains("jq: the filter called halt (exit code"),
            "{filter}: {}",
            out.stderr
        );
        assert_eq!(out.stdout_str(), "", "{filter}");
    }
}

/// A send that gives up on a batch fails that batch's lines alone: here the batches of one
/// batch key cannot be written (a file stands where their directory goes), the other
/// key's are, every failed line is named, and the run ends non-zero with the count.
/// `--fail-fast` stops at the first failure.
#[test]
fn a_send_that_gives_up_fails_its_batch_alone() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "{ transforms: [{ type: 'send_file', settings: {\n\
           file_path: { prefix: 'out', uuid: true, suffix: '.jsonl' },\n\
           use_batch_key_as_prefix: true, separator: '\\n', object: { batch_key: 'k' }, batch: { count: 10 } } }] }\n",
    );
    std::fs::create_dir_all(d.path().join("out")).unwrap();
    d.write("out/blocked", "not a directory");
    let input: String = (1..=300)
        .map(|i| {
            let k = if i % 3 == 0 { "blocked" } else { "ok" };
            format!("{{\"n\":{i},\"k\":\"{k}\"}}\n")
        })
        .collect();
    d.write("in.jsonl", &input);
    let out = d.sluice(
        &[
            "run",
            "-c",
            "cfg.jsonnet",
            "--undelivered",
            "u.txt",
            "in.jsonl",
        ],
        "",
    );
    out.assert_code(1);
    let mut written: Vec<u64> = Vec::new();
    for f in std::fs::read_dir(d.path().join("out/ok")).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            written.push(v["n"].as_u64().unwrap());
        }
    }
    written.sort_unstable();
    let want: Vec<u64> = (1..=300).filter(|i| i % 3 != 0).collect();
    assert_eq!(written, want, "every line of the other key is written once");
    let err = &out.stderr;
    assert!(
        err.contains("100 of 300 input lines were not delivered"),
        "{err}"
    );
    let undelivered = std::fs::read_to_string(d.path().join("u.txt")).unwrap();
    assert!(
        undelivered.starts_with("in.jsonl:3\ttransforms[0] (send_file): writing out/blocked/")
            && undelivered.contains("Not a directory"),
        "{undelivered}"
    );
    let listed: Vec<String> = undelivered
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let want: Vec<String> = (1..=300)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("in.jsonl:{i}"))
        .collect();
    assert_eq!(listed, want, "the failed batches' lines, and no others");

    std::fs::remove_dir_all(d.path().join("out/ok")).unwrap();
    let out = d.sluice(&["run", "--fail-fast", "-c", "cfg.jsonnet", "in.jsonl"], "");
    out.assert_code(1);
    let left = std::fs::read_dir(d.path().join("out/ok")).map_or(0, |r| r.count());
    assert!(
        left < 20,
        "--fail-fast stops at the first failure: {left} files"
    );
}

/// A destination that is down stops the run after 3 batches in a row of which nothing was
/// delivered, as `--fail-fast` would at the first: every line is listed, and the error
/// says why it stopped. Inside `meta_retry`, a message whose attempts ran out fails alone
/// and the others are written.
#[test]
fn a_destination_that_is_down_stops_the_run_and_meta_retry_fails_alone() {
    let d = Dir::new();
    d.write(
        "down.jsonnet",
        "{ transforms: [{ type: 'send_file', settings: {\n\
           file_path: { prefix: 'blocked', uuid: true }, batch: { count: 1 } } }] }\n",
    );
    d.write("blocked", "not a directory");
    let input: String = (1..=20).map(|i| format!("{{\"n\":{i}}}\n")).collect();
    d.write("in.jsonl", &input);
    let out = d.sluice(
        &[
            "run",
            "-c",
            "down.jsonnet",
            "--undelivered",
            "u.txt",
            "in.jsonl",
        ],
        "",
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("3 batches in a row were not delivered at all: stopping"),
        "{}",
        out.stderr
    );
    assert_eq!(d.read("u.txt").lines().count(), 20, "{}", d.read("u.txt"));

    d.write(
        "retry.jsonnet",
        "{ transforms: [{ type: 'meta_retry', settings: { retry: { count: 1, delay: '0s' }, error_messages: ['.*'],\n\
           transforms: [{ type: 'send_file', settings: {\n\
             file_path: { prefix: 'out', uuid: true }, use_batch_key_as_prefix: true, separator: '\\n',\n\
             object: { batch_key: 'k' }, batch: { count: 1 } } }] } }] }\n",
    );
    std::fs::create_dir_all(d.path().join("out")).unwrap();
    d.write("out/bad", "not a directory");
    let input: String = (1..=20)
        .map(|i| {
            let k = if i == 7 { "bad" } else { "ok" };
            format!("{{\"n\":{i},\"k\":\"{k}\"}}\n")
        })
        .collect();
    d.write("keyed.jsonl", &input);
    let out = d.sluice(
        &[
            "run",
            "-c",
            "retry.jsonnet",
            "--undelivered",
            "u2.txt",
            "keyed.jsonl",
        ],
        "",
    );
    out.assert_code(1);
    let listed = d.read("u2.txt");
    assert!(
        listed.starts_with("keyed.jsonl:7\ttransforms[0] (meta_retry")
            && listed.contains("retry limit reached after 2 attempts"),
        "{listed}"
    );
    assert!(
        listed.lines().count() <= 2,
        "line 7, and at most the one after it: {listed}"
    );
    let written = std::fs::read_dir(d.path().join("out/ok")).unwrap().count();
    assert!(written >= 18, "{written} of 19 written");
}

/// The end of input is one ctrl, as Substation sends it, when nothing waits on another
/// process: a transform that acts on each ctrl (`test_message` inserts its message) acts
/// once, a send's open batch notwithstanding.
#[test]
fn the_end_of_input_is_one_ctrl() {
    let d = Dir::new();
    d.write(
        "cfg.jsonnet",
        "local sub = std.extVar('sub');\n\
         { transforms: [sub.tf.test.message({ value: { x: 1 } }), sub.tf.send.stdout({ batch: { count: 100 } })] }\n",
    );
    let out = d.sluice(&["run", "-c", "cfg.jsonnet"], "{\"a\":1}\n");
    out.assert_clean_success();
    assert_eq!(out.stdout_str(), "{\"a\":1}\n{\"x\":1}\n");
}
