//! # sluice-transforms
//!
//! Every transform and condition type sluice knows, one file per type, grouped by family
//! (`object/copy.rs` is `object_copy`), so the file tree is the catalogue. [`registry`]
//! returns a [`Registry`] with all of them registered under Substation's type names; each
//! family's `mod.rs` has the one line per type that registers it.

pub mod common;
pub mod object;

use sluice_engine::Registry;

/// A registry with every transform and condition.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    object::register(&mut r);
    r
}
