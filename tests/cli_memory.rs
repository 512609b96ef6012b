//! Memory of `sluice run` over large lines (issue 17): what is read ahead and what a batch
//! holds are bounded in bytes, so the peak RSS of a run over lines of 900 KB stays flat
//! whatever their count. Measured as the kernel counts it (`wait4`'s `ru_maxrss`), on the
//! binary cargo built for the tests, over lines written to its standard input as the test
//! makes them and over a file it reads as fast as it can.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Dir, workspace_root};

const LINE_BYTES: usize = 900_000;

/// Line `i`: an object of 3,000 small keys and one long string, `LINE_BYTES` long.
fn line(i: usize) -> Vec<u8> {
    let mut l = format!("{{\"id\":{i},\"fields\":{{");
    for k in 0..3000 {
        if k > 0 {
            l.push(',');
        }
        l.push_str(&format!("\"k{k:05}\":\"value {k:05} of line {i:05}\""));
    }
    l.push_str("},\"blob\":\"");
    let pad = LINE_BYTES - l.len() - "\"}".len();
    l.extend(std::iter::repeat_n('x', pad));
    l.push_str("\"}\n");
    l.into_bytes()
}

/// What a run left: its peak RSS in MB, its output lines, and how many of them are the
/// example's output (a `greeting` inserted last).
struct Run {
    peak_mb: f64,
    lines: usize,
    greeted: usize,
}

/// Where a run's lines come from.
enum Input<'a> {
    /// `count` lines written to its standard input as the test makes them (which paces them).
    Stdin(usize),
    /// A file of lines, which it reads as fast as it can.
    File(&'a std::path::Path),
}

/// A file of lines `0..count` in `dir`.
fn lines_file(dir: &Dir, count: usize) -> std::path::PathBuf {
    let path = dir.path().join(format!("{count}-lines.jsonl"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("creating lines"));
    for i in 0..count {
        f.write_all(&line(i)).expect("writing lines");
    }
    f.flush().expect("writing lines");
    path
}

/// Runs `sluice run -c examples/hello/config.jsonnet ARGS` over `input`, and measures it.
// The child is reaped by wait4 (for its resource usage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(input: Input<'_>, args: &[&str], env: &[(&str, &str)]) -> Run {
    let config = workspace_root().join("examples/hello/config.jsonnet");
    let (stdin, count, file) = match input {
        Input::Stdin(count) => (Stdio::piped(), count, None),
        Input::File(path) => (Stdio::null(), 0, Some(path)),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("run")
        .arg("-c")
        .arg(&config)
        .args(args)
        .args(file)
        .env_remove("SLUICE_LOG")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("MIMALLOC_PURGE_DELAY")
        .env_remove("MIMALLOC_ALLOW_THP")
        .env_remove("GLIBC_TUNABLES")
        .envs(env.iter().copied())
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting sluice");
    let pid = child.id() as libc::pid_t;
    let feeder = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            for i in 0..count {
                if stdin.write_all(&line(i)).is_err() {
                    return;
                }
            }
        })
    });
    let mut stdout = child.stdout.take().expect("stdout pipe");
    // It reads as fast as it can (newlines found by memchr, not byte by byte in this
    // unoptimised test build), so the reader does not pace the run it measures.
    let counter = std::thread::spawn(move || {
        const END: &[u8] = b"\"greeting\":\"hello\"}";
        let (mut lines, mut greeted) = (0, 0);
        // The end of the line read so far (at most END's length).
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = vec![0; 1 << 20];
        loop {
            let n = stdout.read(&mut buf).expect("reading stdout");
            if n == 0 {
                return (lines, greeted);
            }
            let chunk = &buf[..n];
            let mut start = 0;
            for nl in memchr::memchr_iter(b'\n', chunk) {
                tail.extend_from_slice(&chunk[start..nl]);
                lines += 1;
                greeted += usize::from(tail.ends_with(END));
                tail.clear();
                start = nl + 1;
            }
            tail.extend_from_slice(&chunk[start..]);
            let over = tail.len().saturating_sub(END.len());
            tail.drain(..over);
        }
    });
    let mut stderr = child.stderr.take().expect("stderr pipe");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    // Wait for the exit without reaping (so the pid stays ours to kill on a timeout), then
    // reap it with wait4. Its peak is read from /proc (VmHWM, the high-water mark of its own
    // memory since exec) while it runs: wait4's ru_maxrss also counts the memory of this test
    // process at the spawn (Linux carries the parent's high-water mark across a vfork's
    // exec), which other tests in the same binary may have grown past the child's own.
    let start = Instant::now();
    let mut hwm_kib: u64 = 0;
    loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            hwm_kib = hwm_kib.max(kib);
        }
        // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
        if unsafe { info.si_pid() } == pid {
            break;
        }
        if start.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("sluice run {args:?} did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    if let Some(feeder) = feeder {
        feeder.join().expect("stdin feeder");
    }
    let (lines, greeted) = counter.join().expect("stdout counter");
    let stderr = errors.join().expect("stderr reader");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "sluice run {args:?} failed ({status:#x}):\n{stderr}"
    );
    // Linux counts ru_maxrss in KiB; the high-water mark read while it ran is its own.
    let own = if hwm_kib > 0 {
        hwm_kib.min(usage.ru_maxrss as u64)
    } else {
        usage.ru_maxrss as u64
    };
    Run {
        peak_mb: own as f64 * 1024.0 / 1e6,
        lines,
        greeted,
    }
}

/// The peak resident memory of process `pid` so far (KiB), while it runs.
fn vm_hwm_kib(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The floor: the peak RSS of the release binary over lines of 900 KB, with the
/// default settings.
const FLOOR_MB: f64 = 64.0;
/// The release binary's peak RSS over a single such line (its code, the runtime, one line):
/// 31.0 MB on 2026-11-26 (`/usr/bin/time -f %M`, the build of f46c1f4).
const RELEASE_BASE_MB: f64 = 31.0;
/// What the lines may add over a run of one line: the floor less the release binary's own
/// base. The tests run the debug binary, whose code alone is larger (42.7 MB for one line,
/// against 31.0) and whose allocations are the same, so its growth over its own one-line
/// run is held to the release binary's budget. Without the bounds, 200 lines grow it by
/// ~90 MB.
const GROWTH_MB: f64 = FLOOR_MB - RELEASE_BASE_MB;

#[test]
fn run_over_lines_of_900_kb_stays_within_its_memory_bound_whatever_their_count() {
    let base = run(Input::Stdin(1), &[], &[]).peak_mb;
    eprintln!("1 line of 900 KB: peak RSS {base:.1} MB");
    for count in [40, 200] {
        let r = run(Input::Stdin(count), &[], &[]);
        let growth = r.peak_mb - base;
        eprintln!(
            "{count} lines of 900 KB: peak RSS {:.1} MB, {growth:.1} MB over one line",
            r.peak_mb
        );
        assert_eq!((r.lines, r.greeted), (count, count), "every line came out");
        assert!(
            growth <= GROWTH_MB,
            "{count} lines of 900 KB peaked at {:.1} MB, {growth:.1} MB over one line's \
             {base:.1} MB: more than the {GROWTH_MB} MB the floor of {FLOOR_MB} MB leaves the \
             release binary over its own {RELEASE_BASE_MB} MB",
            r.peak_mb
        );
    }
    // The bounds are what keep it there: reading as far ahead as it can, in batches of
    // 16 MiB, with mimalloc's own defaults (freed pages kept for a second, huge pages)
    // holds far more (183-200 MB). A line waiting costs about its bytes (the objects inside
    // it stay text until a transform reads into them), so the 4 MiB batches of before the
    // bounds no longer show it: they grew 200 lines by only ~48 MB.
    let before = run(
        Input::Stdin(200),
        &[
            "--batch-bytes",
            "16777216",
            "--read-ahead-bytes",
            "1000000000",
        ],
        &[
            ("MIMALLOC_PURGE_DELAY", "1000"),
            ("MIMALLOC_ALLOW_THP", "1"),
        ],
    );
    eprintln!(
        "the same as before the bounds: peak RSS {:.1} MB",
        before.peak_mb
    );
    assert_eq!(before.lines, 200);
    assert!(
        before.peak_mb - base > GROWTH_MB + 15.0,
        "without the bounds 200 lines peaked at only {:.1} MB",
        before.peak_mb
    );
}

/// Read from a file, the lines come as fast as the workers take them, so a page the
/// allocator keeps after a free is kept for more lines. With two workers, mimalloc's own
/// pages for the large blocks (each line, each output) grew this run by 43–47 MB over one
/// line on the release binary and by 36 MB on this debug binary; each block now comes from
/// the C library's arenas, which hand it to the next line
/// (`sluice_cmd::memory::Allocator::LARGE_FROM_LIBC`): 17–19 MB on the release binary,
/// 16 MB on this one.
#[test]
fn run_over_a_file_of_900_kb_lines_read_at_full_speed_stays_within_its_memory_bound() {
    let dir = Dir::new();
    let one = lines_file(&dir, 1);
    let many = lines_file(&dir, 200);
    for workers in ["1", "2"] {
        let args = ["--workers", workers];
        let base = run(Input::File(&one), &args, &[]).peak_mb;
        let r = run(Input::File(&many), &args, &[]);
        let growth = r.peak_mb - base;
        eprintln!(
            "--workers {workers}, a file of 200 lines of 900 KB: peak RSS {:.1} MB, {growth:.1} \
             MB over one line's {base:.1} MB",
            r.peak_mb
        );
        assert_eq!((r.lines, r.greeted), (200, 200), "every line came out");
        assert!(
            growth <= GROWTH_MB,
            "--workers {workers}: a file of 200 lines of 900 KB peaked at {:.1} MB, {growth:.1} \
             MB over one line's {base:.1} MB: more than the {GROWTH_MB} MB the floor of \
             {FLOOR_MB} MB leaves the release binary over its own {RELEASE_BASE_MB} MB",
            r.peak_mb
        );
    }
}

#[test]
fn the_memory_bounds_are_settings_that_run_help_describes() {
    let out = Dir::new().sluice(&["run", "--help"], "");
    out.assert_clean_success();
    let help = out.stdout_str();
    for want in [
        "--batch-bytes <BATCH_BYTES>",
        "[default: 1048576]",
        "--read-ahead-bytes <READ_AHEAD_BYTES>",
        "[default: 8388608]",
    ] {
        assert!(help.contains(want), "no {want:?} in:\n{help}");
    }
}
