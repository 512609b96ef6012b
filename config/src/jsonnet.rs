//! Jsonnet evaluation with jrsonnet.
//!
//! jrsonnet's `State` and `Val` are `!Send`: everything here runs on the calling thread and
//! only `serde_json` values leave it.

use std::path::{Path, PathBuf};

use jrsonnet_evaluator::{
    AsPathLike, FileImportResolver, ImportResolver, SourcePath, SourceVirtual, State,
    manifest::JsonFormat,
    trace::{CompactFormat, PathResolver, TraceFormat},
};
use jrsonnet_gcmodule::Acyclic;

use crate::error::ConfigLoadError;
use crate::library;

/// The names under which `import` finds the embedded library.
pub const LIBRARY_IMPORT_NAMES: [&str; 2] = ["sluice.libsonnet", "substation.libsonnet"];

/// The ext-code variable that holds the library: `std.extVar('sub')`.
pub const LIBRARY_EXT_VAR: &str = "sub";

/// Resolves imports relative to the importing file, and the library names to the embedded
/// library.
///
/// `import 'sluice.libsonnet'` and `import 'substation.libsonnet'` (a bare name) always
/// give the embedded library, even when a file of that name exists, so that a config gets
/// the library that matches the engine. A path with directories that ends in one of those
/// names (`import '../substation.libsonnet'`) is read from disk when the file exists and
/// falls back to the embedded library when it does not.
#[derive(Acyclic)]
struct Resolver {
    files: FileImportResolver,
}

fn library_name(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    LIBRARY_IMPORT_NAMES.into_iter().find(|n| *n == name)
}

fn library_path(name: &'static str) -> SourcePath {
    SourcePath::new(SourceVirtual(name.into()))
}

impl ImportResolver for Resolver {
    fn resolve_from(
        &self,
        from: &SourcePath,
        path: &dyn AsPathLike,
    ) -> jrsonnet_evaluator::Result<SourcePath> {
        let requested = path.as_path();
        let requested: &Path = requested.as_ref();
        let lib = library_name(requested);
        if let Some(name) = lib
            && requested.parent().is_none_or(|p| p.as_os_str().is_empty())
        {
            return Ok(library_path(name));
        }
        match self.files.resolve_from(from, path) {
            Ok(found) => Ok(found),
            Err(e) => match lib {
                Some(name) => Ok(library_path(name)),
                None => Err(e),
            },
        }
    }

    fn load_file_contents(&self, resolved: &SourcePath) -> jrsonnet_evaluator::Result<Vec<u8>> {
        if let Some(v) = resolved.downcast_ref::<SourceVirtual>()
            && LIBRARY_IMPORT_NAMES.contains(&&*v.0)
        {
            return Ok(library().as_bytes().to_vec());
        }
        self.files.load_file_contents(resolved)
    }
}

fn trace(err: &jrsonnet_evaluator::Error) -> String {
    let format = CompactFormat {
        resolver: PathResolver::new_cwd_fallback(),
        max_trace: 20,
        padding: 4,
    };
    format
        .format(err)
        .unwrap_or_else(|_| err.error().to_string())
}

/// Evaluates a Jsonnet file to JSON text (minified).
pub(crate) fn evaluate_to_json_text(
    path: &Path,
    ext_strs: &[(String, String)],
) -> Result<String, ConfigLoadError> {
    let jsonnet_error = |e: &jrsonnet_evaluator::Error| ConfigLoadError::Jsonnet {
        path: path.to_path_buf(),
        trace: trace(e),
    };
    let absolute: PathBuf = std::path::absolute(path).map_err(|source| ConfigLoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;

    let ctx = jrsonnet_stdlib::ContextInitializer::new(PathResolver::new_cwd_fallback());
    for (name, value) in ext_strs {
        if name == LIBRARY_EXT_VAR {
            return Err(ConfigLoadError::ReservedExtVar { name: name.clone() });
        }
        ctx.add_ext_str(name.as_str().into(), value.as_str().into());
    }

    let mut builder = State::builder();
    builder.import_resolver(Resolver {
        files: FileImportResolver::new(Vec::new()),
    });
    // The initializer shares its settings with its clones: the library's value is added
    // after the state exists.
    builder.context_initializer(ctx.clone());
    let state = builder.build();
    // The state is made current for this thread while evaluating; a caller that is itself
    // inside a jrsonnet evaluation keeps its own.
    let _guard = state.try_enter();

    // `std.extVar('sub')` is the same value as `import 'sluice.libsonnet'` (evaluated once,
    // and its errors point into `sluice.libsonnet`).
    let lib = state
        .import_resolved(library_path(LIBRARY_IMPORT_NAMES[0]))
        .map_err(|e| jsonnet_error(&e))?;
    ctx.add_ext_var(LIBRARY_EXT_VAR.into(), lib);

    let val = state
        .import(absolute.as_path())
        .map_err(|e| jsonnet_error(&e))?;
    val.manifest(JsonFormat::minify())
        .map_err(|e| jsonnet_error(&e))
}
