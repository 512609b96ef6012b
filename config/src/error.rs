//! The errors of config loading.
//!
//! Each one names the file and says what to change: Jsonnet errors carry jrsonnet's trace
//! (`file:line:col: description` per frame), schema errors name the field.

use std::path::PathBuf;

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigLoadError {
    /// The config file does not exist.
    #[error("{}: no such file", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// The config file exists but could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file name does not say how to read the file.
    #[error(
        "{}: unsupported file type; a config is a .jsonnet, .libsonnet or .json file",
        path.display()
    )]
    UnsupportedExtension {
        /// The path as given.
        path: PathBuf,
    },
    /// An `--ext-str` used a name the library reserves.
    #[error(
        "--ext-str {name}: the name `{name}` is reserved for the sluice library (std.extVar('sub'))"
    )]
    ReservedExtVar {
        /// The reserved name.
        name: String,
    },
    /// Jsonnet evaluation failed: a syntax error, a static analysis error (an undefined
    /// local), a runtime error (`error '...'`, a missing field, a type error), a failed import.
    #[error("{}: {trace}", path.display())]
    Jsonnet {
        /// The config being evaluated.
        path: PathBuf,
        /// The message and jrsonnet's stack trace, each frame as `file:line:col: description`.
        trace: String,
    },
    /// A `.json` config is not valid JSON.
    #[error("{}:{line}:{column}: invalid JSON: {message}", path.display())]
    Json {
        /// The config file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser says.
        message: String,
    },
    /// The config's top level is not an object.
    #[error(
        "{}: the config is {found}, but it must be an object with a `transforms` array",
        path.display()
    )]
    NotAnObject {
        /// The config file.
        path: PathBuf,
        /// What the top level is ("an array", "a string", ...).
        found: &'static str,
    },
    /// The config has no `transforms`.
    #[error(
        "{}: `transforms` is missing; a config is {{\"transforms\": [...]}} (it may be empty)",
        path.display()
    )]
    MissingTransforms {
        /// The config file.
        path: PathBuf,
    },
    /// A field of the config has the wrong shape.
    #[error("{}: `{field}`: {message}", path.display())]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// Where, e.g. `transforms`, `concurrency`, `tests[1].condition`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl ConfigLoadError {
    /// The config file the error is about, when there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            ConfigLoadError::ReservedExtVar { .. } => None,
            ConfigLoadError::NotFound { path }
            | ConfigLoadError::Io { path, .. }
            | ConfigLoadError::UnsupportedExtension { path }
            | ConfigLoadError::Jsonnet { path, .. }
            | ConfigLoadError::Json { path, .. }
            | ConfigLoadError::NotAnObject { path, .. }
            | ConfigLoadError::MissingTransforms { path }
            | ConfigLoadError::Invalid { path, .. } => Some(path),
        }
    }
}

/// "an object", "an array", ... for messages.
pub(crate) fn describe(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
