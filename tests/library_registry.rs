//! The Jsonnet library and the transform registry agree, from the types' descriptors.
//!
//! Each registered type's descriptor (a transform's, a condition's, a kv store's) names the
//! library function that emits it (`sub.tf.str.append`, `sub.kv_store.text_file`); this
//! calls every one and checks that it emits the type (or one of its aliases), and walks the
//! whole library to check that it emits no type that no descriptor accounts for. Here,
//! because both sides are visible: `sluice-config` (the library) and `sluice-transforms`
//! (the registry) do not depend on each other.

use std::collections::BTreeSet;

use serde_json::Value;
use sluice_engine::TypeInfo;

/// Every `type` the library's transform, condition and kv store trees emit: each function
/// called with `{}` (the `all`/`any`/`none` shorthands with a condition).
const WALK: &str = r#"
local sub = std.extVar('sub');
local combinators = ['all', 'any', 'none'];
local call(path, f) =
  local name = path[std.length(path) - 1];
  if std.member(combinators, name) && std.length(path) == 1
  then f({ type: 'format_json', settings: {} })
  else f({});
local walk(x, path) =
  if std.isFunction(x) then [call(path, x).type]
  else if std.isObject(x) then std.flattenArrays([walk(x[k], path + [k]) for k in std.objectFields(x)])
  else [];
{ transforms: walk(sub.tf, []), conditions: walk(sub.cnd, []), kv_stores: walk(sub.kv_store, []) }
"#;

fn compile(code: &str) -> Value {
    sluice_config::compile_text("library_registry.jsonnet", code, &[], None)
        .unwrap_or_else(|e| panic!("{e}\n{code}"))
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|t| t.as_str().unwrap_or_else(|| panic!("{t}")).to_string())
        .collect()
}

/// Checks `infos` (transforms' or conditions') against the types the library emits, and
/// returns those types.
fn check(what: &str, infos: &[&'static TypeInfo], library: &BTreeSet<String>) {
    let missing: Vec<&str> = infos
        .iter()
        .filter(|i| i.library.is_empty())
        .map(|i| i.name)
        .collect();
    assert!(
        missing.is_empty(),
        "{what} whose descriptor names no library function: {missing:?}"
    );
    let code = format!(
        "local sub = std.extVar('sub');\n[\n{}\n]",
        infos
            .iter()
            .map(|i| format!("  {}({{}}).type,", i.library))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let emitted = compile(&code);
    let emitted = emitted.as_array().expect("an array");
    let mut accounted = BTreeSet::new();
    for (info, got) in infos.iter().zip(emitted) {
        let got = got.as_str().unwrap_or_default();
        assert!(
            info.names().any(|n| n == got),
            "{}: its descriptor's library function {} emits {got:?}, not the type or an alias",
            info.name,
            info.library
        );
        accounted.insert(got.to_string());
    }
    let unaccounted: Vec<&String> = library.difference(&accounted).collect();
    assert!(
        unaccounted.is_empty(),
        "{what} the library emits that no descriptor's library function does: {unaccounted:?}"
    );
}

#[test]
fn each_descriptor_s_library_function_emits_its_type_and_nothing_else_is_emitted() {
    let registry = sluice_transforms::registry();
    let walked = compile(WALK);
    let transforms = strings(&walked["transforms"]);
    let conditions = strings(&walked["conditions"]);
    // Substation's 85 transform types and 32 condition types.
    assert_eq!(transforms.len(), 85, "{transforms:?}");
    assert_eq!(conditions.len(), 32, "{conditions:?}");
    let infos: Vec<&TypeInfo> = registry.transform_infos().collect();
    check("transform types", &infos, &transforms);
    let infos: Vec<&TypeInfo> = registry.condition_infos().collect();
    check("condition types", &infos, &conditions);
}

#[test]
fn each_kv_store_s_library_function_emits_its_type_and_nothing_else_is_emitted() {
    let walked = compile(WALK);
    let stores = strings(&walked["kv_stores"]);
    let infos: Vec<&TypeInfo> = sluice_transforms::kv_store::stores::infos()
        .map(|s| &s.info)
        .collect();
    assert!(infos.len() >= 7, "{} kv store types", infos.len());
    check("kv store types", &infos, &stores);
}

/// A config read from a URL may only point the settings that name files under its own
/// directory: `sluice_config` lists those settings (it cannot see the descriptors), and
/// here the list is the one the kv stores' descriptors give.
#[test]
fn the_file_settings_a_remote_config_checks_are_the_kv_stores_files() {
    let mut from_descriptors: Vec<(&str, &str)> = sluice_transforms::kv_store::stores::infos()
        .filter_map(|s| Some((s.info.name, s.file?)))
        .collect();
    from_descriptors.sort();
    let mut listed = sluice_config::remote::FILE_SETTINGS.to_vec();
    listed.sort();
    assert_eq!(listed, from_descriptors);
}

#[test]
fn every_registered_name_is_one_the_library_emits_or_an_alias_of_one() {
    let registry = sluice_transforms::registry();
    let walked = compile(WALK);
    let transforms = strings(&walked["transforms"]);
    for name in registry.transform_types() {
        let info = registry.transform_info(name).expect("a descriptor");
        assert!(
            info.names().any(|n| transforms.contains(n)),
            "registered transform type {name}: the library emits neither it nor an alias of it"
        );
    }
    let conditions = strings(&walked["conditions"]);
    for name in registry.condition_types() {
        let info = registry.condition_info(name).expect("a descriptor");
        assert!(
            info.names().any(|n| conditions.contains(n)),
            "registered condition type {name}: the library emits neither it nor an alias of it"
        );
    }
}
