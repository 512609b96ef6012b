//! # sluice-transforms
//!
//! Every transform and condition type sluice knows, one file per type, grouped by family
//! (`object/copy.rs` is `object_copy`), so the file tree is the catalogue. [`registry`]
//! returns a [`Registry`] with all of them registered under Substation's type names; each
//! family's `mod.rs` has the one line per type that registers it.

pub mod aggregate;
pub mod array;
pub mod aws;
pub mod common;
#[cfg(test)]
mod compliance;
pub mod condition;
pub mod enrich;
pub mod fetch;
pub mod format;
pub mod hash;
pub mod http;
pub mod kv_store;
pub mod meta;
pub mod metrics;
pub mod network;
pub mod number;
pub mod object;
pub mod secrets;
pub mod send;
pub mod string;
pub mod test;
pub mod time;
pub mod utility;

use sluice_engine::Registry;

/// A registry with every transform and condition.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    aggregate::register(&mut r);
    array::register(&mut r);
    condition::register(&mut r);
    enrich::register(&mut r);
    format::register(&mut r);
    hash::register(&mut r);
    meta::register(&mut r);
    network::register(&mut r);
    number::register(&mut r);
    object::register(&mut r);
    send::register(&mut r);
    string::register(&mut r);
    test::register(&mut r);
    time::register(&mut r);
    utility::register(&mut r);
    r
}
