//! `send_file`: writes each batch to a new local file.
//!
//! Substation compatibility: the same settings (`file_path {prefix, time_format, uuid,
//! suffix}`, `use_batch_key_as_prefix`, `batch`, `auxiliary_transforms`,
//! `object.batch_key`) and output: one file per batch, the items concatenated without a
//! separator unless sluice's `separator` sets one (or add one with auxiliary transforms,
//! e.g. `aggregate_to_string` with `separator: "\n"`), parent directories created (mode
//! 0770). Naming and joining are shared with `send_aws_s3` ([`super::object_per_batch`]).
//! The library's default `file_path` is `{time_format: '2006/01/02', uuid: true}`; with no
//! `file_path` at all (Go's default, an empty path) the config is rejected instead of
//! failing at the first flush.
//!
//! Unlike Substation, a batch is written to a temporary file in the target directory and
//! renamed into place after it was synced, so a crash never leaves half a batch under the
//! final name; without `uuid`, batches that fall in the same time bucket replace each other
//! (as they overwrite each other in Substation), which the builder warns about.
//!
//! Inside `meta_kv_store_lock` a batch's file is named after its messages' lock keys and
//! their first attempt ([`super::object_per_batch`]), so a batch written again after a
//! crash (before its locks were committed) replaces its file, atomically, instead of
//! adding a second one: exactly once into files, for batches re-formed alike.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};

use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
pub(crate) use super::object_per_batch::FilePath;
use super::object_per_batch::ObjectPerBatch;

/// Settings of `send_file`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// How file names are made.
    pub file_path: FilePath,
    /// Use the batch key as the path's prefix.
    pub use_batch_key_as_prefix: bool,
    /// Put between consecutive items (sluice's; Substation has none).
    pub separator: String,
    /// Batch limits.
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is written.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
}

/// Local files as a destination.
pub(crate) struct Files {
    objects: ObjectPerBatch,
}

impl Files {
    /// Files named and filled as `objects` says.
    pub(crate) fn new(objects: ObjectPerBatch) -> Self {
        Files { objects }
    }
}

#[async_trait]
impl Destination for Files {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let path = self.objects.name(batch)?;
        let data = self.objects.contents(&batch.items);
        let target = PathBuf::from(&path);
        tokio::task::spawn_blocking(move || write_atomically(&target, &data))
            .await
            .map_err(|e| TransformError::failed(format!("writing {path}: {e}")))?
            .map_err(|e| TransformError::external(format!("writing {path}"), e))?;
        Ok(())
    }
}

/// Writes `data` to a temporary file next to `target`, syncs it and renames it into place.
fn write_atomically(target: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o770);
        builder.create(dir)?;
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = target.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The `send_file` transform.
pub(crate) type SendFile = Sender<Files>;

impl Sender<Files> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let objects = ObjectPerBatch::new(b, s.file_path, s.use_batch_key_as_prefix, s.separator)?;
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps::NONE,
            Files::new(objects),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::{Message, Pipeline, json, testing};
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    /// A fresh directory under the system's temp dir, removed on drop.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new() -> Self {
            let p = std::env::temp_dir().join(format!("sluice-send-file-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
        fn path(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Every file under `dir` (relative path, contents), sorted by contents.
    fn files(dir: &Path) -> Vec<(String, String)> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(base, &p, out);
                } else {
                    let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                    out.push((rel, std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort_by(|a, b| a.1.cmp(&b.1));
        out
    }

    fn run(settings: sluice_engine::Value, inputs: &[&str]) -> Vec<String> {
        let t = testing::build(
            &registry(),
            json!({"type": "send_file", "settings": settings}),
        )
        .unwrap();
        testing::run(t, inputs).unwrap()
    }

    #[test]
    fn one_file_per_batch_items_concatenated() {
        let dir = TempDir::new();
        let out = run(
            json!({"file_path": {"prefix": dir.path(), "uuid": true, "suffix": ".txt"},
                   "batch": {"count": 2}}),
            &["a", "b", "c"],
        );
        assert_eq!(out, vec!["a", "b", "c"], "data passes through");
        let got = files(&dir.0);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, "ab");
        assert_eq!(got[1].1, "c");
        for (name, _) in &got {
            assert!(name.ends_with(".txt") && name.len() == 36 + 4, "{name}");
        }
    }

    #[test]
    fn a_separator_goes_between_items() {
        let dir = TempDir::new();
        run(
            json!({"file_path": {"prefix": dir.path(), "uuid": true}, "separator": "\n"}),
            &["a", "b", "c"],
        );
        assert_eq!(files(&dir.0)[0].1, "a\nb\nc");
    }

    #[test]
    fn path_has_prefix_time_uuid_suffix() {
        let dir = TempDir::new();
        run(
            json!({"file_path": {"prefix": dir.path(), "time_format": "2006/01", "uuid": true, "suffix": ".json"}}),
            &["x"],
        );
        let got = files(&dir.0);
        let want_dir = chrono::Utc::now().format("%Y/%m").to_string();
        assert_eq!(got.len(), 1);
        let (name, data) = &got[0];
        assert_eq!(data, "x");
        assert!(name.starts_with(&format!("{want_dir}/")), "{name}");
        assert!(name.ends_with(".json"), "{name}");
    }

    #[test]
    fn batch_key_as_prefix_and_aux_transforms() {
        let dir = TempDir::new();
        let a = format!(r#"{{"k":"{}/a","n":1}}"#, dir.path());
        let b = format!(r#"{{"k":"{}/b","n":2}}"#, dir.path());
        let a2 = format!(r#"{{"k":"{}/a","n":3}}"#, dir.path());
        run(
            json!({"file_path": {"uuid": true}, "use_batch_key_as_prefix": true,
                   "object": {"batch_key": "k"},
                   "auxiliary_transforms": [
                       {"type": "aggregate_to_string", "settings": {"separator": "\n"}}]}),
            &[&a, &b, &a2],
        );
        let got = files(&dir.0);
        assert_eq!(got.len(), 2);
        assert!(got[0].0.starts_with("a/"), "{:?}", got);
        assert_eq!(got[0].1, format!("{a}\n{a2}"));
        assert!(got[1].0.starts_with("b/"), "{:?}", got);
        assert_eq!(got[1].1, b);
    }

    #[test]
    fn no_temporary_files_are_left_and_acks_resolve() {
        let dir = TempDir::new();
        let t = testing::build(
            &registry(),
            json!({"type": "send_file", "settings": {"file_path": {"prefix": dir.path(), "uuid": true}}}),
        )
        .unwrap();
        let p = Pipeline::new(vec![(Arc::from("send_file"), t)]);
        let (tracker, token) = AckTracker::new();
        let mut m = Message::new(&b"payload"[..]);
        m.add_ack(token);
        let out = testing::block_on(p.apply(vec![m])).unwrap();
        drop(out);
        assert_eq!(tracker.status(), AckStatus::Pending);
        testing::block_on(p.apply(vec![Message::ctrl()])).unwrap();
        assert_eq!(tracker.status(), AckStatus::Delivered);
        let names: Vec<String> = files(&dir.0).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), 1);
        assert!(!names[0].contains(".tmp"), "{names:?}");
    }

    #[test]
    fn an_unwritable_path_is_an_error_and_keeps_the_batch() {
        let dir = TempDir::new();
        // A regular file where a directory is needed.
        let blocker = dir.0.join("blocker");
        std::fs::write(&blocker, "x").unwrap();
        let t = testing::build(
            &registry(),
            json!({"type": "send_file", "settings": {"file_path": {"prefix": blocker.to_str().unwrap(), "uuid": true}}}),
        )
        .unwrap();
        let mut out = Vec::new();
        testing::block_on(t.transform(Message::new(&b"x"[..]), &mut out)).unwrap();
        let e = testing::block_on(t.transform(Message::ctrl(), &mut out))
            .unwrap_err()
            .to_string();
        assert!(e.contains("writing"), "{e}");
        // Fix the path: the retry of the ctrl delivers the kept batch.
        std::fs::remove_file(&blocker).unwrap();
        testing::block_on(t.transform(Message::ctrl(), &mut out)).unwrap();
        assert_eq!(files(&dir.0)[0].1, "x");
    }

    #[test]
    fn settings_errors() {
        let r = registry();
        for settings in [
            json!({}),
            json!({"file_path": {}}),
            json!({"file_path": {"uuid": false}}),
        ] {
            let e = testing::build(&r, json!({"type": "send_file", "settings": settings}))
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("file_path"), "{e}");
        }
    }
}
