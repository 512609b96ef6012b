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
//! final name.
//!
//! What data may choose (docs/security.md): with `use_batch_key_as_prefix` the batch key
//! names directories under `file_path.prefix`, never outside it ([`super::data_path`]).
//! Below the prefix no symbolic link is followed, not even one swapped in while a batch is
//! written (how: [`write`]). Without `uuid` the data can name an existing file, so a file
//! is never replaced unless this send wrote it (Substation truncates whatever is there):
//! the batch fails with an error saying so. Batches of this send that fall in the same time
//! bucket still replace each other, as in Substation, which the builder warns about.
//!
//! Inside `meta_kv_store_lock` a batch's file is named after its messages' lock keys and
//! their first attempt ([`super::object_per_batch`]), so a batch written again after a
//! crash (before its locks were committed) replaces its file, atomically, instead of
//! adding a second one: exactly once into files, for batches re-formed alike.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};

use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
pub(crate) use super::object_per_batch::FilePath;
use super::object_per_batch::ObjectPerBatch;

mod write;

use write::{Replace, WriteError, write_file};

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
    /// The files this send wrote under names without a UUID (`file_path.uuid: false`), the
    /// only existing files it may replace.
    written: Mutex<HashSet<PathBuf>>,
}

impl Files {
    /// Files named and filled as `objects` says.
    pub(crate) fn new(objects: ObjectPerBatch) -> Self {
        Files {
            objects,
            written: Mutex::new(HashSet::new()),
        }
    }

    fn written(&self) -> MutexGuard<'_, HashSet<PathBuf>> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl Destination for Files {
    fn check_key(&self, key: &str) -> Result<(), String> {
        self.objects.check_key(key)
    }

    async fn holds_object(&self, name: &str) -> Result<bool, TransformError> {
        match tokio::fs::symlink_metadata(name).await {
            Ok(meta) => Ok(meta.is_file()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(TransformError::external(
                format!("looking for {name}, written by an earlier attempt"),
                e,
            )),
        }
    }

    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let path = self.objects.name(batch)?;
        self.objects.place(batch, &path).await?;
        let data = self.objects.contents(&batch.items);
        let target = PathBuf::from(&path);
        let replace = if self.objects.unique() {
            Replace::Always
        } else if self.written().contains(&target) {
            Replace::Written
        } else {
            Replace::Never
        };
        let root = self.objects.split_root(&path).map(|(root, _)| root);
        let written = target.clone();
        tokio::task::spawn_blocking(move || write_file(root.as_deref(), &target, &data, replace))
            .await
            .map_err(|e| TransformError::failed(format!("writing {path}: {e}")))?
            .map_err(|e| match e {
                WriteError::Io(e) => TransformError::external(format!("writing {path}"), e),
                refused => TransformError::failed(format!("writing {path}: {refused}")),
            })?;
        if !self.objects.unique() {
            self.written().insert(written);
        }
        Ok(())
    }
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

/// What registers the `send_file` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_file",
    aliases: &[],
    library: "sub.tf.send.file",
    summary: "writes each batch to a new local file",
    reach: sluice_engine::Reach::Files,
    example: r#"{"file_path": {"prefix": "out", "uuid": true}}"#,
};

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
        let a = r#"{"k":"a","n":1}"#;
        let b = r#"{"k":"b/c","n":2}"#;
        let a2 = r#"{"k":"a","n":3}"#;
        run(
            json!({"file_path": {"prefix": dir.path(), "uuid": true}, "use_batch_key_as_prefix": true,
                   "object": {"batch_key": "k"},
                   "auxiliary_transforms": [
                       {"type": "aggregate_to_string", "settings": {"separator": "\n"}}]}),
            &[a, b, a2],
        );
        let got = files(&dir.0);
        assert_eq!(got.len(), 2);
        assert!(got[0].0.starts_with("a/"), "{:?}", got);
        assert_eq!(got[0].1, format!("{a}\n{a2}"));
        assert!(got[1].0.starts_with("b/c/"), "{:?}", got);
        assert_eq!(got[1].1, b);
    }

    /// Sends each of `inputs` (a batch key each) as its own message to a `send_file` under
    /// `root/out` with `settings`, then a ctrl: the error of each message (`None`: taken)
    /// and the ctrl's.
    fn send_each(
        settings: sluice_engine::Value,
        inputs: &[&str],
    ) -> (Vec<Option<String>>, Option<String>) {
        let t = testing::build(
            &registry(),
            json!({"type": "send_file", "settings": settings}),
        )
        .unwrap();
        let mut out = Vec::new();
        let each = inputs
            .iter()
            .map(|i| {
                testing::block_on(t.transform(Message::new(i.as_bytes().to_vec()), &mut out))
                    .err()
                    .map(|e| e.to_string())
            })
            .collect();
        let ctrl = testing::block_on(t.transform(Message::ctrl(), &mut out))
            .err()
            .map(|e| e.to_string());
        (each, ctrl)
    }

    /// Batch keys from data that would lead outside `file_path.prefix`: each such message is
    /// refused alone with an error naming its key and the setting; the others are written
    /// under the prefix, and nothing outside it.
    #[test]
    fn batch_keys_stay_inside_the_prefix() {
        let dir = TempDir::new();
        let out = dir.0.join("out");
        let settings = json!({"file_path": {"prefix": out.to_str().unwrap(), "uuid": true},
                              "use_batch_key_as_prefix": true, "object": {"batch_key": "k"}});
        let abs = dir.0.join("abs");
        // (batch key, what the refusal says; None: written)
        let cases = [
            ("tenant-1".to_string(), None),
            ("../../escaped".into(), Some("'..' component")),
            ("../sibling".into(), Some("'..' component")),
            ("a/../../x".into(), Some("'..' component")),
            (abs.to_str().unwrap().to_string(), Some("absolute path")),
            ("a//b".into(), Some("empty or '.' component")),
            ("nul\0x".into(), Some("control character")),
            ("..\\x".into(), Some("backslash")),
            ("tenant-2/logs".into(), None),
        ];
        let inputs: Vec<String> = cases
            .iter()
            .map(|(k, _)| json!({"k": k}).to_string())
            .collect();
        let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        let (each, ctrl) = send_each(settings, &refs);
        assert_eq!(ctrl, None);
        for ((key, want), got) in cases.iter().zip(&each) {
            match (want, got) {
                (None, None) => {}
                (Some(why), Some(e)) => {
                    assert!(e.contains(why), "{key:?}: {e}");
                    assert!(e.contains("use_batch_key_as_prefix"), "{e}");
                    assert!(e.contains(&format!("{key:?}")), "names the key: {e}");
                }
                _ => panic!("{key:?}: want {want:?}, got {got:?}"),
            }
        }
        let written: Vec<String> = files(&dir.0).into_iter().map(|(n, _)| n).collect();
        assert_eq!(written.len(), 2, "{written:?}");
        assert!(
            written.iter().all(|n| n.starts_with("out/tenant-")),
            "{written:?}"
        );
    }

    /// A symbolic link below the prefix (to a directory outside it) is never followed: the
    /// batch fails with an error naming the link, and nothing is written outside.
    #[cfg(unix)]
    #[test]
    fn a_symlinked_directory_below_the_prefix_is_refused() {
        let dir = TempDir::new();
        let out = dir.0.join("out");
        let outside = dir.0.join("outside");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("link")).unwrap();
        for (key, time_format) in [("link", ""), ("link/deeper", ""), ("ok", "link")] {
            let (each, ctrl) = send_each(
                json!({"file_path": {"prefix": out.to_str().unwrap(), "uuid": true, "time_format": time_format},
                       "use_batch_key_as_prefix": key != "ok", "object": {"batch_key": "k"}}),
                &[&json!({"k": key}).to_string()],
            );
            assert_eq!(each, vec![None]);
            let e = ctrl.expect("the batch fails");
            assert!(e.contains("is a symbolic link"), "{e}");
            assert!(e.contains("link"), "{e}");
        }
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    /// With `uuid: false` data can name an existing file: it is never replaced unless this
    /// send wrote it.
    #[test]
    fn without_uuid_an_existing_file_is_never_replaced() {
        let dir = TempDir::new();
        let out = dir.0.join("out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("victim"), "precious").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.0.join("target"), out.join("dangling")).unwrap();
        let settings = json!({"file_path": {"prefix": out.to_str().unwrap(), "uuid": false},
                              "use_batch_key_as_prefix": true, "object": {"batch_key": "k"}});
        for key in ["victim", "dangling"] {
            let (each, ctrl) = send_each(settings.clone(), &[&json!({"k": key}).to_string()]);
            assert_eq!(each, vec![None]);
            let e = ctrl.expect("refused");
            assert!(e.contains("did not write"), "{e}");
        }
        assert_eq!(
            std::fs::read_to_string(out.join("victim")).unwrap(),
            "precious"
        );
        assert!(!dir.0.join("target").exists());
        // What this send wrote itself it replaces (Substation's batches in one time bucket).
        let t = testing::build(
            &registry(),
            json!({"type": "send_file", "settings": settings}),
        )
        .unwrap();
        let mut o = Vec::new();
        for data in [r#"{"k":"mine","n":1}"#, r#"{"k":"mine","n":2}"#] {
            testing::block_on(t.transform(Message::new(data.as_bytes().to_vec()), &mut o)).unwrap();
            testing::block_on(t.transform(Message::ctrl(), &mut o)).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(out.join("mine")).unwrap(),
            r#"{"k":"mine","n":2}"#
        );
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
