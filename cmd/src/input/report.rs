//! What became of the lines read: which were not delivered.

use std::sync::{Arc, Mutex};

use sluice_engine::ack::FailureWatch;

/// A line whose messages were not all delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undelivered {
    /// The file (or `<stdin>`).
    pub source: Arc<str>,
    /// Its position among the inputs.
    pub source_index: usize,
    /// The line number, from 1.
    pub line: u64,
    /// Why, as the transform that failed it said.
    pub reason: String,
}

/// The lines that were not delivered, told by the tokens of every line as they are failed
/// (through each source's [`SourceWatch`], which only records, so memory grows with the
/// failures, not with the input).
#[derive(Default)]
pub struct LineReport {
    failed: Mutex<Vec<Undelivered>>,
}

/// The watch of every line of one source: a line's token holds its number, this the rest
/// of its place.
pub(super) struct SourceWatch {
    pub(super) source: Arc<str>,
    /// The source's position in the argument list (for ordering the report).
    pub(super) source_index: usize,
    pub(super) report: Arc<LineReport>,
}

impl FailureWatch for SourceWatch {
    fn failed(&self, line: u64, reason: &str) {
        self.report
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Undelivered {
                source: self.source.clone(),
                source_index: self.source_index,
                line,
                reason: reason.to_string(),
            });
    }
}

impl LineReport {
    /// The undelivered lines so far, in input order, each once with the first reason it
    /// was failed for (a line whose copies failed, or that failed twice, is told more than
    /// once).
    pub fn undelivered(&self) -> Vec<Undelivered> {
        let mut v = self
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // Stable: the first reason told stays first among a line's.
        v.sort_by_key(|u| (u.source_index, u.line));
        v.dedup_by_key(|u| (u.source_index, u.line));
        v
    }
}
