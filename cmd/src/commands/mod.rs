//! One module per subcommand.

pub(crate) mod build;
pub(crate) mod demo;
pub(crate) mod fmt;
pub(crate) mod play;
pub(crate) mod run;
pub(crate) mod tap;
pub(crate) mod test;
pub(crate) mod vet;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use sluice_engine::{Context, Pipeline, Registry};

/// The URL a config argument names, when it is one (`s3://`, `https://`, `http://`)
/// rather than a local path.
pub(crate) fn url_of(file: &Path) -> Option<&str> {
    file.to_str().filter(|s| sluice_config::remote::is_url(s))
}

/// Loads a config: a local file or one at a URL.
pub(crate) fn load(
    file: &Path,
    ext: &[(String, String)],
) -> anyhow::Result<sluice_config::LoadedConfig> {
    match url_of(file) {
        Some(url) => Ok(sluice_config::remote::load(url, ext)?),
        None => Ok(sluice_config::load(file, ext)?),
    }
}

/// Compiles a config (a local file or one at a URL); `None` when it has no `transforms` (a
/// library or data file, which `test` and `vet` skip as Substation does).
pub(crate) fn load_optional(
    file: &Path,
    ext: &[(String, String)],
) -> anyhow::Result<Option<sluice_config::LoadedConfig>> {
    let json = match url_of(file) {
        Some(url) => sluice_config::remote::compile(url, ext)?,
        None => sluice_config::compile(file, ext)?,
    };
    if json.get("transforms").is_none() {
        return Ok(None);
    }
    Ok(Some(sluice_config::LoadedConfig::new(json, file)?))
}

/// Builds the pipeline of a compiled config in a context of its own, printing warnings.
pub(crate) fn build_pipeline(
    registry: &Registry,
    file: &Path,
    transforms: &serde_json::Value,
) -> anyhow::Result<Pipeline> {
    build_pipeline_in(&Context::new(), registry, file, transforms)
}

/// Builds the pipeline of a compiled config in `ctx`, printing warnings.
pub(crate) fn build_pipeline_in(
    ctx: &Arc<Context>,
    registry: &Registry,
    file: &Path,
    transforms: &serde_json::Value,
) -> anyhow::Result<Pipeline> {
    let built = registry
        .build_pipeline_in(ctx, transforms, "transforms")
        .with_context(|| format!("{}", file.display()))?;
    crate::output::warnings(file, &built.warnings);
    Ok(built.value)
}
