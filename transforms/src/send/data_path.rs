//! Names built from message data (a batch key used as a path's prefix by `send_file`,
//! `send_aws_s3` and `send_gcp_storage`), confined under the configured prefix.
//!
//! Message data is the least trusted input (docs/security.md): it must never choose where a
//! file goes outside the folder the config names. A name from data is therefore accepted
//! only as a plain relative path: `/`-separated components, none empty, `.` or `..`, no
//! leading `/`, no backslash (a separator to Windows readers of object keys), no NUL or
//! other control character. A trailing `/` is allowed (it only says "a folder"). The check
//! is lexical, so it holds for object keys too, which are flat but are mapped to paths by
//! whatever syncs a bucket to disk; what a local filesystem adds (symlinks) is checked where
//! files are written ([`super::file`]).

/// Why a name from data is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UnsafeName {
    /// It starts with `/`, so it would replace the prefix.
    #[error("it is an absolute path (starts with '/')")]
    Absolute,
    /// A `..` component, which climbs out of the prefix.
    #[error("it has a '..' component")]
    Parent,
    /// An empty (`a//b`) or `.` component.
    #[error("it has an empty or '.' component")]
    Odd,
    /// A backslash, a path separator to Windows readers.
    #[error("it holds a backslash")]
    Backslash,
    /// A NUL or another control character.
    #[error("it holds a NUL or another control character")]
    Control,
}

/// Checks that `name` (from data) is a plain relative path (see the module documentation).
pub(crate) fn check(name: &str) -> Result<(), UnsafeName> {
    if name.starts_with('/') {
        return Err(UnsafeName::Absolute);
    }
    if name.contains('\\') {
        return Err(UnsafeName::Backslash);
    }
    if name.chars().any(char::is_control) {
        return Err(UnsafeName::Control);
    }
    let trimmed = name.trim_end_matches('/');
    for component in trimmed.split('/') {
        match component {
            ".." => return Err(UnsafeName::Parent),
            "" | "." => return Err(UnsafeName::Odd),
            _ => {}
        }
    }
    Ok(())
}

/// `name` (from data, checked) under `root` (from the config): `root/name` without the
/// trailing `/`s of either (`/name` under the root directory `/`), or `name` alone when
/// `root` is empty.
pub(crate) fn confine(root: &str, name: &str) -> Result<String, UnsafeName> {
    check(name)?;
    let name = name.trim_end_matches('/');
    Ok(match root.trim_end_matches('/') {
        "" if root.is_empty() => name.to_string(),
        trimmed => format!("{trimmed}/{name}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_table() {
        // (root, name from data, the path or why not)
        let cases: &[(&str, &str, Result<&str, UnsafeName>)] = &[
            ("out", "tenant-1", Ok("out/tenant-1")),
            ("out/", "a/b/", Ok("out/a/b")),
            ("", "a/b", Ok("a/b")),
            ("/var/out", "x.y..z", Ok("/var/out/x.y..z")),
            ("/", "a", Ok("/a")),
            ("out", "..", Err(UnsafeName::Parent)),
            ("out", "../../escaped", Err(UnsafeName::Parent)),
            ("out", "a/../../b", Err(UnsafeName::Parent)),
            ("out", "a/..", Err(UnsafeName::Parent)),
            ("out", "/etc", Err(UnsafeName::Absolute)),
            ("out", "/", Err(UnsafeName::Absolute)),
            ("out", "a//b", Err(UnsafeName::Odd)),
            ("out", "./a", Err(UnsafeName::Odd)),
            ("out", "//", Err(UnsafeName::Absolute)),
            ("out", "..\\..\\x", Err(UnsafeName::Backslash)),
            ("out", "a\0b", Err(UnsafeName::Control)),
            ("out", "a\nb", Err(UnsafeName::Control)),
        ];
        for (root, name, want) in cases {
            assert_eq!(
                confine(root, name).as_deref().map_err(|e| *e),
                *want,
                "{root:?} {name:?}"
            );
        }
    }
}
