//! `send_gcp_storage`: writes each batch to a new object in a Google Cloud Storage bucket.
//!
//! Substation compatibility (`reference/substation.md` §2.1 row 59): the same type name and
//! settings (`gcp.resource` as `projects/_/buckets/BUCKET` or the bucket's bare name, as
//! Substation 2.8 reads it, `file_path`,
//! `use_batch_key_as_prefix`, `batch`, `auxiliary_transforms`, `object.batch_key`) and
//! output: one object per batch, named by `file_path` like `send_aws_s3`'s objects
//! ([`super::object_per_batch`]), its content type sniffed from its first bytes. Inside
//! `meta_kv_store_lock` an object is named after its messages' lock keys and first attempt,
//! so a batch sent again after a crash or an uncertain failure replaces its object instead
//! of adding one.
//!
//! Where sluice differs from Substation: Substation writes only the batch's first item (it
//! concatenates them into a temporary file, then uploads `data[0]`), so every other message
//! of the batch is lost; sluice writes all of them, concatenated without a separator as
//! `send_aws_s3` does, or joined by sluice's `separator`. `gcp.resource` is checked when
//! the config is built against Cloud Storage's rules for bucket names, where Substation
//! checks only that it is set (2.8) or its prefix (later versions), and both of its forms
//! are accepted.
//!
//! Credentials and endpoint: Application Default Credentials, as Substation's Go client
//! finds them ([`sluice_platform::gcp::credentials`]); `STORAGE_EMULATOR_HOST` sends every call to
//! an emulator instead ([`sluice_platform::gcp::storage`]). A failed upload (after its retries) fails
//! the whole batch, whose messages stay queued for the next attempt; the error names the
//! bucket, the object and what Cloud Storage answered.

use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};

use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use super::object_per_batch::{FilePath, ObjectPerBatch, content_type};
use sluice_platform::gcp::credentials::process_env;
use sluice_platform::gcp::storage::Storage;

/// What `gcp.resource` starts with.
const RESOURCE_PREFIX: &str = "projects/_/buckets/";
/// Cloud Storage's largest object (5 TiB).
const MAX_OBJECT_BYTES: u64 = 5 * 1024 * 1024 * 1024 * 1024;
/// Cloud Storage's longest object name, in bytes of UTF-8.
const MAX_NAME_BYTES: usize = 1024;

/// `gcp`: the resource written to.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GcpSettings {
    /// `projects/_/buckets/BUCKET`.
    pub resource: Option<String>,
}

/// Settings of `send_gcp_storage`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The bucket.
    pub gcp: GcpSettings,
    /// How object names are made.
    pub file_path: FilePath,
    /// Use the batch key as the name's prefix.
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

/// The bucket named by `gcp.resource`: `projects/_/buckets/BUCKET` (Substation since 2.8's
/// successors) or the bare name (what Substation 2.8 reads, and its example passes).
pub(crate) fn parse_resource(resource: Option<&str>) -> Result<String, String> {
    let resource = resource
        .filter(|r| !r.is_empty())
        .ok_or("missing required option: the bucket, as projects/_/buckets/BUCKET or its name")?;
    let bucket = resource.strip_prefix(RESOURCE_PREFIX).unwrap_or(resource);
    if let Some(why) = bucket_name_error(bucket) {
        return Err(format!(
            "{resource:?} names no Cloud Storage bucket (expected projects/_/buckets/BUCKET or \
             BUCKET): {why} (an object prefix goes in file_path.prefix)"
        ));
    }
    Ok(bucket.to_string())
}

/// Why `name` cannot be a bucket's name, by Cloud Storage's rules: 3 to 63 characters (222
/// with dots, each part at most 63), lower-case letters, digits, `-`, `_` and `.`, starting
/// and ending with a letter or digit.
fn bucket_name_error(name: &str) -> Option<String> {
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b);
    if let Some(c) = name.chars().find(|c| !c.is_ascii() || !allowed(*c as u8)) {
        return Some(format!(
            "{c:?} is not allowed in a bucket name (lower-case letters, digits, '-', '_' and '.')"
        ));
    }
    let max = if name.contains('.') { 222 } else { 63 };
    if !(3..=max).contains(&name.len()) {
        return Some(format!("a bucket name has 3 to {max} characters"));
    }
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    if !ends(name.bytes().next()) || !ends(name.bytes().last()) {
        return Some("a bucket name starts and ends with a letter or digit".to_string());
    }
    if name
        .split('.')
        .any(|part| part.is_empty() || part.len() > 63)
    {
        return Some("each dot-separated part of a bucket name has 1 to 63 characters".to_string());
    }
    None
}

/// Why `name` cannot be an object's name: longer than [`MAX_NAME_BYTES`], or holding a
/// carriage return or line feed.
fn object_name_error(name: &str) -> Option<String> {
    if name.len() > MAX_NAME_BYTES {
        return Some(format!(
            "the object name is {} bytes long; Cloud Storage allows {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.contains(['\r', '\n']) {
        return Some("an object name cannot hold a carriage return or line feed".to_string());
    }
    None
}

/// A Cloud Storage bucket as a destination.
#[derive(Debug)]
pub(crate) struct GcsBucket {
    bucket: String,
    objects: ObjectPerBatch,
    storage: Storage,
}

impl GcsBucket {
    /// Objects in `bucket`, named and filled as `objects` says, written through `storage`.
    pub(crate) fn new(bucket: String, objects: ObjectPerBatch, storage: Storage) -> Self {
        GcsBucket {
            bucket,
            objects,
            storage,
        }
    }

    /// The error of a batch written as `name`.
    fn error(&self, name: &str, what: impl std::fmt::Display) -> TransformError {
        TransformError::failed(format!("gcs bucket {}, object {name}: {what}", self.bucket))
    }
}

#[async_trait]
impl Destination for GcsBucket {
    fn check_key(&self, key: &str) -> Result<(), String> {
        self.objects.check_key(key)
    }

    async fn holds_object(&self, name: &str) -> Result<bool, TransformError> {
        self.storage
            .exists(&self.bucket, name)
            .await
            .map_err(|f| self.error(name, f.text))
    }

    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let name = self.objects.name(batch)?;
        if let Some(why) = object_name_error(&name) {
            return Err(self.error(&name, why).into());
        }
        self.objects.place(batch, &name).await?;
        let body = self.objects.contents(&batch.items);
        let kind = content_type(&body);
        self.storage
            .upload(&self.bucket, &name, kind, body)
            .await
            .map_err(|f| SendError::from(self.error(&name, f.text)).uncertain(f.uncertain))
    }
}

/// The `send_gcp_storage` transform.
pub(crate) type SendGcpStorage = Sender<GcsBucket>;

impl Sender<GcsBucket> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let bucket = parse_resource(s.gcp.resource.as_deref())
            .map_err(|m| b.field_error("gcp.resource", m))?;
        let objects = ObjectPerBatch::new(b, s.file_path, s.use_batch_key_as_prefix, s.separator)?;
        let max = usize::try_from(MAX_OBJECT_BYTES).unwrap_or(usize::MAX);
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps {
                count: usize::MAX,
                size: max,
                item_size: max,
            },
            GcsBucket::new(bucket, objects, Storage::from_env(process_env())),
        )
    }
}

/// What registers the `send_gcp_storage` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_gcp_storage",
    aliases: &[],
    library: "sub.tf.send.gcp.storage",
    summary: "writes each batch to a new Cloud Storage object (a media upload, or a resumable one when large)",
    reach: sluice_engine::Reach::Network,
    example: r#"{"gcp": {"resource": "projects/_/buckets/bucket"}, "file_path": {"uuid": true}}"#,
};

#[cfg(test)]
mod tests;
