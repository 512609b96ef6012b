//! Whether `'statements'` and `'epochs'` read a piece's keys before writing them.
//!
//! Reading first lets a key that exists be decided without a write (a duplicate costs a
//! read, not a failed write), but it costs every key a read and every piece a round trip.
//! Writing first (each key an `INSERT`, which fails on an item that exists, after which the
//! refused keys are read strongly consistent, as after any stale read) costs nothing more
//! for a new key and, for one that exists, a failed write and that read. Both decide from
//! what a conditional write allows, so the choice changes what a key costs, never what
//! happens to it: an `INSERT` sent without a read is an acquisition that read "absent",
//! the stalest answer a read may give.
//!
//! In read units (a write unit is priced as five: $0.625 against $0.125 a million on
//! demand, $0.00065 against $0.00013 an hour provisioned, us-east-1), with `p` the share of
//! keys that exist and `r` the first read's units (½ eventually consistent, 1 strongly),
//! reading first costs `r + 5(1 − p)` a key and writing first `5 + p` (the re-read of each
//! refused key), the writes that take an existing key being the same in both: writing
//! first is cheaper while `6p < r`. The store keeps `p` over the last [`WINDOW`] keys it
//! asked for (what the reads found, or which `INSERT`s were refused) and reads first until
//! it has seen a piece, and whenever `6p ≥ r`.

use std::sync::Mutex;

/// The keys whose outcome `p` is kept over (older ones weigh less, in proportion).
const WINDOW: f64 = 512.0;

/// A write unit's price in read units.
const WRITE_IN_READS: f64 = 5.0;

/// When a piece's keys are read before they are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FirstReadRule {
    /// While the share of keys that exist makes it cheaper (the store's choice).
    #[default]
    Measured,
    /// Always (tests of the read-first path).
    Always,
    /// Never (tests of the write-first path).
    Never,
}

/// The share of asked keys that existed, over about the last [`WINDOW`] keys.
#[derive(Debug, Default)]
pub(super) struct FirstRead {
    pub(super) rule: FirstReadRule,
    /// (existed, asked), scaled down together so that `asked` stays ≤ [`WINDOW`].
    seen: Mutex<(f64, f64)>,
}

impl FirstRead {
    /// Whether a piece whose first read costs `read_units` a key reads before writing.
    pub(super) fn read_first(&self, read_units: f64) -> bool {
        match self.rule {
            FirstReadRule::Measured => {}
            FirstReadRule::Always => return true,
            FirstReadRule::Never => return false,
        }
        let (existed, asked) = *self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if asked == 0.0 {
            return true;
        }
        (WRITE_IN_READS + 1.0) * existed >= read_units * asked
    }

    /// Learns that `existed` of `asked` keys existed.
    pub(super) fn observe(&self, existed: usize, asked: usize) {
        if asked == 0 {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (mut e, mut a) = *seen;
        e += existed as f64;
        a += asked as f64;
        if a > WINDOW {
            e *= WINDOW / a;
            a = WINDOW;
        }
        *seen = (e, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTUAL: f64 = 0.5;
    const STRONG: f64 = 1.0;

    #[test]
    fn a_rule_other_than_measured_decides_alone() {
        let f = FirstRead {
            rule: FirstReadRule::Never,
            ..FirstRead::default()
        };
        assert!(!f.read_first(STRONG));
        f.observe(100, 100);
        assert!(!f.read_first(STRONG));
        let f = FirstRead {
            rule: FirstReadRule::Always,
            ..FirstRead::default()
        };
        f.observe(0, 100);
        assert!(f.read_first(EVENTUAL));
    }

    #[test]
    fn a_store_reads_first_until_it_has_seen_a_piece() {
        let f = FirstRead::default();
        assert!(f.read_first(EVENTUAL));
        f.observe(0, 0);
        assert!(f.read_first(EVENTUAL));
        f.observe(0, 100);
        assert!(!f.read_first(EVENTUAL));
    }

    #[test]
    fn the_break_even_share_is_the_read_units_over_six() {
        // (existed of 100, read units, reads first)
        let table = [
            (0, EVENTUAL, false),
            (8, EVENTUAL, false),
            (9, EVENTUAL, true),
            (100, EVENTUAL, true),
            (16, STRONG, false),
            (17, STRONG, true),
        ];
        for (existed, units, first) in table {
            let f = FirstRead::default();
            f.observe(existed, 100);
            assert_eq!(
                f.read_first(units),
                first,
                "{existed} of 100, {units} units"
            );
        }
    }

    #[test]
    fn duplicates_turn_it_back_to_reading_and_new_keys_to_writing() {
        let f = FirstRead::default();
        for _ in 0..20 {
            f.observe(0, 100);
        }
        assert!(!f.read_first(EVENTUAL));
        // One piece of duplicates among the window's new keys (100 of 512 existed).
        f.observe(100, 100);
        assert!(f.read_first(EVENTUAL));
        // New keys again: back to writing first within a window's worth.
        for _ in 0..6 {
            f.observe(0, 100);
        }
        assert!(!f.read_first(EVENTUAL));
    }
}
