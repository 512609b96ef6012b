//! The Jsonnet library and the transform registry agree.
//!
//! Every `type` the embedded library (`sluice.libsonnet`) can emit must either be registered
//! in `sluice_transforms::registry()` or be on the explicit "pending" lists below (types that
//! later issues will add); and every registered type must be one the library can emit, or a
//! documented alias. When a pending type gets implemented, the `pending_lists_are_current`
//! test fails until it is taken off the list, so the lists never go stale.

use std::collections::BTreeSet;

use sluice_config::{LIBRARY_CONDITION_TYPES, LIBRARY_TRANSFORM_TYPES};

/// Transform types the library can emit that are not implemented yet. Each group is the
/// subject of a later issue; remove a type here when it is registered.
const PENDING_TRANSFORMS: &[&str] = &[];

/// Condition types the library can emit that are not implemented yet (none today).
const PENDING_CONDITIONS: &[&str] = &[];

/// Registered transform types the library does not emit, each a documented alias: the
/// names Substation's engine uses for what Substation's library (and so sluice's) emits as
/// `enrich_kv_store_get`/`_set` and `enrich_dns_txt_lookup`.
const TRANSFORM_ALIASES: &[&str] = &[
    "enrich_dns_text_lookup",
    "enrich_kv_store_item_get",
    "enrich_kv_store_item_set",
];

/// Registered condition types the library does not emit: Substation's short names for the
/// meta conditions (`all` = `meta_all`, `any` = `meta_any`, `none` = `meta_none`), which
/// older Substation configs use.
const CONDITION_ALIASES: &[&str] = &["all", "any", "none"];

fn set<'a>(items: impl IntoIterator<Item = &'a str>) -> BTreeSet<&'a str> {
    items.into_iter().collect()
}

/// `library - registered - pending`, printed so the lists are easy to keep current.
fn unaccounted<'a>(
    what: &str,
    library: &'a [&'a str],
    registered: &BTreeSet<&str>,
    pending: &[&str],
) -> Vec<&'a str> {
    let missing: Vec<&str> = library
        .iter()
        .copied()
        .filter(|t| !registered.contains(t))
        .collect();
    println!(
        "{what}: {} of {} library types are not registered yet: {missing:?}",
        missing.len(),
        library.len()
    );
    missing
        .into_iter()
        .filter(|t| !pending.contains(t))
        .collect()
}

#[test]
fn every_library_transform_is_registered_or_pending() {
    let registry = sluice_transforms::registry();
    let registered = set(registry.transform_types());
    let bad = unaccounted(
        "transforms",
        LIBRARY_TRANSFORM_TYPES,
        &registered,
        PENDING_TRANSFORMS,
    );
    assert!(
        bad.is_empty(),
        "library transform types neither registered nor on PENDING_TRANSFORMS: {bad:?}"
    );
}

#[test]
fn every_library_condition_is_registered_or_pending() {
    let registry = sluice_transforms::registry();
    let registered = set(registry.condition_types());
    let bad = unaccounted(
        "conditions",
        LIBRARY_CONDITION_TYPES,
        &registered,
        PENDING_CONDITIONS,
    );
    assert!(
        bad.is_empty(),
        "library condition types neither registered nor on PENDING_CONDITIONS: {bad:?}"
    );
}

#[test]
fn every_registered_type_is_one_the_library_emits_or_an_alias() {
    let registry = sluice_transforms::registry();
    let library = set(LIBRARY_TRANSFORM_TYPES.iter().copied());
    let extra: Vec<&str> = registry
        .transform_types()
        .filter(|t| !library.contains(t) && !TRANSFORM_ALIASES.contains(t))
        .collect();
    assert!(
        extra.is_empty(),
        "registered transform types the library cannot emit (add them to the library or to \
         TRANSFORM_ALIASES with a comment): {extra:?}"
    );

    let library = set(LIBRARY_CONDITION_TYPES.iter().copied());
    let extra: Vec<&str> = registry
        .condition_types()
        .filter(|t| !library.contains(t) && !CONDITION_ALIASES.contains(t))
        .collect();
    assert!(
        extra.is_empty(),
        "registered condition types the library cannot emit (add them to the library or to \
         CONDITION_ALIASES with a comment): {extra:?}"
    );
}

#[test]
fn pending_lists_are_current() {
    let registry = sluice_transforms::registry();
    for (what, pending, library, registered) in [
        (
            "PENDING_TRANSFORMS",
            PENDING_TRANSFORMS,
            LIBRARY_TRANSFORM_TYPES,
            set(registry.transform_types()),
        ),
        (
            "PENDING_CONDITIONS",
            PENDING_CONDITIONS,
            LIBRARY_CONDITION_TYPES,
            set(registry.condition_types()),
        ),
    ] {
        let done: Vec<&str> = pending
            .iter()
            .copied()
            .filter(|t| registered.contains(t))
            .collect();
        assert!(
            done.is_empty(),
            "{what}: these are registered now; take them off the list: {done:?}"
        );
        let unknown: Vec<&str> = pending
            .iter()
            .copied()
            .filter(|t| !library.contains(t))
            .collect();
        assert!(
            unknown.is_empty(),
            "{what}: these are not types the library emits: {unknown:?}"
        );
        assert_eq!(
            pending.len(),
            set(pending.iter().copied()).len(),
            "{what} has duplicates"
        );
    }
}

#[test]
fn condition_aliases_are_short_names_of_library_conditions() {
    // Each alias is `meta_<alias>` without the prefix, and both build from the same settings.
    let registry = sluice_transforms::registry();
    for alias in CONDITION_ALIASES {
        let full = format!("meta_{alias}");
        assert!(
            LIBRARY_CONDITION_TYPES.contains(&full.as_str()),
            "{alias} is documented as an alias of {full}, which the library does not emit"
        );
        for name in [alias.to_string(), full] {
            let cfg = serde_json::json!({
                "type": name,
                "settings": {"conditions": [
                    {"type": "format_json", "settings": {}}
                ]}
            });
            if let Err(e) = registry.build_condition(&cfg, "probe") {
                panic!("{name} does not build: {e}");
            }
        }
    }
}
