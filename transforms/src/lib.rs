//! # sluice-transforms
//!
//! Every transform and condition type sluice knows, one file per type, grouped by family
//! (`object/copy.rs` is `object_copy`), so the file tree is the catalogue. [`registry`]
//! returns a [`Registry`] with all of them registered under Substation's type names; each
//! family's `mod.rs` has the one line per type that registers it, with the type's
//! descriptor ([`TypeInfo`]: name, library function, summary, reach, example), which its
//! file declares beside its code. The compliance tests, the names a build without AWS
//! knows, the library check and the reference index are derived from those descriptors.

// The public API: the registry, and what the CLI, the Lambda function and the integration
// tests use beside it (the kv stores). Everything else is this crate's own; what the
// transforms call out through (AWS, Cloud Storage, HTTP, URLs, secrets, EMF, KPL) is
// `sluice-platform`'s.
pub mod compression;
#[doc(hidden)]
pub mod fuzzing;
pub mod kv_store;

mod aggregate;
mod array;
mod common;
#[cfg(test)]
mod compliance;
#[cfg(test)]
mod computing;
mod condition;
mod enrich;
mod format;
mod hash;
mod meta;
mod metrics;
mod network;
mod number;
mod object;
#[cfg(test)]
mod reference_index;
mod send;
mod string;
mod test;
mod time;
mod utility;
#[cfg(any(test, not(feature = "aws")))]
mod without_aws;

use std::sync::LazyLock;

use sluice_engine::{Registry, TypeInfo};

/// Registers AWS-backed types, one `kind(&INFO, build);` line each (`kind` a [`Registry`]
/// method: `stateful`, `stateless`, `map`): with the `aws` feature, built by `build`;
/// without it, under the same descriptor as a type that says this build lacks it, so that
/// the lists derived from the descriptors are the same in both builds.
macro_rules! register_aws {
    ($r:ident; $($kind:ident($info:expr, $build:path);)*) => {
        $(
            #[cfg(feature = "aws")]
            $r.$kind($info, $build);
            #[cfg(not(feature = "aws"))]
            $crate::without_aws::register($r, $info);
        )*
    };
}
pub(crate) use register_aws;

/// The descriptor of the transform type `name` (a name or an alias), from a registry built
/// once.
pub fn transform_info(name: &str) -> Option<&'static TypeInfo> {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(registry);
    REGISTRY.transform_info(name)
}

/// Whether a transform, kv store or secret provider `type` calls AWS: a transform or a kv
/// store whose descriptor says so, or the `aws_secrets_manager` provider.
pub fn calls_aws(type_name: &str) -> bool {
    transform_info(type_name).is_some_and(TypeInfo::calls_aws)
        || kv_store::stores::info(type_name).is_some_and(|s| s.info.calls_aws())
        || type_name == "aws_secrets_manager"
}

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
