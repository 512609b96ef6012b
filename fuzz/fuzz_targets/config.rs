//! Config loading: text that is JSON (and so Jsonnet) goes through the Jsonnet evaluator with
//! the library, the schema check, and the build of every transform and test condition.
//! Never a panic; errors are values. (Arbitrary Jsonnet programs are not fed: a two-line
//! program can loop for hours, which says nothing about sluice.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if serde_json::from_str::<serde_json::Value>(text).is_err() {
        return;
    }
    let Ok(cfg) = sluice_config::load_text("fuzz.jsonnet", text, &[], None) else {
        return;
    };
    let registry = sluice_transforms::registry();
    let _ = registry.build_pipeline(cfg.transforms(), "transforms");
    if let Ok(tests) = cfg.tests() {
        for t in tests {
            let _ = registry.build_pipeline(&t.transforms, "tests[].transforms");
            let _ = registry.build_condition(&t.condition, "tests[].condition");
        }
    }
});
