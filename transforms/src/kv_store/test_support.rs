//! Building item stores from `{type, settings}` in unit tests, through the same
//! [`super::stores::item_store`] a transform's constructor calls.

use std::cell::RefCell;
use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::{Build, Registry, Transform, Value, json, testing};

use super::item::{ItemStore, item_store as build_store};

#[derive(Deserialize)]
struct Probe {
    kv_store: Value,
}

thread_local! {
    static BUILT: RefCell<Option<Arc<dyn ItemStore>>> = const { RefCell::new(None) };
}

fn build(cfg: Value) -> Result<Arc<dyn ItemStore>, String> {
    let mut r = Registry::new();
    r.transform(
        &const { sluice_engine::TypeInfo::named("probe") },
        |b: &Build<'_>| {
            let p: Probe = b.settings()?;
            let st = build_store(b, "kv_store", &p.kv_store)?;
            BUILT.with(|c| *c.borrow_mut() = Some(st));
            Ok(Transform::stateless(crate::utility::drop::UtilityDrop))
        },
    );
    testing::build(&r, json!({"type": "probe", "settings": {"kv_store": cfg}}))
        .map_err(|e| e.to_string())?;
    Ok(BUILT.with(|c| c.borrow_mut().take()).expect("built"))
}

/// The store `cfg` configures; panics on a configuration error.
pub(crate) fn item_store(cfg: Value) -> Arc<dyn ItemStore> {
    build(cfg).unwrap_or_else(|e| panic!("{e}"))
}

/// The configuration error building `cfg` gives.
pub(crate) fn config_error(cfg: Value) -> String {
    match build(cfg) {
        Ok(_) => panic!("the configuration was accepted"),
        Err(e) => e,
    }
}
