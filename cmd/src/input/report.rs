//! What became of the lines read: which were not delivered, how many were read, and where
//! reading stopped.
//!
//! Every line's message carries a token of its batch's [`sluice_engine::ack::AckGroup`],
//! which tells the source's watch of each failure (with the line's number) and, once every
//! message of the batch is gone, that its lines are finished. So the report knows, at any
//! time, the lines that failed and the lines still in the pipeline. After a normal end
//! nothing is still in it; when a stop's grace period runs out, what is left there is
//! named too (it may or may not have been delivered), so that `--undelivered` lists every
//! line read and not known delivered.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sluice_engine::ack::FailureWatch;

/// A line whose messages were not all delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undelivered {
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
/// failures, not with the input), and the lines handed to the pipeline that are still in it.
#[derive(Default)]
pub(crate) struct LineReport {
    failed: Mutex<Vec<Undelivered>>,
    /// Lines handed to the pipeline whose messages are not all gone.
    open: Mutex<OpenLines>,
    /// Lines handed to the pipeline.
    read: AtomicU64,
    /// The first line not handed to the pipeline; `None` once every source was read to its
    /// end.
    next: Mutex<Option<(Arc<str>, u64)>>,
}

/// Runs of lines by (source index, first line): the line after the last, and the source's
/// name.
type OpenLines = BTreeMap<(usize, u64), (u64, Arc<str>)>;

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
        lock(&self.report.failed).push(Undelivered {
            source: self.source.clone(),
            source_index: self.source_index,
            line,
            reason: reason.to_string(),
        });
    }

    fn finished(&self, first: u64, count: u64) {
        self.report
            .close(self.source_index, first, first.saturating_add(count));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LineReport {
    /// The undelivered lines so far, in input order, each once with the first reason it
    /// was failed for, or that reason as an outer layer named it (a line whose copies
    /// failed, or that failed twice, is told more than once).
    pub(crate) fn undelivered(&self) -> Vec<Undelivered> {
        let mut v = lock(&self.failed).clone();
        sort_and_dedup(&mut v);
        v
    }

    /// [`LineReport::undelivered`], and every other line still in the pipeline, failed for
    /// `reason`: what a run that gives up before the pipeline is done has not delivered, as
    /// far as it can know.
    pub(crate) fn undelivered_or_open(&self, reason: &str) -> Vec<Undelivered> {
        let mut v = lock(&self.failed).clone();
        for (&(source_index, first), (end, source)) in lock(&self.open).iter() {
            v.extend((first..*end).map(|line| Undelivered {
                source: source.clone(),
                source_index,
                line,
                reason: reason.to_string(),
            }));
        }
        sort_and_dedup(&mut v);
        v
    }

    /// How many lines were handed to the pipeline.
    pub(crate) fn read(&self) -> u64 {
        self.read.load(Ordering::Acquire)
    }

    /// Where reading stopped: the source and number of the first line not handed to the
    /// pipeline; `None` when every source was read to its end.
    pub(crate) fn next_unread(&self) -> Option<(Arc<str>, u64)> {
        lock(&self.next).clone()
    }

    /// Reading starts on `source`.
    pub(super) fn reading(&self, source: &Arc<str>) {
        *lock(&self.next) = Some((source.clone(), 1));
    }

    /// Every source was read to its end.
    pub(super) fn read_to_the_end(&self) {
        *lock(&self.next) = None;
    }

    /// Lines `first..end` of `source` are handed to the pipeline (told before they are, so
    /// that they are never finished before they are open).
    pub(super) fn handing_on(&self, watch: &SourceWatch, first: u64, end: u64) {
        if end <= first {
            return;
        }
        lock(&self.open).insert((watch.source_index, first), (end, watch.source.clone()));
        self.read.fetch_add(end - first, Ordering::AcqRel);
        *lock(&self.next) = Some((watch.source.clone(), end));
    }

    /// Lines `first..end` of source `source_index` are finished: no longer open. (A batch may
    /// have been cut in parts, each finished on its own.)
    fn close(&self, source_index: usize, first: u64, end: u64) {
        let mut open = lock(&self.open);
        // The open ranges that start before `end`, from the last, while they reach past
        // `first`.
        while let Some((&(_, start), (stop, source))) = open
            .range((source_index, 0)..(source_index, end))
            .next_back()
            .filter(|(_, (stop, _))| *stop > first)
        {
            let (stop, source) = (*stop, source.clone());
            open.remove(&(source_index, start));
            if end < stop {
                open.insert((source_index, end), (stop, source.clone()));
            }
            if start < first {
                open.insert((source_index, start), (first, source));
                break;
            }
        }
    }
}

/// In input order, each line once with the first reason told (stable).
/// Sorts by place and keeps one entry per line: its first reason, or the same failure as
/// an outer layer named it later (a reason that ends with `: ` and the first: a meta
/// transform's inner list fails the line, then the meta transform's step says which one
/// it was).
fn sort_and_dedup(v: &mut Vec<Undelivered>) {
    v.sort_by_key(|u| (u.source_index, u.line));
    v.dedup_by(|later, kept| {
        if (later.source_index, later.line) != (kept.source_index, kept.line) {
            return false;
        }
        if later.reason.len() > kept.reason.len()
            && later.reason.ends_with(&kept.reason)
            && later.reason[..later.reason.len() - kept.reason.len()].ends_with(": ")
        {
            kept.reason = std::mem::take(&mut later.reason);
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(report: &Arc<LineReport>, name: &str, index: usize) -> SourceWatch {
        SourceWatch {
            source: name.into(),
            source_index: index,
            report: report.clone(),
        }
    }

    fn places(v: &[Undelivered]) -> Vec<(String, u64, String)> {
        v.iter()
            .map(|u| (u.source.to_string(), u.line, u.reason.clone()))
            .collect()
    }

    #[test]
    fn lines_handed_on_stay_open_until_finished_in_any_parts_and_order() {
        let report = Arc::new(LineReport::default());
        let a = watch(&report, "a", 0);
        let b = watch(&report, "b", 1);
        report.reading(&a.source);
        assert_eq!(report.next_unread(), Some(("a".into(), 1)));
        report.handing_on(&a, 1, 6);
        report.handing_on(&a, 6, 8);
        report.reading(&b.source);
        report.handing_on(&b, 1, 3);
        report.handing_on(&b, 3, 3);
        assert_eq!(report.read(), 9);
        assert_eq!(report.next_unread(), Some(("b".into(), 3)));
        // Batch a:1..6 was cut in three; its middle and b's batch are finished; a line
        // failed.
        a.finished(2, 2);
        b.finished(1, 2);
        a.failed(7, "refused");
        a.finished(6, 2);
        a.failed(5, "no key");
        let left = report.undelivered_or_open("still on its way");
        assert_eq!(
            places(&left),
            [
                ("a".into(), 1, "still on its way".into()),
                ("a".into(), 4, "still on its way".into()),
                ("a".into(), 5, "no key".into()),
                ("a".into(), 7, "refused".into()),
            ]
        );
        a.finished(1, 1);
        a.finished(4, 2);
        assert_eq!(
            report.undelivered_or_open("x"),
            report.undelivered(),
            "nothing open"
        );
        // Finishing what is not open changes nothing.
        a.finished(1, 100);
        report.read_to_the_end();
        assert_eq!(report.next_unread(), None);
    }

    #[test]
    fn a_line_keeps_its_first_reason_or_that_reason_as_an_outer_layer_named_it() {
        let report = Arc::new(LineReport::default());
        let a = watch(&report, "a", 0);
        a.failed(1, "transform inner: bad");
        a.failed(1, "transform route: transform inner: bad");
        a.failed(2, "first");
        a.failed(2, "something else");
        a.failed(2, "xfirst");
        assert_eq!(
            places(&report.undelivered()),
            [
                (
                    "a".into(),
                    1,
                    "transform route: transform inner: bad".into()
                ),
                ("a".into(), 2, "first".into()),
            ]
        );
    }
}
