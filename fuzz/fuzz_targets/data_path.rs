//! Paths built from message data: a root (the first line, as a config sets
//! `file_path.prefix`) and a name from data (the rest, as a batch key). Never a panic; a
//! path that is accepted lies under the root: it is the root, a `/`, and components of which
//! none is empty, `.` or `..`, with no backslash or control character, so no reading of it
//! (lexical, or a filesystem's without links) leaves the root.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (root, name) = text.split_once('\n').unwrap_or(("out", text));
    let Some(path) = sluice_transforms::fuzzing::data_path(root, name) else {
        return;
    };
    let trimmed = root.trim_end_matches('/');
    let rest = if root.is_empty() {
        path.as_str()
    } else {
        path.strip_prefix(trimmed)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or_else(|| panic!("{path:?} is not under {root:?}"))
    };
    assert!(!rest.is_empty(), "{path:?} names the root itself");
    for component in rest.split('/') {
        assert!(
            !matches!(component, "" | "." | ".."),
            "{path:?}: component {component:?}"
        );
        assert!(
            !component.contains('\\') && !component.chars().any(char::is_control),
            "{path:?}: component {component:?}"
        );
    }
});
