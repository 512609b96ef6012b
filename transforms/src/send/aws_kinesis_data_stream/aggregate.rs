//! `enable_record_aggregation`: which items share a KPL aggregated record. The format
//! itself is `sluice_platform::kpl`'s; here is the grouping: records of one partition key are
//! aggregated together and in order (so a key keeps reaching one shard in order), each
//! aggregate stays within Kinesis's 1 MiB per record, and a lone record is sent plain.

use bytes::Bytes;

use super::{MAX_RECORD_BYTES, Record, random_key};
use sluice_platform::kpl::Builder;

/// One aggregate being filled: its outer partition key, the builder, the batch items in it.
struct Open {
    /// The partition key it groups (`None`: random keys).
    key: Option<String>,
    /// The key it is sent under (a random one for random keys).
    outer: String,
    builder: Builder,
    items: Vec<usize>,
}

impl Open {
    fn new(key: Option<String>) -> Open {
        let outer = key.clone().unwrap_or_else(random_key);
        Open {
            key,
            outer,
            builder: Builder::default(),
            items: Vec::new(),
        }
    }

    /// The record it makes (plain when it holds one user record), and a fresh one in its
    /// place (a new random key for random keys).
    fn take(&mut self) -> Record {
        let full = std::mem::replace(self, Open::new(self.key.clone()));
        full.finish()
    }

    fn finish(self) -> Record {
        Record {
            key: self.outer,
            data: self.builder.into_record(),
            items: self.items,
        }
    }
}

/// KPL aggregation of `(partition key, data)` items (`None` keys are random). Records of
/// one key are aggregated together and in order; with random keys, consecutive items share
/// an aggregate and one random key.
pub(super) fn aggregate(items: Vec<(Option<String>, &Bytes)>) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    // Open aggregates, in the order they were opened.
    let mut open: Vec<Open> = Vec::new();
    for (i, (key, data)) in items.into_iter().enumerate() {
        let slot = match open.iter().position(|o| o.key == key) {
            Some(p) => p,
            None => {
                open.push(Open::new(key));
                open.len() - 1
            }
        };
        let agg = &mut open[slot];
        // The user records carry the key the aggregate is sent under.
        let fits =
            |a: &Open| a.builder.size_with(&a.outer, data.len(), a.outer.len()) <= MAX_RECORD_BYTES;
        if !agg.builder.is_empty() && !fits(agg) {
            out.push(agg.take());
        }
        if agg.builder.is_empty() && !fits(agg) {
            // Too large to aggregate at all: sent plain (it fits as a plain record), after
            // what was aggregated before it (order is kept).
            out.push(Record {
                key: agg.outer.clone(),
                data: data.clone(),
                items: vec![i],
            });
            if agg.key.is_none() {
                agg.outer = random_key();
            }
            continue;
        }
        let outer = agg.outer.clone();
        agg.builder.add(&outer, data.clone());
        agg.items.push(i);
    }
    out.extend(
        open.into_iter()
            .filter(|o| !o.builder.is_empty())
            .map(Open::finish),
    );
    out
}
