//! Config loading for sluice.
//!
//! A config is a Jsonnet (`.jsonnet`, `.libsonnet`) or JSON (`.json`) file that compiles to
//! Substation's schema: `{"transforms": [{"type": ..., "settings": {...}}, ...]}` with
//! optional `tests` and `concurrency`. Jsonnet configs get the embedded library
//! ([`library`]) as `std.extVar('sub')` and as `import 'sluice.libsonnet'` /
//! `import 'substation.libsonnet'`, so Substation users' configs compile unchanged; other
//! imports are resolved relative to the importing file.
//!
//! jrsonnet's evaluator is `!Send`: evaluation runs on the calling thread and only
//! `serde_json` values come out.
//!
//! ```no_run
//! let cfg = sluice_config::load(std::path::Path::new("config.jsonnet"), &[])?;
//! let transforms = cfg.transforms(); // for Registry::build_pipeline(transforms, "transforms")
//! # Ok::<(), sluice_config::ConfigLoadError>(())
//! ```

mod error;
mod jsonnet;
mod loaded;
mod types;

use std::path::Path;

use serde_json::Value;

pub use error::ConfigLoadError;
pub use jsonnet::{LIBRARY_EXT_VAR, LIBRARY_IMPORT_NAMES};
pub use loaded::{LoadedConfig, TestCase};
pub use types::{
    LIBRARY_CONDITION_TYPES, LIBRARY_KV_STORE_TYPES, LIBRARY_SECRET_TYPES, LIBRARY_TRANSFORM_TYPES,
};

static LIBRARY: &str = include_str!("sluice.libsonnet");

/// The source of the embedded Jsonnet library, `sluice.libsonnet`.
pub fn library() -> &'static str {
    LIBRARY
}

/// How a file is read, by its extension.
enum Kind {
    Jsonnet,
    Json,
}

fn kind(path: &Path) -> Result<Kind, ConfigLoadError> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("jsonnet" | "libsonnet") => Ok(Kind::Jsonnet),
        Some("json") => Ok(Kind::Json),
        _ => Err(ConfigLoadError::UnsupportedExtension {
            path: path.to_path_buf(),
        }),
    }
}

fn check_file(path: &Path) -> Result<(), ConfigLoadError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(ConfigLoadError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other("is a directory, not a config file"),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ConfigLoadError::NotFound {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(ConfigLoadError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn parse_json(path: &Path, text: &str) -> Result<Value, ConfigLoadError> {
    serde_json::from_str(text).map_err(|e| ConfigLoadError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Compiles a config file to JSON without checking its schema: Jsonnet is evaluated (with
/// `ext_strs` as `std.extVar` strings), JSON is parsed.
pub fn compile(path: &Path, ext_strs: &[(String, String)]) -> Result<Value, ConfigLoadError> {
    let kind = kind(path)?;
    check_file(path)?;
    match kind {
        Kind::Jsonnet => {
            let text = jsonnet::evaluate_to_json_text(path, ext_strs)?;
            parse_json(path, &text)
        }
        Kind::Json => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigLoadError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            parse_json(path, &text)
        }
    }
}

/// Compiles a config file to JSON text, for `sluice build`. `pretty` indents by two
/// spaces; otherwise the output is one line. Keys come out sorted, as Jsonnet manifests
/// them. The schema is not checked (use [`load`] for that).
pub fn compile_to_string(
    path: &Path,
    ext_strs: &[(String, String)],
    pretty: bool,
) -> Result<String, ConfigLoadError> {
    let value = compile(path, ext_strs)?;
    let text = if pretty {
        serde_json::to_string_pretty(&value)
    } else {
        serde_json::to_string(&value)
    };
    // Serialising a `serde_json::Value` to a string cannot fail.
    Ok(text.unwrap_or_default())
}

/// Loads a config: compiles it ([`compile`]) and checks that its top level is an object
/// with a `transforms` array.
pub fn load(path: &Path, ext_strs: &[(String, String)]) -> Result<LoadedConfig, ConfigLoadError> {
    let json = compile(path, ext_strs)?;
    LoadedConfig::new(json, path)
}
