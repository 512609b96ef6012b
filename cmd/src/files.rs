//! Finding config files and parsing shared flags.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Parses `k=v` for `--ext-str`.
pub(crate) fn parse_ext_str(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// The config files named by `paths`: files and URLs (`s3://`, `https://`) as given;
/// directories walked for `.jsonnet` and `.json` files (recursively unless `shallow`),
/// sorted. `.libsonnet` files are libraries and only taken when named.
pub(crate) fn config_files(paths: &[PathBuf], shallow: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if crate::commands::url_of(p).is_some() {
            out.push(p.clone());
            continue;
        }
        let meta = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
        if meta.is_dir() {
            walk(p, shallow, &["jsonnet", "json"], &mut out)?;
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        bail!(
            "no config files (.jsonnet, .json) found in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(out)
}

/// The files under `dir` whose extension is one of `extensions`, sorted, recursively unless
/// `shallow`; hidden directories, `target` and `node_modules` are skipped.
pub(crate) fn walk(
    dir: &Path,
    shallow: bool,
    extensions: &[&str],
    out: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if p.is_dir() {
            if !shallow {
                walk(&p, shallow, extensions, out)?;
            }
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e))
        {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_str_table() {
        assert_eq!(parse_ext_str("a=b"), Ok(("a".into(), "b".into())));
        assert_eq!(parse_ext_str("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_ext_str("a="), Ok(("a".into(), "".into())));
        assert!(parse_ext_str("=b").is_err());
        assert!(parse_ext_str("ab").is_err());
    }
}
