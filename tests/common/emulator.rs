//! The process plumbing the emulator endpoints share ([`super::moto`], [`super::dynamodb`],
//! [`super::gcs`]):
//! an endpoint named by an environment variable, else the emulator started once per test
//! binary on a free loopback port, waited for until it listens, and killed when the binary
//! exits. A missing emulator fails the test with instructions; it is never skipped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How to start one emulator, and how to name it in failures.
pub struct Spec {
    /// Its name in messages, e.g. `moto` or `the DynamoDB emulator`.
    pub what: &'static str,
    /// The environment variable that names an already running endpoint to use instead.
    pub env: &'static str,
    /// What that endpoint is, e.g. `moto server`.
    pub running: &'static str,
    /// Its executable.
    pub bin: PathBuf,
    /// Its flags for the host and the port.
    pub flags: [&'static str; 2],
    /// How long it may take to listen, and how often to look.
    pub timeout: Duration,
    pub poll: Duration,
}

/// A running emulator process; killed when dropped.
pub struct Emulator {
    child: Child,
    endpoint: String,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The endpoint URL (`http://127.0.0.1:PORT`): the one in `spec.env`, else the emulator in
/// `cell`, started on first use and killed when the binary exits (statics are never
/// dropped, so an exit hook does it).
pub fn endpoint(cell: &'static OnceLock<Emulator>, spec: impl FnOnce() -> Spec) -> String {
    endpoint_with_args(cell, &[], spec)
}

/// [`endpoint`] for an emulator whose command line starts with `args` (a subcommand, fixed
/// flags): `BIN ARGS... HOST_FLAG 127.0.0.1 PORT_FLAG PORT`.
pub fn endpoint_with_args(
    cell: &'static OnceLock<Emulator>,
    args: &'static [&'static str],
    spec: impl FnOnce() -> Spec,
) -> String {
    let spec = spec();
    if let Ok(url) = std::env::var(spec.env)
        && !url.is_empty()
    {
        return url;
    }
    cell.get_or_init(|| {
        let emulator = start(&spec, args);
        kill_at_exit(emulator.child.id());
        emulator
    })
    .endpoint
    .clone()
}

fn start(spec: &Spec, args: &[&str]) -> Emulator {
    let Spec {
        what,
        env,
        running,
        bin,
        flags: [host_flag, port_flag],
        timeout,
        poll,
    } = spec;
    assert!(
        bin.exists(),
        "{what} is not installed ({}): run scripts/emulators.sh install \
         (or set {env} to a running {running})",
        bin.display()
    );
    // A free port: bind to port 0, read it, release it. Another process could take it
    // before the emulator binds; the readiness check below then fails loudly.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("finding a free loopback port")
        .port();
    let child = Command::new(bin)
        .args(args)
        .args([host_flag, "127.0.0.1", port_flag, &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let mut emulator = Emulator {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + *timeout;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return emulator;
        }
        if let Ok(Some(status)) = emulator.child.try_wait() {
            panic!("{what} exited at start ({status}); port {port} taken?");
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {addr} within {} s",
            timeout.as_secs()
        );
        std::thread::sleep(*poll);
    }
}

/// Kills process `pid` when the test binary exits (every emulator it started).
fn kill_at_exit(pid: u32) {
    static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    extern "C" fn kill_emulators() {
        let pids = PIDS.lock().unwrap_or_else(|e| e.into_inner());
        for pid in pids.iter() {
            // SAFETY: `kill` has no memory-safety preconditions; the pid is our child's.
            unsafe {
                kill(*pid as i32, 9);
            }
        }
    }
    unsafe extern "C" {
        fn atexit(f: extern "C" fn()) -> i32;
        fn kill(pid: i32, sig: i32) -> i32;
    }
    let mut pids = PIDS.lock().unwrap_or_else(|e| e.into_inner());
    if pids.is_empty() {
        // SAFETY: registers a plain function with no captured state.
        unsafe {
            atexit(kill_emulators);
        }
    }
    pids.push(pid);
}
