//! `send_aws_s3`: writes each batch to a new object in an Amazon S3 bucket.
//!
//! Substation compatibility: the same type name and settings (`aws.arn`,
//! `aws.assume_role_arn`, `file_path`, `use_batch_key_as_prefix`, `storage_class`,
//! `checksum_algorithm`, `batch`, `auxiliary_transforms`, `object.batch_key`) and output: one
//! object per batch, named by `file_path` like `send_file`'s files
//! ([`super::object_per_batch`]), the items concatenated without a separator unless sluice's
//! `separator` sets one. `aws.arn` is the bucket's ARN (`arn:aws:s3:::BUCKET`) or its bare
//! name; the region comes from `AWS_REGION` (bucket ARNs carry none). Inside
//! `meta_kv_store_lock` an object is named after its messages' lock keys and first attempt,
//! so a batch sent again after a crash or an uncertain failure replaces its object instead
//! of adding one ([`super::object_per_batch`]).
//!
//! Uploads: an object of at most `part_size` bytes (16 MiB unless set) is sent with one
//! `PutObject`; a larger one with a multipart upload (`CreateMultipartUpload`, `UploadPart`
//! of `part_size` bytes, up to [`PART_CONCURRENCY`] at once, `CompleteMultipartUpload`),
//! aborted (`AbortMultipartUpload`) when any part or the completion fails, so no orphaned
//! parts stay billed. Parts grow beyond `part_size` when an object would need more than
//! S3's 10,000 parts; an object over S3's 5 TiB limit is an error naming it. Each call is
//! retried by the SDK (`sluice_platform::aws`); what still fails fails the whole batch (no message of
//! it is delivered: the batcher keeps it for a retry and fails every acknowledgement when
//! the pipeline gives up), and the error names the bucket, the key and S3's error code.
//!
//! Content type: sniffed from the object's first bytes (as Substation does): gzip, zstd,
//! bzip2, snappy (framed), zip and Parquet by their magic numbers, UTF-8 text (JSON, CSV,
//! lines) as `text/plain; charset=utf-8`, anything else as `application/octet-stream`.
//! No `Content-Encoding` is set: compressed objects (e.g. `format_to_gzip` as an auxiliary
//! transform, key suffix `.json.gz`) are stored and served as the `.gz` files they are,
//! whereas `Content-Encoding: gzip` makes browsers, CloudFront and `curl --compressed`
//! decompress them on download, so the bytes a reader gets would no longer match the key.
//!
//! Checksums: `checksum_algorithm` (`CRC32`, `CRC32C`, `SHA1`, `SHA256`) makes the SDK send
//! that checksum of the object (of every part, and S3 checks the parts' list on
//! completion); unset (or `none`) sends none beyond what the protocol requires.

use std::ops::Range;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::RequestChecksumCalculation;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart, StorageClass};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, TransformError, Value, async_trait};

use super::aws_destination::{AwsDestination, aws_send};
use super::aws_records::{AttemptWatch, AwsSettings, CallError, check_role, non_empty};
use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use super::object_per_batch::{FilePath, ObjectPerBatch, content_type};
use sluice_platform::aws::describe_error as describe;
use sluice_platform::aws::{Arn, AwsTarget};

/// 1 MiB.
const MIB: usize = 1024 * 1024;
/// The default `part_size`: objects up to it go in one `PutObject`, larger ones in parts of
/// this size.
pub(crate) const DEFAULT_PART_SIZE: usize = 16 * MIB;
/// S3's smallest part (all but the last).
pub(crate) const MIN_PART_SIZE: usize = 5 * MIB;
/// S3's largest part, and its largest `PutObject`.
pub(crate) const MAX_PART_SIZE: usize = 5 * 1024 * MIB;
/// S3's most parts in one upload.
pub(crate) const MAX_PARTS: usize = 10_000;
/// S3's largest object (5 TiB).
pub(crate) const MAX_OBJECT_BYTES: u64 = 5 * 1024 * 1024 * MIB as u64;
/// Parts of one upload in flight at once.
pub(crate) const PART_CONCURRENCY: usize = 4;

/// The checksum algorithms `checksum_algorithm` accepts.
const CHECKSUMS: [&str; 4] = ["CRC32", "CRC32C", "SHA1", "SHA256"];

/// Settings of `send_aws_s3`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The bucket (`arn`) and the role.
    pub aws: AwsSettings,
    /// How object keys are made.
    pub file_path: FilePath,
    /// Use the batch key as the key's prefix.
    pub use_batch_key_as_prefix: bool,
    /// The objects' storage class (default `STANDARD`).
    pub storage_class: Option<String>,
    /// The checksum sent with each upload (none by default).
    pub checksum_algorithm: Option<String>,
    /// Put between consecutive items (sluice's; Substation has none).
    pub separator: String,
    /// sluice's: the size up to which an object goes in one `PutObject`, and of the parts of
    /// larger ones.
    pub part_size: Option<usize>,
    /// Batch limits.
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is written.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
}

/// The bucket named by `aws.arn`: an S3 bucket ARN (`arn:aws:s3:::BUCKET`) or a bare name.
pub(crate) fn parse_bucket(arn: Option<String>) -> Result<String, String> {
    let arn = non_empty(arn)
        .ok_or("missing required option: the bucket's ARN (arn:aws:s3:::BUCKET) or its name")?;
    let name = if arn.starts_with("arn:") {
        let a = Arn::parse(&arn)?;
        if a.service != "s3" || !a.region.is_empty() || !a.account.is_empty() {
            return Err(format!(
                "{arn:?} is not an S3 bucket ARN (expected arn:aws:s3:::BUCKET)"
            ));
        }
        a.resource
    } else {
        arn.clone()
    };
    // S3's rules for new buckets are stricter (3 to 63 lower-case letters, digits, '.' and
    // '-'); older buckets may have upper-case letters and '_'.
    let valid = (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !valid {
        return Err(format!(
            "{arn:?} names no S3 bucket (expected arn:aws:s3:::BUCKET or BUCKET, a bucket name \
             of 3 to 63 letters, digits, '.' and '-'; an object prefix goes in file_path.prefix)"
        ));
    }
    Ok(name)
}

/// `storage_class`: one of S3's storage classes (any case); empty or unset is `STANDARD`.
pub(crate) fn parse_storage_class(s: Option<&str>) -> Result<StorageClass, String> {
    let s = s.unwrap_or("").trim();
    if s.is_empty() {
        return Ok(StorageClass::Standard);
    }
    let upper = s.to_ascii_uppercase();
    if StorageClass::values().contains(&upper.as_str()) {
        return Ok(StorageClass::from(upper.as_str()));
    }
    Err(format!(
        "unknown storage class {s:?}; expected one of {}",
        StorageClass::values().join(", ")
    ))
}

/// `checksum_algorithm`: one of [`CHECKSUMS`] (any case), or none (unset, empty, `none`).
pub(crate) fn parse_checksum(s: Option<&str>) -> Result<Option<ChecksumAlgorithm>, String> {
    let s = s.unwrap_or("").trim();
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let upper = s.to_ascii_uppercase();
    if CHECKSUMS.contains(&upper.as_str()) {
        return Ok(Some(ChecksumAlgorithm::from(upper.as_str())));
    }
    Err(format!(
        "unknown checksum algorithm {s:?}; expected one of {} or none",
        CHECKSUMS.join(", ")
    ))
}

/// How an object of `len` bytes is uploaded with parts of (at least) `part_size` bytes:
/// `None` for one `PutObject`, else the byte ranges of the parts (each at least
/// `part_size`, the last aside, and at most [`MAX_PARTS`] of them).
pub(crate) fn plan_parts(
    len: usize,
    part_size: usize,
) -> Result<Option<Vec<Range<usize>>>, String> {
    if len as u64 > MAX_OBJECT_BYTES {
        return Err(format!(
            "an object of {len} bytes exceeds S3's object size limit of 5 TiB ({MAX_OBJECT_BYTES} bytes)"
        ));
    }
    if len <= part_size {
        return Ok(None);
    }
    let size = part_size.max(len.div_ceil(MAX_PARTS));
    Ok(Some(
        (0..len)
            .step_by(size)
            .map(|start| start..(start + size).min(len))
            .collect(),
    ))
}

/// An S3 bucket as a destination.
pub(crate) struct S3 {
    aws: AwsDestination<Client>,
    objects: ObjectPerBatch,
    storage_class: StorageClass,
    checksum: Option<ChecksumAlgorithm>,
    part_size: usize,
}

impl S3 {
    /// Objects in `bucket`, reached with `target`, named and filled as `objects` says.
    pub(crate) fn new(bucket: String, objects: ObjectPerBatch, target: AwsTarget) -> Self {
        S3 {
            aws: AwsDestination::new(
                "s3 bucket",
                bucket,
                target,
                "set AWS_REGION (bucket ARNs carry no region)",
            ),
            objects,
            storage_class: StorageClass::Standard,
            checksum: None,
            part_size: DEFAULT_PART_SIZE,
        }
    }

    /// Stores objects in `class`.
    pub(crate) fn with_storage_class(mut self, class: StorageClass) -> Self {
        self.storage_class = class;
        self
    }

    /// Sends `checksum` with every upload.
    pub(crate) fn with_checksum(mut self, checksum: Option<ChecksumAlgorithm>) -> Self {
        self.checksum = checksum;
        self
    }

    /// Uploads objects over `part_size` bytes in parts of that size.
    pub(crate) fn with_part_size(mut self, part_size: usize) -> Self {
        self.part_size = part_size;
        self
    }

    async fn client(&self) -> Result<&Client, TransformError> {
        let checksums = if self.checksum.is_some() {
            RequestChecksumCalculation::WhenSupported
        } else {
            RequestChecksumCalculation::WhenRequired
        };
        self.aws
            .client(|conf| sluice_platform::aws::s3::client(conf, checksums))
            .await
    }

    /// The error of a failed call on object `key`.
    fn error(&self, key: &str, what: impl std::fmt::Display) -> TransformError {
        TransformError::failed(format!("s3 bucket {}, key {key}: {what}", self.aws.name()))
    }

    /// Puts the object in one call; a failure says whether it may have been stored.
    async fn put(&self, client: &Client, key: &str, body: Bytes) -> Result<(), SendError> {
        let watch = AttemptWatch::default();
        client
            .put_object()
            .bucket(self.aws.name())
            .key(key)
            .content_type(content_type(&body))
            .storage_class(self.storage_class.clone())
            .set_checksum_algorithm(self.checksum.clone())
            .body(ByteStream::from(body))
            .customize()
            .interceptor(watch.clone())
            .send()
            .await
            .map_err(|e| {
                SendError::from(self.error(key, format_args!("PutObject failed: {}", describe(&e))))
                    .uncertain(watch.verdict(&e))
            })?;
        Ok(())
    }

    async fn put_multipart(
        &self,
        client: &Client,
        key: &str,
        body: Bytes,
        parts: Vec<Range<usize>>,
    ) -> Result<(), SendError> {
        let created = client
            .create_multipart_upload()
            .bucket(self.aws.name())
            .key(key)
            .content_type(content_type(&body))
            .storage_class(self.storage_class.clone())
            .set_checksum_algorithm(self.checksum.clone())
            .send()
            .await
            .map_err(|e| {
                SendError::from(self.error(
                    key,
                    format_args!("CreateMultipartUpload failed: {}", describe(&e)),
                ))
            })?;
        let Some(upload_id) = created.upload_id().map(str::to_string) else {
            return Err(self
                .error(key, "CreateMultipartUpload answered no UploadId")
                .into());
        };
        match self
            .upload_parts(client, key, &upload_id, &body, &parts)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                let aborted = client
                    .abort_multipart_upload()
                    .bucket(self.aws.name())
                    .key(key)
                    .upload_id(&upload_id)
                    .send()
                    .await;
                let text = &e.text;
                let error = match aborted {
                    Ok(_) => self.error(key, format_args!("{text}; the upload was aborted")),
                    Err(a) => self.error(
                        key,
                        format_args!(
                            "{text}; AbortMultipartUpload of upload {upload_id} failed too: {} \
                             (its parts stay stored until a lifecycle rule removes them)",
                            describe(&a)
                        ),
                    ),
                };
                Err(SendError::from(error).uncertain(e.uncertain))
            }
        }
    }

    /// Uploads the parts and completes the upload; the error says which call failed and why
    /// (the caller adds the bucket and key), and whether the object may exist all the same
    /// (only completing the upload makes it).
    async fn upload_parts(
        &self,
        client: &Client,
        key: &str,
        upload_id: &str,
        body: &Bytes,
        parts: &[Range<usize>],
    ) -> Result<(), CallError> {
        let count = parts.len();
        // The uploads are made first and then driven (a closure in the stream would make the
        // future's `Send` proof depend on higher-ranked lifetimes the compiler cannot show).
        let uploads: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(i, range)| {
                let number = i as i32 + 1;
                let req = client
                    .upload_part()
                    .bucket(self.aws.name())
                    .key(key)
                    .upload_id(upload_id)
                    .part_number(number)
                    .set_checksum_algorithm(self.checksum.clone())
                    .body(ByteStream::from(body.slice(range.clone())))
                    .send();
                async move {
                    let out = req.await.map_err(|e| {
                        format!(
                            "UploadPart (part {number} of {count}) failed: {}",
                            describe(&e)
                        )
                    })?;
                    Ok::<_, String>(
                        CompletedPart::builder()
                            .part_number(number)
                            .set_e_tag(out.e_tag().map(str::to_string))
                            .set_checksum_crc32(out.checksum_crc32().map(str::to_string))
                            .set_checksum_crc32_c(out.checksum_crc32_c().map(str::to_string))
                            .set_checksum_sha1(out.checksum_sha1().map(str::to_string))
                            .set_checksum_sha256(out.checksum_sha256().map(str::to_string))
                            .build(),
                    )
                }
            })
            .collect();
        let mut done: Vec<CompletedPart> = futures::stream::iter(uploads)
            .buffer_unordered(PART_CONCURRENCY)
            .try_collect()
            .await
            .map_err(CallError::certain)?;
        done.sort_by_key(|p| p.part_number());
        let watch = AttemptWatch::default();
        client
            .complete_multipart_upload()
            .bucket(self.aws.name())
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(done))
                    .build(),
            )
            .customize()
            .interceptor(watch.clone())
            .send()
            .await
            .map_err(|e| CallError {
                text: format!("CompleteMultipartUpload failed: {}", describe(&e)),
                uncertain: watch.verdict(&e),
            })?;
        Ok(())
    }
}

#[async_trait]
impl Destination for S3 {
    fn check_key(&self, key: &str) -> Result<(), String> {
        self.objects.check_key(key)
    }

    async fn holds_object(&self, name: &str) -> Result<bool, TransformError> {
        let client = self.client().await?;
        match client
            .head_object()
            .bucket(self.aws.name())
            .key(name)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) => Err(self.error(
                name,
                format_args!(
                    "HeadObject failed, looking for the object an earlier attempt wrote (S3 answers 403 for a missing object to a role without s3:ListBucket on the bucket): {}",
                    describe(&e)
                ),
            )),
        }
    }

    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        let key = self.objects.name(batch)?;
        self.objects.place(batch, &key).await?;
        let body = self.objects.contents(&batch.items);
        let plan = plan_parts(body.len(), self.part_size).map_err(|m| self.error(&key, m))?;
        let client = self.client().await?;
        match plan {
            None => self.put(client, &key, body).await?,
            Some(parts) => self.put_multipart(client, &key, body, parts).await?,
        }
        Ok(())
    }
}

aws_send!(S3, Client);

/// The `send_aws_s3` transform.
pub(crate) type SendAwsS3 = Sender<S3>;

impl Sender<S3> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let bucket = parse_bucket(s.aws.arn).map_err(|m| b.field_error("aws.arn", m))?;
        let role = non_empty(s.aws.assume_role_arn);
        check_role(&role).map_err(|m| b.field_error("aws.assume_role_arn", m))?;
        let storage_class = parse_storage_class(s.storage_class.as_deref())
            .map_err(|m| b.field_error("storage_class", m))?;
        let checksum = parse_checksum(s.checksum_algorithm.as_deref())
            .map_err(|m| b.field_error("checksum_algorithm", m))?;
        let part_size = s.part_size.unwrap_or(DEFAULT_PART_SIZE);
        if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&part_size) {
            return Err(b.field_error(
                "part_size",
                format!(
                    "{part_size} bytes is outside S3's part sizes, {MIN_PART_SIZE} (5 MiB) to {MAX_PART_SIZE} (5 GiB)"
                ),
            ));
        }
        let objects = ObjectPerBatch::new(b, s.file_path, s.use_batch_key_as_prefix, s.separator)?;
        let target = AwsTarget {
            assume_role_arn: role,
            ..Default::default()
        };
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
            S3::new(bucket, objects, target)
                .with_storage_class(storage_class)
                .with_checksum(checksum)
                .with_part_size(part_size),
        )
    }
}

#[cfg(test)]
mod tests;
