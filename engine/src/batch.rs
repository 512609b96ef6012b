//! Batching shared by stateful transforms (sends, aggregates, `utility_control`).
//!
//! A [`BatchBuffer`] keeps one batch per batch key, bounded by count, total size and age.
//! Unlike Substation, whose `duration` is an idle gap noticed only when the next message
//! arrives, the age here is a real maximum: [`BatchBuffer::deadline`] tells the pipeline
//! when the oldest batch expires, and the pipeline's timer calls the transform's `expire`
//! even when no message arrives. Empty batches are removed, so distinct keys do not
//! accumulate forever, and batches come out in the order they were opened.

use std::time::{Duration, Instant};

use indexmap::IndexMap;

use crate::settings::BatchSettings;

/// The bounds of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most items.
    pub count: usize,
    /// Most bytes.
    pub size: usize,
    /// Oldest age; zero means no age limit.
    pub max_age: Duration,
}

impl From<BatchSettings> for BatchLimits {
    /// A count or size of 0 means the default, as Go's zero values do in Substation.
    fn from(b: BatchSettings) -> Self {
        let d = BatchSettings::default();
        BatchLimits {
            count: if b.count == 0 { d.count } else { b.count },
            size: if b.size == 0 { d.size } else { b.size },
            max_age: b.duration.0,
        }
    }
}

impl BatchLimits {
    /// Whether an item of `size` bytes fits in an empty batch.
    pub fn admits(&self, size: usize) -> Result<(), TooLarge> {
        if size > self.size {
            return Err(TooLarge {
                item: size,
                limit: self.size,
            });
        }
        Ok(())
    }

    /// These limits, capped by what a destination accepts (a configured value is honoured
    /// only within the cap, as in Substation).
    pub fn capped(self, count: usize, size: usize) -> Self {
        BatchLimits {
            count: self.count.min(count),
            size: self.size.min(size),
            max_age: self.max_age,
        }
    }
}

/// A full, expired or flushed batch.
#[derive(Debug)]
pub struct Batch<T> {
    /// The batch key ("" when none is configured).
    pub key: String,
    /// The items, in arrival order.
    pub items: Vec<T>,
    /// Their total size in bytes.
    pub size: usize,
}

#[derive(Debug)]
struct Open<T> {
    items: Vec<T>,
    size: usize,
    opened: Instant,
}

/// An item does not fit in an empty batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "data could not be added to batch: an item of {item} bytes exceeds the batch size limit of {limit} bytes (the transform's batch.size: raise it to take larger items)"
)]
pub struct TooLarge {
    /// The item's size.
    pub item: usize,
    /// The limit.
    pub limit: usize,
}

/// Per-key batches with count, size and age limits.
#[derive(Debug)]
pub struct BatchBuffer<T> {
    limits: BatchLimits,
    open: IndexMap<String, Open<T>>,
}

/// Whether two batch keys are equal, without a `memcmp` call for the empty key (no
/// `object.batch_key`: every message of a send compares it).
#[inline]
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

impl<T> BatchBuffer<T> {
    /// An empty buffer.
    pub fn new(limits: BatchLimits) -> Self {
        BatchBuffer {
            limits,
            open: IndexMap::new(),
        }
    }

    /// The limits.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// Adds an item of `size` bytes under `key`. Returns the batches that became ready:
    /// the previous batch when this item would overflow it, and the new one when it reached
    /// the count limit.
    pub fn push(
        &mut self,
        key: &str,
        item: T,
        size: usize,
        now: Instant,
    ) -> Result<Vec<Batch<T>>, TooLarge> {
        self.push_opening_at(key, item, size, || now)
    }

    /// [`BatchBuffer::push`], reading the clock (`now`) only when the item opens a batch: a
    /// send adding a thousand messages to one batch asks for the time once.
    pub fn push_opening_at(
        &mut self,
        key: &str,
        item: T,
        size: usize,
        now: impl FnOnce() -> Instant,
    ) -> Result<Vec<Batch<T>>, TooLarge> {
        self.limits.admits(size)?;
        let mut ready = Vec::new();
        // One lookup of the key, then places; without batch keys there is one batch open,
        // and it is found without hashing the key.
        let found = match self.open.first() {
            Some((k, _)) if self.open.len() == 1 && same_key(k, key) => Some(0),
            _ => self.open.get_index_of(key),
        };
        let i = match found {
            Some(i)
                if self.open[i].items.len() < self.limits.count
                    && self.open[i].size + size <= self.limits.size =>
            {
                i
            }
            found => {
                // The item would overflow the batch: it closes, and the item opens the next.
                if let Some(i) = found {
                    ready.extend(self.take_index(i));
                }
                let open = Open {
                    items: Vec::new(),
                    size: 0,
                    opened: now(),
                };
                self.open.insert_full(key.to_string(), open).0
            }
        };
        let o = &mut self.open[i];
        o.items.push(item);
        o.size += size;
        if o.items.len() >= self.limits.count {
            ready.extend(self.take_index(i));
        }
        Ok(ready)
    }

    /// Removes the batch at place `i` (keeping the others in the order they opened).
    fn take_index(&mut self, i: usize) -> Option<Batch<T>> {
        self.open.shift_remove_index(i).map(|(key, o)| Batch {
            key,
            items: o.items,
            size: o.size,
        })
    }

    fn take(&mut self, key: &str) -> Option<Batch<T>> {
        let i = self.open.get_index_of(key)?;
        self.take_index(i)
    }

    /// When the oldest batch expires, if any batch is open and ages are limited.
    pub fn deadline(&self) -> Option<Instant> {
        if self.limits.max_age.is_zero() {
            return None;
        }
        self.open
            .values()
            .map(|o| o.opened + self.limits.max_age)
            .min()
    }

    /// Removes and returns the batches that expired by `now`, oldest first.
    pub fn take_expired(&mut self, now: Instant) -> Vec<Batch<T>> {
        if self.limits.max_age.is_zero() {
            return Vec::new();
        }
        let expired: Vec<String> = self
            .open
            .iter()
            .filter(|(_, o)| o.opened + self.limits.max_age <= now)
            .map(|(k, _)| k.clone())
            .collect();
        expired.iter().filter_map(|k| self.take(k)).collect()
    }

    /// Removes and returns every batch, oldest first (a ctrl flush).
    pub fn take_all(&mut self) -> Vec<Batch<T>> {
        self.open
            .drain(..)
            .map(|(key, o)| Batch {
                key,
                items: o.items,
                size: o.size,
            })
            .collect()
    }

    /// Whether no batch is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(count: usize, size: usize, age_ms: u64) -> BatchLimits {
        BatchLimits {
            count,
            size,
            max_age: Duration::from_millis(age_ms),
        }
    }

    #[test]
    fn count_limit_flushes_eagerly() {
        let mut b = BatchBuffer::new(limits(2, 100, 0));
        let t = Instant::now();
        assert!(b.push("", 1, 1, t).unwrap().is_empty());
        let ready = b.push("", 2, 1, t).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].items, vec![1, 2]);
        assert!(b.is_empty());
    }

    #[test]
    fn size_limit_flushes_the_previous_batch() {
        let mut b = BatchBuffer::new(limits(10, 10, 0));
        let t = Instant::now();
        b.push("", 1, 6, t).unwrap();
        let ready = b.push("", 2, 6, t).unwrap();
        assert_eq!(ready[0].items, vec![1]);
        assert_eq!(b.take_all()[0].items, vec![2]);
    }

    #[test]
    fn oversize_item_is_an_error_naming_the_limit() {
        let mut b = BatchBuffer::<u8>::new(limits(10, 10, 0));
        let e = b.push("", 1, 11, Instant::now()).unwrap_err();
        assert!(
            e.to_string()
                .contains("11 bytes exceeds the batch size limit of 10")
        );
    }

    #[test]
    fn age_is_a_maximum_not_an_idle_gap() {
        let mut b = BatchBuffer::new(limits(100, 100, 50));
        let t0 = Instant::now();
        b.push("a", 1, 1, t0).unwrap();
        // Steady feeding does not extend the batch's life.
        b.push("a", 2, 1, t0 + Duration::from_millis(40)).unwrap();
        assert_eq!(b.deadline(), Some(t0 + Duration::from_millis(50)));
        assert!(b.take_expired(t0 + Duration::from_millis(49)).is_empty());
        let e = b.take_expired(t0 + Duration::from_millis(50));
        assert_eq!(e[0].items, vec![1, 2]);
        assert_eq!(b.deadline(), None);
    }

    #[test]
    fn keys_are_separate_and_come_out_in_open_order() {
        let mut b = BatchBuffer::new(limits(100, 100, 0));
        let t = Instant::now();
        b.push("z", 1, 1, t).unwrap();
        b.push("a", 2, 1, t).unwrap();
        b.push("z", 3, 1, t).unwrap();
        let all = b.take_all();
        assert_eq!(
            all.iter().map(|x| x.key.as_str()).collect::<Vec<_>>(),
            vec!["z", "a"]
        );
        assert_eq!(all[0].items, vec![1, 3]);
    }

    #[test]
    fn the_clock_is_read_only_when_a_batch_opens() {
        let mut b = BatchBuffer::new(limits(3, 100, 50));
        let t0 = Instant::now();
        let reads = std::cell::Cell::new(0);
        let mut closed = Vec::new();
        for i in 0..7 {
            let clock = || {
                reads.set(reads.get() + 1);
                t0 + Duration::from_millis(i)
            };
            closed.extend(b.push_opening_at("", i, 1, clock).unwrap());
        }
        // Batches of three open at items 0, 3 and 6.
        assert_eq!(reads.get(), 3);
        assert_eq!(closed.len(), 2);
        assert_eq!(closed[1].items, vec![3, 4, 5]);
        assert_eq!(b.deadline(), Some(t0 + Duration::from_millis(6 + 50)));
    }

    #[test]
    fn a_batch_closing_between_others_leaves_them_in_open_order() {
        let mut b = BatchBuffer::new(limits(2, 100, 0));
        let t = Instant::now();
        b.push("a", 1, 1, t).unwrap();
        b.push("b", 2, 1, t).unwrap();
        b.push("c", 3, 1, t).unwrap();
        let ready = b.push("b", 4, 1, t).unwrap();
        assert_eq!(
            (ready[0].key.as_str(), &ready[0].items[..]),
            ("b", &[2, 4][..])
        );
        // Over the size limit: "c" closes before the new item opens it again, last.
        let mut b2 = BatchBuffer::new(limits(10, 2, 0));
        b2.push("a", 1, 1, t).unwrap();
        b2.push("c", 3, 1, t).unwrap();
        b2.push("d", 5, 1, t).unwrap();
        let ready = b2.push("c", 6, 2, t).unwrap();
        assert_eq!(
            (ready[0].key.as_str(), &ready[0].items[..]),
            ("c", &[3][..])
        );
        b.push("b", 5, 1, t).unwrap();
        let keys = |all: Vec<Batch<i32>>| {
            all.into_iter()
                .map(|x| (x.key, x.items))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(b.take_all()),
            vec![
                ("a".into(), vec![1]),
                ("c".into(), vec![3]),
                ("b".into(), vec![5])
            ]
        );
        assert_eq!(
            keys(b2.take_all()),
            vec![
                ("a".into(), vec![1]),
                ("d".into(), vec![5]),
                ("c".into(), vec![6])
            ]
        );
    }
}
