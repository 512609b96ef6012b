//! How `send_file` writes a batch's file ([`write_file`]) so that neither a crash nor the
//! data can do harm: the data goes to a temporary file that is synced and then renamed (or
//! linked) into place, so no half-written batch ever has the final name; below
//! `file_path.prefix` no symbolic link is followed; and a file this send did not write is
//! never replaced ([`Replace`]). Apart from the transform ([`super`]) because this is where
//! sending meets the filesystem, and differs by platform.
//!
//! On Unix the directories are walked by descriptor, each created (`mkdirat`) and opened
//! with `O_NOFOLLOW` in the one above it (one that is a link fails the batch), and the
//! temporary file is created exclusively in the last one's descriptor and linked or
//! renamed within it (`linkat`, `renameat`): a link swapped in for a directory after it was
//! opened is never followed, since no path is looked up again. Elsewhere the directories
//! are checked by path, and that race remains.

use std::path::Path;

/// Whether a file may replace one that exists under its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Replace {
    /// Its name holds a UUID of this send's (data cannot choose it): a file there is an
    /// earlier attempt at the same batch.
    Always,
    /// This send wrote the file there before (`uuid: false`).
    Written,
    /// Never: the file is not this send's.
    Never,
}

/// Why a file was not written.
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteError {
    /// The filesystem's error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A component of the path below the configured prefix is a symbolic link.
    #[error(
        "{0} is a symbolic link; a path below file_path.prefix never follows one (it could lead outside the folder)"
    )]
    Symlink(String),
    /// The directory resolved outside the prefix (a link swapped in meanwhile).
    #[cfg(not(unix))]
    #[error("{dir} resolves to {real}, outside file_path.prefix {root}")]
    Outside {
        dir: String,
        real: String,
        root: String,
    },
    /// A file this send did not write exists under the name.
    #[error(
        "a file that this send did not write exists there, and file_path.uuid is false: it is never replaced (set file_path.uuid, or move the file)"
    )]
    Exists,
}

#[cfg(unix)]
impl From<rustix::io::Errno> for WriteError {
    fn from(e: rustix::io::Errno) -> Self {
        WriteError::Io(e.into())
    }
}

/// Writes `data` to `target`: the directories below `root` (the configured prefix, `""`
/// for the working directory; `None` when the name is the config's alone) are created and
/// opened one by one, refusing any that is a symbolic link ([`open_dir`]); the data goes to
/// a new temporary file in the last one, is synced, and is renamed into place, or linked
/// there without replacing anything when `replace` is [`Replace::Never`] ([`write_in`]).
#[cfg(unix)]
pub(super) fn write_file(
    root: Option<&str>,
    target: &Path,
    data: &[u8],
    replace: Replace,
) -> Result<(), WriteError> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = target.file_name().ok_or_else(|| {
        WriteError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let dir = open_dir(root, dir)?;
    write_in(&dir, name, data, replace)
}

/// Creates the directories of `path` (mode 0770), following links: the config's own.
fn create_all(path: &Path) -> Result<(), std::io::Error> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o770);
    builder.create(path)
}

/// Opens the directory `dir`, creating it as needed. Below `root` (`""`: the working
/// directory) each component is created and opened in the descriptor of the one above it,
/// never through a symbolic link; `root` itself, and the whole of `dir` when `root` is
/// `None`, are the config's: created as needed, and they may be links.
#[cfg(unix)]
fn open_dir(root: Option<&str>, dir: &Path) -> Result<std::os::fd::OwnedFd, WriteError> {
    use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, mkdirat, openat, statat};
    use rustix::io::Errno;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Some(root) = root else {
        create_all(dir)?;
        return Ok(openat(CWD, dir, flags, Mode::empty())?);
    };
    let root_path = if root.is_empty() {
        Path::new(".")
    } else {
        Path::new(root)
    };
    create_all(root_path)?;
    let mut fd = openat(CWD, root_path, flags, Mode::empty())?;
    let below = if root.is_empty() {
        dir
    } else {
        dir.strip_prefix(root_path).unwrap_or(Path::new(""))
    };
    let mut at = root_path.to_path_buf();
    for component in below.components() {
        let name = match component {
            std::path::Component::Normal(name) => name,
            std::path::Component::CurDir => continue,
            // The name's checks ([`super::data_path`]) leave none of these below the root.
            other => {
                return Err(WriteError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} has a {other:?} component below the prefix",
                        dir.display()
                    ),
                )));
            }
        };
        at.push(name);
        match mkdirat(&fd, name, Mode::from_bits_truncate(0o770)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        fd = match openat(&fd, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
            Ok(next) => next,
            Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                let link = statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
                return Err(if link {
                    WriteError::Symlink(at.display().to_string())
                } else {
                    e.into()
                });
            }
            Err(e) => return Err(e.into()),
        };
    }
    Ok(fd)
}

/// Writes `data` as `name` in the directory `dir`: a temporary file created exclusively
/// there (never through a link), synced, then renamed to `name`, or linked to it when
/// `replace` is [`Replace::Never`] (a link fails, instead of replacing, when a file or a
/// link is there). Nothing is looked up by path outside `dir`.
#[cfg(unix)]
fn write_in(
    dir: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    data: &[u8],
    replace: Replace,
) -> Result<(), WriteError> {
    use rustix::fs::{AtFlags, Mode, OFlags, linkat, openat, renameat, statat, unlinkat};
    use rustix::io::Errno;
    use std::io::Write;
    if replace == Replace::Never && statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        return Err(WriteError::Exists);
    }
    let tmp = format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    );
    let fd = openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )?;
    let mut file = std::fs::File::from(fd);
    let result = (|| {
        file.write_all(data)?;
        file.sync_all()?;
        if replace == Replace::Never {
            match linkat(dir, tmp.as_str(), dir, name, AtFlags::empty()) {
                Err(Errno::EXIST) => return Err(WriteError::Exists),
                r => r?,
            }
            unlinkat(dir, tmp.as_str(), AtFlags::empty())?;
        } else {
            renameat(dir, tmp.as_str(), dir, name)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = unlinkat(dir, tmp.as_str(), AtFlags::empty());
    }
    result
}

/// Writes `data` to `target` by path (systems without `openat`): the directories below
/// `root` are created one by one, refusing any that is a symbolic link, and the directory
/// is checked to resolve inside `root`; the data goes to a new temporary file beside the
/// target (created exclusively), is synced, and is renamed or linked into place. A link
/// swapped in between the check and the write is followed: Unix builds do not have this
/// race.
#[cfg(not(unix))]
pub(super) fn write_file(
    root: Option<&str>,
    target: &Path,
    data: &[u8],
    replace: Replace,
) -> Result<(), WriteError> {
    use std::io::Write;
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match root {
        Some(root) => create_dirs_below(root, dir)?,
        None => create_all(dir)?,
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if replace == Replace::Never && std::fs::symlink_metadata(target).is_ok() {
        return Err(WriteError::Exists);
    }
    let tmp = target.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        if replace == Replace::Never {
            match std::fs::hard_link(&tmp, target) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(WriteError::Exists),
                r => r.map_err(WriteError::Io),
            }?;
            std::fs::remove_file(&tmp).map_err(WriteError::Io)
        } else {
            std::fs::rename(&tmp, target).map_err(WriteError::Io)
        }
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `dir` and its missing parents below `root` by path, refusing a component that is
/// a symbolic link, then checks that `dir` resolves inside `root` (systems without
/// `openat`).
#[cfg(not(unix))]
fn create_dirs_below(root: &str, dir: &Path) -> Result<(), WriteError> {
    let root_path = if root.is_empty() {
        Path::new(".")
    } else {
        Path::new(root)
    };
    create_all(root_path)?;
    let below = if root.is_empty() {
        dir
    } else {
        dir.strip_prefix(root_path).unwrap_or(Path::new(""))
    };
    let mut at = root_path.to_path_buf();
    for component in below.components() {
        at.push(component);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(WriteError::Symlink(at.display().to_string()));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e.into()),
                _ => {}
            },
            Err(e) => return Err(e.into()),
        }
    }
    let real_root = std::fs::canonicalize(root_path)?;
    let real = std::fs::canonicalize(dir)?;
    if !real.starts_with(&real_root) {
        return Err(WriteError::Outside {
            dir: dir.display().to_string(),
            real: real.display().to_string(),
            root: real_root.display().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race the walk by descriptor closes: a directory below the prefix is swapped for
    /// a symbolic link after it was checked and opened, before the file is written. The
    /// file lands in the directory that was opened (moved aside), never through the link;
    /// with `uuid: false` too, and the name is still never replaced.
    #[cfg(unix)]
    #[test]
    fn a_link_swapped_in_after_the_walk_is_never_followed() {
        use std::ffi::OsStr;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let prefix = out.to_str().unwrap();
        for (i, replace) in [Replace::Always, Replace::Never].into_iter().enumerate() {
            let key = format!("k{i}");
            let opened = open_dir(Some(prefix), &out.join(&key).join("deeper")).unwrap();
            assert!(out.join(&key).join("deeper").is_dir());
            std::fs::rename(out.join(&key), out.join(format!("moved{i}"))).unwrap();
            std::os::unix::fs::symlink(&outside, out.join(&key)).unwrap();
            std::fs::create_dir_all(outside.join("deeper")).unwrap();
            write_in(&opened, OsStr::new("f"), b"data", replace).unwrap();
            assert_eq!(
                std::fs::read_to_string(out.join(format!("moved{i}/deeper/f"))).unwrap(),
                "data"
            );
            assert_eq!(
                std::fs::read_dir(outside.join("deeper")).unwrap().count(),
                0
            );
            // Opening again by path meets the link, and refuses it.
            let e = open_dir(Some(prefix), &out.join(&key).join("deeper")).unwrap_err();
            assert!(e.to_string().contains("is a symbolic link"), "{e}");
        }
        // A file put there meanwhile is never replaced by a `Never` write.
        let opened = open_dir(Some(prefix), &out.join("moved1/deeper")).unwrap();
        let e = write_in(&opened, OsStr::new("f"), b"other", Replace::Never).unwrap_err();
        assert!(e.to_string().contains("did not write"), "{e}");
        assert_eq!(
            std::fs::read_to_string(out.join("moved1/deeper/f")).unwrap(),
            "data"
        );
    }
}
