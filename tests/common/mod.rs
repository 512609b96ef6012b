//! Running the real `sluice` binary as a process, for the CLI integration tests.
//!
//! Each test works in its own temporary directory and names files relative to it, so the
//! places in error messages (`cfg.jsonnet:2:53`) can be asserted exactly.

#![allow(dead_code)]

/// An SDK client of crate `$sdk` for a local emulator at `$endpoint`: region `us-east-1`,
/// placeholder credentials, sluice's HTTPS client.
macro_rules! emulator_client {
    ($sdk:ident, $endpoint:expr) => {{
        use $sdk::config::{BehaviorVersion, Credentials, Region};
        let conf = $sdk::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "sluice-tests"))
            .endpoint_url($endpoint)
            .http_client(sluice_platform::aws::https_client())
            .build();
        $sdk::Client::from_conf(conf)
    }};
}
pub(crate) use emulator_client;

pub mod cloudwatch;
pub mod dynamodb;
pub mod emulator;
pub mod gcs;
pub mod kinesalite;
pub mod moto;
pub mod objects;
pub mod runtime_api;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A current-thread runtime for the SDK calls a test makes (set-up, reading back).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The longest a single invocation may take before the test fails (it never should).
const TIMEOUT: Duration = Duration::from_secs(60);

/// What a finished `sluice` process left behind.
#[derive(Debug)]
pub struct Output {
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output, byte-exact.
    pub stdout: Vec<u8>,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl Output {
    /// Standard output as text (it must be UTF-8).
    pub fn stdout_str(&self) -> &str {
        std::str::from_utf8(&self.stdout).expect("stdout is UTF-8")
    }

    /// Asserts the process exited with `code`, showing everything when it did not.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "exit code\n--- stdout (first 2000 bytes):\n{}\n--- stderr:\n{}",
            String::from_utf8_lossy(&self.stdout[..self.stdout.len().min(2000)]),
            self.stderr
        );
        self
    }

    /// Asserts success with nothing on standard error.
    #[track_caller]
    pub fn assert_clean_success(&self) -> &Self {
        self.assert_code(0);
        assert_eq!(self.stderr, "", "stderr of a clean run");
        self
    }

    /// Asserts a clean success that printed exactly `stdout`.
    #[track_caller]
    pub fn assert_stdout(&self, stdout: &str) -> &Self {
        self.assert_clean_success();
        assert_eq!(self.stdout_str(), stdout);
        self
    }

    /// Asserts exit code 1 with exactly `stderr`.
    #[track_caller]
    pub fn assert_failure(&self, stderr: &str) -> &Self {
        self.assert_code(1);
        assert_eq!(self.stderr, stderr);
        self
    }
}

/// A temporary working directory for one test.
pub struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    /// A fresh, empty directory.
    pub fn new() -> Self {
        Dir {
            tmp: tempfile::Builder::new()
                .prefix("sluice-cli-test")
                .tempdir()
                .expect("creating a temp dir"),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Writes `contents` to `name` (relative; parent directories are created) and returns
    /// the full path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.tmp.path().join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("creating parent dirs");
        }
        std::fs::write(&p, contents).expect("writing a test file");
        p
    }

    /// Reads `name` (relative) as text.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.tmp.path().join(name)).expect("reading a test file")
    }

    /// Runs `sluice args...` in this directory with `stdin` as standard input.
    pub fn sluice(&self, args: &[&str], stdin: impl Into<Vec<u8>>) -> Output {
        run_in(self.path(), args, stdin.into(), None)
    }

    /// [`Dir::sluice`] with extra environment variables.
    pub fn sluice_env(
        &self,
        args: &[&str],
        stdin: impl Into<Vec<u8>>,
        env: &[(String, String)],
    ) -> Output {
        run_in_env(self.path(), args, stdin.into(), None, env)
    }
}

/// The workspace root (the parent of `cmd/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cmd/ has a parent")
        .to_path_buf()
}

/// Runs `sluice args...` in `cwd`; when `stdout` is given it replaces the captured pipe.
pub fn run_in(cwd: &Path, args: &[&str], stdin: Vec<u8>, stdout: Option<Stdio>) -> Output {
    run_in_env(cwd, args, stdin, stdout, &[])
}

/// [`run_in`] with extra environment variables.
pub fn run_in_env(
    cwd: &Path,
    args: &[&str],
    stdin: Vec<u8>,
    stdout: Option<Stdio>,
    env: &[(String, String)],
) -> Output {
    let captured = stdout.is_none();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        // The caller's SLUICE_LOG does not leak in; a test's own does.
        .env_remove("SLUICE_LOG")
        // The AWS SDK never reaches for instance metadata (a test may say otherwise).
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(stdout.unwrap_or_else(Stdio::piped))
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting sluice");

    // Feed stdin and drain the outputs on their own threads, so large inputs and outputs
    // cannot deadlock on full pipes.
    let mut pipe_in = child.stdin.take().expect("stdin pipe");
    let feeder = std::thread::spawn(move || {
        // The process may exit before reading everything (an error); that is not ours.
        let _ = pipe_in.write_all(&stdin);
    });
    let out_reader = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).expect("reading stdout");
            buf
        })
    });
    let mut pipe_err = child.stderr.take().expect("stderr pipe");
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        pipe_err.read_to_end(&mut buf).expect("reading stderr");
        buf
    });

    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for sluice") {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice {args:?} did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    feeder.join().expect("stdin feeder");
    let stdout = match out_reader {
        Some(h) => h.join().expect("stdout reader"),
        None => {
            assert!(!captured);
            Vec::new()
        }
    };
    let stderr = err_reader.join().expect("stderr reader");
    Output {
        code: status.code(),
        stdout,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Runs `sluice args...` in `cwd` with standard output connected to a pipe whose reading end
/// is already closed, so every write to stdout fails with `EPIPE` (as with `sluice ... | head`
/// after `head` has exited).
pub fn run_with_closed_stdout(cwd: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let (reader, writer) = std::io::pipe().expect("creating a pipe");
    drop(reader);
    run_in(cwd, args, stdin.to_vec(), Some(Stdio::from(writer)))
}

/// Gzip-compresses `data` (one member).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip write");
    enc.finish().expect("gzip finish")
}
