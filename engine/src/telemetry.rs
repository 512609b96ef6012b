//! Counters keyed by name, after Vector's `internal_events`: a transform reports what it did
//! by emitting an event value ([`InternalEvent`], declared beside the transform that emits
//! it), and the event decides what that means for the counters and for the log. The engine
//! knows no counter: each is a name that the transform counting it and the adapters
//! publishing it (the Lambda function's metrics) agree on. Nothing is
//! counted in process globals: the counters live in the [`Telemetry`] of the pipeline's
//! [`crate::context::Context`], which a transform reaches through its build context and an
//! adapter reads after a run.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Something a transform did that the adapters count.
pub trait InternalEvent {
    /// Records the event in `telemetry` (and logs it, if it is worth a line).
    fn emit(self, telemetry: &Telemetry);
}

/// The counters of one pipeline, by name. A counter nothing added to reads 0.
#[derive(Debug, Default)]
pub struct Telemetry {
    counters: Mutex<BTreeMap<&'static str, u64>>,
}

impl Telemetry {
    /// Records `event`.
    pub fn emit(&self, event: impl InternalEvent) {
        event.emit(self);
    }

    /// Adds `n` to the counter `name`.
    pub fn add(&self, name: &'static str, n: u64) {
        *self.lock().entry(name).or_default() += n;
    }

    /// The counter `name` so far.
    pub fn get(&self, name: &str) -> u64 {
        self.lock().get(name).copied().unwrap_or(0)
    }

    /// The counter `name`, which starts again from 0 (the Lambda function reports each
    /// invocation's).
    pub fn take(&self, name: &str) -> u64 {
        self.lock().get_mut(name).map(std::mem::take).unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, u64>> {
        // Counters stay right through a panic elsewhere: each change is one addition.
        self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Seen(&'static str);

    impl InternalEvent for Seen {
        fn emit(self, telemetry: &Telemetry) {
            telemetry.add(self.0, 1);
        }
    }

    #[test]
    fn counters_are_kept_by_name_and_taken() {
        let t = Telemetry::default();
        for name in ["a", "b", "a"] {
            t.emit(Seen(name));
        }
        t.add("c", 5);
        assert_eq!((t.get("a"), t.get("b"), t.get("c")), (2, 1, 5));
        assert_eq!(t.get("never"), 0);
        assert_eq!(t.take("a"), 2);
        assert_eq!(t.get("a"), 0);
        assert_eq!(t.take("never"), 0);
    }
}
