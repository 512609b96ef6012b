//! [`OutputSlab`]: where a worker writes the serialised data of the messages it hands on.
//!
//! A message's output was a buffer of its own, allocated on the worker that serialised it
//! and freed on the thread that sent it. Per message that is an allocation, a free into
//! another thread's page (which its owner collects later), and, when a send keeps a copy,
//! a second allocation to make the bytes shareable. With two workers, the pages emptied that
//! way were purged and refaulted, each purge an `madvise` that interrupts the other core to
//! flush its TLB. Small outputs are instead copied one after another into a shared slab and
//! handed on as slices of it: one allocation per [`SLAB`] bytes of output, shareable as
//! made, freed when the last message in it is gone. Large ones keep a buffer of their own
//! (a slab would only add a copy).
//!
//! The price is retention: a message that outlives its neighbours (a send holding a batch
//! for a key that fills slowly while the others flush) keeps its whole slab alive, so what
//! pending messages hold can be up to `SLAB` each rather than their own size. The slab is
//! small for that reason: at 16 KiB and outputs of 1 KB, one allocation serves 16 messages,
//! and a held output keeps at most 16 KiB (larger ones, past [`OWN_BUFFER_FROM`], keep only
//! their own buffer).

use bytes::{Bytes, BytesMut};

use crate::json::Value;

/// How much output one slab holds.
pub(crate) const SLAB: usize = 16 * 1024;

/// Outputs larger than this are not copied into a slab.
const OWN_BUFFER_FROM: usize = SLAB / 4;

/// A worker's slab and scratch buffer; see the module comment.
#[derive(Default)]
pub struct OutputSlab {
    slab: BytesMut,
    /// Each output is written here first (its capacity kept), then copied into the slab.
    scratch: Vec<u8>,
}

impl OutputSlab {
    /// `v` as JSON text (see [`super::serialize`]), in the slab when it is small.
    pub fn serialize(&mut self, v: &Value) -> Bytes {
        self.scratch.clear();
        crate::json::write_json(&mut self.scratch, v);
        let n = self.scratch.len();
        if n > OWN_BUFFER_FROM {
            return Bytes::from(std::mem::take(&mut self.scratch));
        }
        if self.slab.capacity() < n {
            // The full slab lives on in the outputs that are slices of it.
            self.slab = BytesMut::with_capacity(SLAB);
        }
        self.slab.extend_from_slice(&self.scratch);
        self.slab.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse::from_slice;

    fn doc(n: usize) -> Value {
        from_slice(format!(r#"{{"pad":"{}"}}"#, "x".repeat(n)).as_bytes()).unwrap()
    }

    #[test]
    fn small_outputs_share_a_slab_until_it_is_full_and_large_ones_have_their_own() {
        let mut slab = OutputSlab::default();
        let text = |n: usize| format!(r#"{{"pad":"{}"}}"#, "x".repeat(n));
        // 1,000-byte outputs: 16 fit in a slab of 16 KiB, the 17th starts the next one.
        let small: Vec<Bytes> = (0..70).map(|_| slab.serialize(&doc(990))).collect();
        for b in &small {
            assert_eq!(&b[..], text(990).as_bytes());
        }
        let adjacent = |a: &Bytes, b: &Bytes| a.as_ptr().wrapping_add(a.len()) == b.as_ptr();
        let breaks: Vec<usize> = (1..small.len())
            .filter(|&i| !adjacent(&small[i - 1], &small[i]))
            .collect();
        let per_slab = SLAB / 1000;
        assert_eq!(
            breaks,
            (1..70).filter(|i| i % per_slab == 0).collect::<Vec<_>>()
        );
        // A large output is its own buffer, and the slab carries on after it.
        let large = slab.serialize(&doc(OWN_BUFFER_FROM));
        assert_eq!(&large[..], text(OWN_BUFFER_FROM).as_bytes());
        let next = slab.serialize(&doc(990));
        assert!(adjacent(&small[69], &next));
        // Slices outlive the slab that made them.
        drop(slab);
        assert_eq!(&next[..], text(990).as_bytes());
    }
}
