//! What the transforms of one pipeline share, handed to every constructor by
//! [`crate::Build`] instead of kept in process globals: where relative state files go, the
//! instances shared by configuration (kv stores), the telemetry the transforms report to,
//! the clock, and where `send_stdout` writes (the process's standard output unless the
//! adapter says otherwise: `sluice test` captures it per test, so a config's output does not
//! land in the middle of the test report).
//!
//! An adapter makes one context per pipeline it builds (`sluice run`, the Lambda function)
//! or per test case (`sluice test`, so that no two tests share a lock), and reads the
//! pipeline's telemetry from it afterwards. Nested transform lists (`meta_switch` cases, the
//! lock's inner list) are built in the same context as the list around them.

use std::any::Any;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::telemetry::Telemetry;

/// The time as transforms see it. The system clock in production; tests may fix it.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;

    /// The current time in milliseconds since the Unix epoch (0 before it).
    fn now_ms(&self) -> i64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that always reads the same time.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

type Instances = HashMap<String, Arc<dyn Any + Send + Sync>>;

/// A writer standing in for standard output ([`Context::with_stdout`]). An
/// `Arc<Mutex<Vec<u8>>>` coerces to it, and the caller keeps its own handle to read it.
pub type OutputSink = Arc<Mutex<dyn Write + Send>>;

/// What the transforms of one pipeline share; see the module documentation.
pub struct Context {
    state_dir: Option<PathBuf>,
    shared: Mutex<Instances>,
    telemetry: Arc<Telemetry>,
    clock: Arc<dyn Clock>,
    stdout: Option<OutputSink>,
    /// Inner lists that settle each message themselves (the lock's) fail a message alone
    /// ([`crate::Pipeline::failing_messages_alone`]), as the top level does in `sluice run`.
    messages_fail_alone: bool,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("state_dir", &self.state_dir)
            .field("stdout_captured", &self.stdout.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Context {
    fn default() -> Self {
        Context {
            state_dir: None,
            shared: Mutex::default(),
            telemetry: Arc::default(),
            clock: Arc::new(SystemClock),
            stdout: None,
            messages_fail_alone: false,
        }
    }
}

impl Context {
    /// A context with relative state files in the current directory, the system clock and
    /// fresh telemetry.
    pub fn new() -> Arc<Context> {
        Arc::new(Context::default())
    }

    /// A context whose relative state files resolve against `dir` (`sluice test` gives each
    /// test case a temporary one).
    pub fn in_dir(dir: impl Into<PathBuf>) -> Arc<Context> {
        Arc::new(Context::default().with_state_dir(dir))
    }

    /// The same context with relative state files resolving against `dir` (before it is
    /// shared).
    pub fn with_state_dir(mut self, dir: impl Into<PathBuf>) -> Context {
        self.state_dir = Some(dir.into());
        self
    }

    /// The same context with `send_stdout` writing to `sink` instead of the process's
    /// standard output (before it is shared).
    pub fn with_stdout(mut self, sink: OutputSink) -> Context {
        self.stdout = Some(sink);
        self
    }

    /// The same context, in which the inner lists that settle each message themselves (the
    /// lock's) fail a message alone (before it is shared): for a caller whose own pipeline
    /// does ([`crate::Pipeline::failing_messages_alone`]).
    pub fn with_messages_failing_alone(mut self) -> Context {
        self.messages_fail_alone = true;
        self
    }

    /// Whether inner lists that settle each message themselves fail a message alone.
    pub fn messages_fail_alone(&self) -> bool {
        self.messages_fail_alone
    }

    /// The same context with `clock` (before it is shared).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Context {
        self.clock = clock;
        self
    }

    /// Resolves a state file's path: absolute paths as they are, relative ones against
    /// the state directory (the current directory when there is none).
    pub fn resolve(&self, file: &str) -> PathBuf {
        let p = Path::new(file);
        match &self.state_dir {
            Some(d) if !p.is_absolute() => d.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// The instance registered under `id`, made by `make` the first time: every transform
    /// configured with the same store shares one instance (one SQLite connection, one
    /// memory map, one DynamoDB client).
    pub fn shared<T: Send + Sync + 'static, E>(
        &self,
        id: String,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = shared.get(&id)
            && let Ok(t) = existing.clone().downcast::<T>()
        {
            return Ok(t);
        }
        let t = Arc::new(make()?);
        shared.insert(id, t.clone());
        Ok(t)
    }

    /// What the transforms reported.
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Where `send_stdout` writes when it is not the process's standard output.
    pub fn stdout(&self) -> Option<&OutputSink> {
        self.stdout.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn shared_instances_are_made_once_per_id_and_per_context() {
        let ctx = Context::new();
        let a = ctx
            .shared::<_, ()>("s".into(), || Ok(Mutex::new(1)))
            .unwrap();
        *a.lock().unwrap() = 2;
        let again = ctx
            .shared::<Mutex<i32>, ()>("s".into(), || panic!("made twice"))
            .unwrap();
        assert_eq!(*again.lock().unwrap(), 2);
        let other = Context::new();
        let fresh = other
            .shared::<_, ()>("s".into(), || Ok(Mutex::new(1)))
            .unwrap();
        assert_eq!(*fresh.lock().unwrap(), 1, "contexts share nothing");
        let failed = ctx.shared::<Mutex<i32>, &str>("t".into(), || Err("no"));
        assert_eq!(failed.err(), Some("no"));
    }

    #[test]
    fn relative_files_resolve_against_the_state_directory() {
        assert_eq!(Context::new().resolve("a.db"), PathBuf::from("a.db"));
        let ctx = Context::in_dir("/tmp/x");
        assert_eq!(ctx.resolve("a.db"), PathBuf::from("/tmp/x/a.db"));
        assert_eq!(ctx.resolve("/abs/a.db"), PathBuf::from("/abs/a.db"));
    }

    #[test]
    fn an_output_sink_is_kept_and_written_through() {
        assert!(
            Context::new().stdout().is_none(),
            "standard output by default"
        );
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let ctx = Context::default()
            .with_state_dir("/tmp/x")
            .with_stdout(buf.clone());
        let sink = ctx.stdout().expect("the sink");
        sink.lock().unwrap().write_all(b"line\n").unwrap();
        assert_eq!(&buf.lock().unwrap()[..], b"line\n");
        assert_eq!(ctx.resolve("a.db"), PathBuf::from("/tmp/x/a.db"));
    }

    #[test]
    fn a_fixed_clock_reads_its_time() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let ctx = Context::default().with_clock(Arc::new(FixedClock(t)));
        assert_eq!(ctx.clock().now_ms(), 1_700_000_000_123);
        assert!(SystemClock.now_ms() > 1_700_000_000_000);
    }
}
