//! The kv store types, each declared once: a store's file holds its descriptor
//! ([`KvStoreInfo`]: its [`TypeInfo`], how to build it for items and for locks, what it
//! reads), each family lists its stores' descriptors beside its modules ([`super::STORES`],
//! [`super::item::STORES`], [`super::lock::STORES`]), and everything else is derived from
//! them: building the store a transform names ([`item_store`], [`lock_store`]) and the
//! errors for one that cannot serve (an unknown type names the stores that can), what
//! [`crate::calls_aws`] and `sluice play` say of a store (its `reach`), the library check
//! (`tests/library_registry.rs`: each `sub.kv_store.*` function emits its store's type,
//! and no other type), the table of kv stores in `docs/reference/README.md`
//! ([`crate::reference_index`]), and the check of `sluice_config`'s list of settings that
//! name files. The stores and the interfaces they implement do not know each other: only
//! this module knows every store.

use std::sync::Arc;

use sluice_engine::{Build, ConfigError, TypeInfo, Value};

use super::item::ItemStore;
use super::lock::LockStore;
use super::{KvPlace, kv_config, unknown_type};

/// Builds a store for the `enrich_kv_store_*` transforms from its settings.
pub type ItemCtor = fn(&KvPlace<'_, '_>, &Value) -> Result<Arc<dyn ItemStore>, ConfigError>;
/// Builds a store for `meta_kv_store_lock` from its settings.
pub type LockCtor = fn(&KvPlace<'_, '_>, &Value) -> Result<Arc<dyn LockStore>, ConfigError>;

/// A kv store type's descriptor, written once beside its code (`pub(crate) const INFO`).
#[derive(Debug, Clone, Copy)]
pub struct KvStoreInfo {
    /// Its name (Substation's), its library function (`sub.kv_store.text_file`), a
    /// one-line summary for the reference's table, what it reaches (`sluice play`'s flag;
    /// `Aws`: a build without the `aws` feature lacks it) and settings (JSON) that build it
    /// without reading or calling anything (the tests build every store from them).
    pub info: TypeInfo,
    /// How it is built to hold items; `None`: it holds locks only.
    pub items: Option<ItemCtor>,
    /// Whether its items are only read (the file stores): `item_set` and `set_add` are
    /// refused.
    pub read_only: bool,
    /// How it is built to hold locks; `None`: it cannot.
    pub locks: Option<LockCtor>,
    /// The setting that names a file it reads (a path or a URL), which a config read from
    /// a URL may only point under its own directory (`sluice_config::remote`).
    pub file: Option<&'static str>,
}

/// Every kv store type's descriptor, in the order their families list them.
pub fn infos() -> impl Iterator<Item = &'static KvStoreInfo> {
    super::STORES
        .iter()
        .chain(super::item::STORES)
        .chain(super::lock::STORES)
        .copied()
}

/// The descriptor of the kv store type `name`.
pub fn info(name: &str) -> Option<&'static KvStoreInfo> {
    infos().find(|s| s.info.name == name)
}

/// The names of the stores `can` says can serve, as an error lists them.
fn names(can: impl Fn(&KvStoreInfo) -> bool) -> Vec<&'static str> {
    infos().filter(|s| can(s)).map(|s| s.info.name).collect()
}

/// Builds the item store configured in `field` (a `{type, settings}` object).
pub fn item_store(
    b: &Build<'_>,
    field: &str,
    cfg: &Value,
) -> Result<Arc<dyn ItemStore>, ConfigError> {
    let (type_name, settings, place) = kv_config(b, field, cfg)?;
    let item_stores = || names(|s| s.items.is_some());
    match info(type_name) {
        Some(KvStoreInfo {
            items: Some(build), ..
        }) => build(&place, &settings),
        Some(_) => Err(b.field_error(
            &format!("{field}.type"),
            format!(
                "the {type_name} kv store holds locks only; the stores that hold items: {}",
                item_stores().join(", ")
            ),
        )),
        None => Err(unknown_type(
            b,
            field,
            "kv store",
            type_name,
            &item_stores(),
        )),
    }
}

/// Builds the lock store configured in `field` (a `{type, settings}` object).
pub fn lock_store(
    b: &Build<'_>,
    field: &str,
    cfg: &Value,
) -> Result<Arc<dyn LockStore>, ConfigError> {
    let (type_name, settings, place) = kv_config(b, field, cfg)?;
    #[cfg(test)]
    if type_name == "test_faulty_sqlite" {
        return super::lock::test_faulty::FaultySqliteStore::build(&place, &settings)
            .map(|s| Arc::new(s) as Arc<dyn LockStore>);
    }
    let lock_stores = || names(|s| s.locks.is_some());
    match info(type_name) {
        Some(KvStoreInfo {
            locks: Some(build), ..
        }) => build(&place, &settings),
        Some(store) => Err(b.field_error(
            &format!("{field}.type"),
            format!(
                "the {type_name} kv store {}cannot hold locks; use {}",
                if store.read_only {
                    "is read-only and "
                } else {
                    ""
                },
                lock_stores().join(", ")
            ),
        )),
        None => Err(unknown_type(
            b,
            field,
            "lock kv store",
            type_name,
            &lock_stores(),
        )),
    }
}

/// The constructor of a store that calls AWS in a build without the `aws` feature: the
/// error saying so, at the store's `type`.
#[cfg(not(feature = "aws"))]
pub(crate) fn lacking_aws<T: ?Sized>(
    place: &KvPlace<'_, '_>,
    _: &Value,
) -> Result<Arc<T>, ConfigError> {
    Err(
        place.type_error(sluice_platform::built_without_aws(&format!(
            "the {} kv store",
            place.type_name()
        ))),
    )
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde::Deserialize;
    use sluice_engine::{Context, Reach, Registry, Transform, json, testing};

    use super::*;

    #[derive(Deserialize)]
    struct Probe {
        kv_store: Value,
        locks: bool,
    }

    thread_local! {
        static ITEMS: RefCell<Option<Arc<dyn ItemStore>>> = const { RefCell::new(None) };
    }

    /// Builds `cfg` as an item store (or, with `locks`, as a lock store) in `ctx`, through
    /// a transform's settings as `enrich_kv_store_*` and `meta_kv_store_lock` do.
    fn build(ctx: &Arc<Context>, cfg: Value, locks: bool) -> Result<(), String> {
        let mut r = Registry::new();
        r.transform(&const { TypeInfo::named("probe") }, |b: &Build<'_>| {
            let p: Probe = b.settings()?;
            if p.locks {
                lock_store(b, "kv_store", &p.kv_store)?;
            } else {
                let st = item_store(b, "kv_store", &p.kv_store)?;
                ITEMS.with(|c| *c.borrow_mut() = Some(st));
            }
            Ok(Transform::stateless(crate::utility::drop::UtilityDrop))
        });
        let cfg = json!({"type": "probe", "settings": {"kv_store": cfg, "locks": locks}});
        testing::build_in(&r, ctx, cfg)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Each descriptor is whole (a unique name, its library function under
    /// `sub.kv_store`, a summary, something it holds), and its example builds the store
    /// for what it holds, without reading or calling anything; what it cannot hold is
    /// refused naming the stores that can.
    #[test]
    fn every_kv_store_builds_from_its_example_for_what_it_holds() {
        let state = tempfile::tempdir().unwrap();
        let ctx = Context::in_dir(state.path());
        let mut names: Vec<&str> = infos().map(|s| s.info.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), infos().count(), "a name twice: {names:?}");
        for store in infos() {
            let name = store.info.name;
            assert!(store.info.library.starts_with("sub.kv_store."), "{name}");
            assert!(!store.info.summary.is_empty(), "{name}");
            assert!(store.items.is_some() || store.locks.is_some(), "{name}");
            assert!(store.items.is_some() || !store.read_only, "{name}");
            let example: Value = serde_json::from_str::<serde_json::Value>(store.info.example)
                .unwrap_or_else(|e| panic!("{name}'s example: {e}"))
                .into();
            let cfg = json!({"type": name, "settings": example});
            for (locks, holds) in [
                (false, store.items.is_some()),
                (true, store.locks.is_some()),
            ] {
                let built = build(&ctx, cfg.clone(), locks);
                if cfg!(not(feature = "aws")) && store.info.reach == Reach::Aws {
                    let e = built.unwrap_err();
                    assert!(
                        e.contains("kv_store.type: the") && e.contains("calls AWS"),
                        "{e}"
                    );
                } else if holds {
                    built.unwrap_or_else(|e| panic!("{name} (locks: {locks}): {e}"));
                } else {
                    let e = built.unwrap_err();
                    assert!(
                        e.contains(&format!("settings.kv_store.type: the {name} kv store")),
                        "{e}"
                    );
                }
            }
        }
        assert!(
            std::fs::read_dir(state.path()).unwrap().next().is_none(),
            "building wrote a file"
        );
    }

    /// A read-only store refuses `set` (the `ItemStore` default), and the others take it;
    /// the stores that call a service are left to their own tests.
    #[test]
    fn read_only_says_what_the_store_does() {
        let state = tempfile::tempdir().unwrap();
        let ctx = Context::in_dir(state.path());
        for store in infos().filter(|s| s.items.is_some() && s.info.reach != Reach::Aws) {
            let name = store.info.name;
            let example: Value = serde_json::from_str::<serde_json::Value>(store.info.example)
                .unwrap()
                .into();
            build(&ctx, json!({"type": name, "settings": example}), false).unwrap();
            let st = ITEMS.with(|c| c.borrow_mut().take()).unwrap();
            let set = testing::block_on(st.set("k", json!("v"), None));
            match set {
                Err(crate::kv_store::item::ItemError::ReadOnly { .. }) => {
                    assert!(store.read_only, "{name} refused set")
                }
                other => assert!(!store.read_only, "{name}: {:?}", other.err()),
            }
        }
    }

    #[test]
    fn a_store_that_cannot_serve_names_those_that_can() {
        let ctx = Context::new();
        let e = build(&ctx, json!({"type": "sqlite"}), false).unwrap_err();
        assert!(
            e.contains("the sqlite kv store holds locks only; the stores that hold items: aws_dynamodb, memory, csv_file"),
            "{e}"
        );
        let e = build(
            &ctx,
            json!({"type": "text_file", "settings": {"file": "x"}}),
            true,
        )
        .unwrap_err();
        assert!(
            e.contains("the text_file kv store is read-only and cannot hold locks; use aws_dynamodb, memory, sqlite"),
            "{e}"
        );
        let e = build(&ctx, json!({"type": "sqlit"}), true).unwrap_err();
        assert!(
            e.contains("unknown lock kv store type \"sqlit\" (did you mean \"sqlite\"?); lock kv stores: aws_dynamodb, memory, sqlite"),
            "{e}"
        );
    }
}
