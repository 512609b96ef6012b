//! Helpers shared by the integration tests: configs written to a temporary directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_config::ConfigLoadError;

/// A temporary directory holding config files.
pub struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    pub fn new() -> Self {
        Dir {
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    /// Writes `text` at `name` (directories created) and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create directories");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Compiles a Jsonnet snippet written to a fresh `test.jsonnet`.
pub fn eval(code: &str) -> Result<Value, ConfigLoadError> {
    let dir = Dir::new();
    let path = dir.write("test.jsonnet", code);
    sluice_config::compile(&path, &[])
}

/// Compiles a Jsonnet snippet that must succeed.
pub fn eval_ok(code: &str) -> Value {
    match eval(code) {
        Ok(v) => v,
        Err(e) => panic!("evaluation failed: {e}\n--- code ---\n{code}"),
    }
}

/// Compiles a Jsonnet snippet that must fail, and returns the error text.
pub fn eval_err(code: &str) -> String {
    match eval(code) {
        Ok(v) => {
            panic!("evaluation succeeded with {v} but should have failed\n--- code ---\n{code}")
        }
        Err(e) => e.to_string(),
    }
}

/// Hex MD5 of a string.
pub fn md5_hex(s: &str) -> String {
    use md5::Digest;
    let digest = md5::Md5::digest(s.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The automatic id of a transform: md5(type)[0:8] + '-' + md5(settings as std.toString)[0:8].
pub fn auto_id(type_name: &str, settings_to_string: &str) -> String {
    format!(
        "{}-{}",
        &md5_hex(type_name)[..8],
        &md5_hex(settings_to_string)[..8]
    )
}
