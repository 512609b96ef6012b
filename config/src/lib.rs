//! Config loading for sluice.
//!
//! A config is a Jsonnet (`.jsonnet`, `.libsonnet`) or JSON (`.json`) file that compiles to
//! Substation's schema: `{"transforms": [{"type": ..., "settings": {...}}, ...]}` with
//! optional `tests` and `concurrency`. Jsonnet configs get the embedded library
//! ([`library`]) as `std.extVar('sub')` and as `import 'sluice.libsonnet'` /
//! `import 'substation.libsonnet'`, so Substation users' configs compile unchanged; other
//! imports are resolved relative to the importing file.
//!
//! A config that is not a local file is compiled from its text with [`compile_text`] /
//! [`load_text`], under a name (its URL) that error positions show and that its relative
//! imports are resolved against; the caller's [`Fetch`] reads them. [`remote`] is that caller
//! for `s3://`, `gs://` and `https://` configs (through `sluice_platform::fetch`), for the
//! CLI and the Lambda bootstrap alike, and [`lock_lint`] the warnings both give about where a
//! config's locks stand.
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
mod go_numbers;
mod jsonnet;
mod loaded;
pub mod lock_lint;
pub mod nesting;
pub mod remote;
mod types;

use std::path::Path;

use serde_json::Value;

pub use error::ConfigLoadError;
pub use jsonnet::{
    DEFAULT_EVAL_LIMIT, Fetch, LIBRARY_EXT_VAR, LIBRARY_IMPORT_NAMES, set_eval_limit,
};
pub use loaded::{LoadedConfig, TestCase};
pub use types::LIBRARY_SECRET_TYPES;

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
    Ok(to_text(&value, pretty))
}

/// Loads a config: compiles it ([`compile`]) and checks that its top level is an object
/// with a `transforms` array.
pub fn load(path: &Path, ext_strs: &[(String, String)]) -> Result<LoadedConfig, ConfigLoadError> {
    let json = compile(path, ext_strs)?;
    LoadedConfig::new(json, path)
}

/// How a config given as text is read, by its name's extension (a URL's query and fragment
/// aside): `.json` is parsed as JSON, anything else is evaluated as Jsonnet (which reads
/// JSON too, so a name without an extension works for both).
fn text_kind(name: &str) -> Kind {
    let path = name.split(['?', '#']).next().unwrap_or(name);
    match Path::new(path).extension().and_then(|e| e.to_str()) {
        Some("json") => Kind::Json,
        _ => Kind::Jsonnet,
    }
}

/// Compiles a config given as `text`, named `name` (typically the URL it was read from), to
/// JSON without checking its schema. Errors show `name` where a file's would show its path
/// (`s3://bucket/cfg.jsonnet:3:5: ...`). Jsonnet imports: the library always; other
/// imports are resolved against `name` as a URL (`lib.libsonnet` next to
/// `s3://bucket/dir/cfg.jsonnet` is `s3://bucket/dir/lib.libsonnet`) and read with `fetch`;
/// without `fetch` (or when `name` is not a URL) they are errors.
pub fn compile_text(
    name: &str,
    text: &str,
    ext_strs: &[(String, String)],
    fetch: Option<Fetch>,
) -> Result<Value, ConfigLoadError> {
    let path = Path::new(name);
    match text_kind(name) {
        Kind::Jsonnet => {
            let json = jsonnet::evaluate_text_to_json_text(name, text, ext_strs, fetch)?;
            parse_json(path, &json)
        }
        Kind::Json => parse_json(path, text),
    }
}

/// [`compile_text`] to JSON text, for `sluice build` (see [`compile_to_string`]).
pub fn compile_text_to_string(
    name: &str,
    text: &str,
    ext_strs: &[(String, String)],
    fetch: Option<Fetch>,
    pretty: bool,
) -> Result<String, ConfigLoadError> {
    let value = compile_text(name, text, ext_strs, fetch)?;
    Ok(to_text(&value, pretty))
}

/// Loads a config given as text: compiles it ([`compile_text`]) and checks that its top
/// level is an object with a `transforms` array. Its [`LoadedConfig::path`] is `name`.
pub fn load_text(
    name: &str,
    text: &str,
    ext_strs: &[(String, String)],
    fetch: Option<Fetch>,
) -> Result<LoadedConfig, ConfigLoadError> {
    let json = compile_text(name, text, ext_strs, fetch)?;
    LoadedConfig::new(json, Path::new(name))
}

fn to_text(value: &Value, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    // Serialising a `serde_json::Value` to a string cannot fail.
    text.unwrap_or_default()
}
