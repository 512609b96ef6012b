//! What the sends that write one object per batch share (`send_file`, `send_aws_s3`,
//! `send_gcp_storage`): the `file_path` that names each object, the choice of prefix with
//! `use_batch_key_as_prefix`, how a batch's items become the object's bytes (joined by
//! `separator`), and the content type sniffed from them.
//!
//! Naming, as in Substation: `[prefix]/[time_format]/[uuid][suffix]`, the parts that are
//! set joined by `/` with the suffix appended to the last one; `time_format` is a Go layout
//! applied to the current UTC time. With `use_batch_key_as_prefix` a non-empty batch key
//! goes under the prefix (`[prefix]/[key]/...`): it comes from message data, so it is
//! confined there ([`super::data_path`]: no `..`, no leading `/`, no empty or `.`
//! components, no backslash or control character), and a message whose key breaks that is
//! refused alone when it arrives. Substation puts the key *instead of* the prefix, which
//! lets data write anywhere; the two agree when no prefix is set (the library's default).
//! A name that is empty or ends in `/` names no object and is an error.
//!
//! Under `meta_kv_store_lock` (every item of the batch carries a lock: without auxiliary
//! transforms each item's own, with them the batch's messages' locks, since the mapping is
//! lost) the name is derived from what the batch holds, so a batch sent again after a crash
//! (the same messages, so the same keys) replaces its object instead of adding one:
//!
//! - the `uuid` part is a hash of the batch's lock keys in any order (sorted), each with the first
//!   attempt at its message (`LockTicket::origin_ms`, which every takeover and retry of the
//!   message inherits, and a key taken afresh after its TTL or a release does not): the
//!   first 16 bytes of the SHA-256 of the keys and instants (each key preceded by its
//!   length, so no two lists give the same bytes), shown as a UUID of version 8 (RFC 9562's
//!   custom version: 122 of the hash's bits kept, the version and variant bits set), so
//!   names keep the shape Substation's random UUIDs give them and whatever reads them by
//!   pattern keeps working. A batch sent again keeps its name; a message with the same key
//!   processed again later ("once per key per window", after `ttl_offset`) gets a new one
//!   and never replaces the earlier object;
//! - the `time_format` part formats the earliest first attempt of the batch's messages
//!   (`LockTicket::origin_ms`: when the first attempt at the message took its key, which a
//!   takeover inherits) instead of now, so a retry on another day lands in the same place.
//!
//! This makes a re-sent batch replace its object when it is re-formed alike: the same
//! messages, in whatever order. A redelivery that groups them otherwise (two processes each
//! taking over part of a crashed owner's keys, a `batch.duration` that closes the batch at
//! another point, a crash between the commits of one batch's keys) forms other batches,
//! with other names. So before writing a locked batch's object its send records, in each
//! lock, that the copy goes into that object ([`ObjectPerBatch::place`]: one store write per
//! key, in one call per store), and a later attempt at any of those messages first looks
//! for the objects its copy was placed in: a copy found in one is delivered, and is not
//! written again (the batcher's check, through `Destination::holds_object`). A batch with an
//! item outside every lock is named as without locks, and places nothing.
//!
//! Contents: Substation concatenates the items without a separator; sluice's `separator`
//! (default `""`, so Substation's behaviour) is put between consecutive items, not after the
//! last, like `aggregate_to_string`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use chrono::{TimeZone, Utc};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sluice_engine::{Build, ConfigError, TransformError};

use super::batcher::{ItemLocks, Outgoing, SendError};
use super::data_path;
use crate::kv_store::LockTicket;
use crate::kv_store::lock::{LockStore, Progress, RecordRequest, Settled};
use crate::time::layout::format_go;

/// `file_path`: how object (file) names are made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct FilePath {
    /// The first directory (or directories) of the path.
    pub prefix: String,
    /// A Go time layout for the directories after the prefix (e.g. `2006/01/02`).
    pub time_format: String,
    /// Whether the file name is a random UUID.
    pub uuid: bool,
    /// Appended to the file name (e.g. `.json.gz`).
    pub suffix: String,
}

impl FilePath {
    /// Whether no part is set (Go's default, which names nothing).
    pub(crate) fn is_empty(&self) -> bool {
        self.prefix.is_empty()
            && self.time_format.is_empty()
            && !self.uuid
            && self.suffix.is_empty()
    }

    /// The path for a batch under `prefix` (the configured one, or a batch key confined
    /// under it), named after `identity` (its lock keys' hash and first attempt) when given,
    /// else written now under a random UUID.
    fn make(&self, prefix: &str, identity: Option<&Identity>) -> String {
        let mut parts: Vec<String> = Vec::with_capacity(3);
        if !prefix.is_empty() {
            parts.push(prefix.trim_end_matches('/').to_string());
        }
        if !self.time_format.is_empty() {
            let at = identity
                .and_then(|i| Utc.timestamp_millis_opt(i.origin_ms).single())
                .unwrap_or_else(Utc::now)
                .with_timezone(&chrono_tz::UTC);
            parts.push(format_go(&at, &self.time_format));
        }
        if self.uuid {
            parts.push(
                identity.map_or_else(|| uuid::Uuid::new_v4().to_string(), |i| i.uuid.to_string()),
            );
        }
        let mut path = parts.join("/");
        path.push_str(&self.suffix);
        path
    }
}

/// What names the object of a batch whose every item is under a lock (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    /// The hash of the lock keys, as a version 8 UUID.
    uuid: uuid::Uuid,
    /// The earliest first attempt of the batch's messages (epoch ms).
    origin_ms: i64,
}

impl Identity {
    /// The identity of `batch`, when every item is under a lock: its send, its batch key,
    /// and each lock with which copy of its message the batch holds (several batches of one
    /// send may hold copies of the same message: a message fanned out into records, split
    /// by count, size, time or batch key).
    fn of(batch: &Outgoing) -> Option<Identity> {
        let locks = &batch.locks;
        let tickets = match locks {
            ItemLocks::PerItem(_) if locks.every_item_locked() => locks.all(),
            ItemLocks::Batch(all) if !all.is_empty() => all.clone(),
            _ => return None,
        };
        let mut h = Sha256::new();
        for part in [batch.send.as_bytes(), batch.key.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        let copies: Vec<(&Arc<LockTicket>, Option<u32>)> = if batch.copies.is_empty() {
            tickets.iter().map(|t| (t, None)).collect()
        } else {
            batch
                .copies
                .iter()
                .flatten()
                .map(|(t, c)| (t, Some(*c)))
                .collect()
        };
        // In a canonical order: a redelivery re-forms the batch from the same messages but
        // not always in the same order (a message whose key another owner held a little
        // longer comes out later), and must still replace the object.
        let mut entries: Vec<(&str, i64, u64)> = copies
            .into_iter()
            .map(|(t, copy)| {
                let copy = copy.map_or(u64::MAX, u64::from);
                (t.key.as_str(), t.origin_ms(), copy)
            })
            .collect();
        entries.sort_unstable();
        for (key, origin_ms, copy) in entries {
            h.update((key.len() as u64).to_le_bytes());
            h.update(key.as_bytes());
            h.update(origin_ms.to_le_bytes());
            h.update(copy.to_le_bytes());
        }
        let mut b = [0u8; 16];
        b.copy_from_slice(&h.finalize()[..16]);
        b[6] = (b[6] & 0x0F) | 0x80; // version 8
        b[8] = (b[8] & 0x3F) | 0x80; // RFC 9562 variant
        Some(Identity {
            uuid: uuid::Uuid::from_bytes(b),
            origin_ms: tickets.iter().map(|t| t.origin_ms()).min()?,
        })
    }
}

/// How a send names and fills the object of each batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ObjectPerBatch {
    /// `file_path`.
    pub file_path: FilePath,
    /// `use_batch_key_as_prefix`.
    pub use_batch_key_as_prefix: bool,
    /// `separator`, put between consecutive items.
    pub separator: Bytes,
}

impl ObjectPerBatch {
    /// Checks the settings at build time: a `file_path` with no part set is an error (Go's
    /// default names nothing, which Substation only finds at the first flush); one without
    /// `uuid` draws a warning, since batches of one time bucket then get one name.
    pub(crate) fn new(
        b: &Build<'_>,
        file_path: FilePath,
        use_batch_key_as_prefix: bool,
        separator: String,
    ) -> Result<Self, ConfigError> {
        if file_path.is_empty() {
            return Err(b.field_error(
                "file_path",
                "missing required option: file_path must set at least one of prefix, time_format, uuid, suffix (the library's default is {time_format: '2006/01/02', uuid: true})",
            ));
        }
        if !file_path.uuid {
            b.warn(
                "file_path.uuid is false: batches written in the same time bucket replace each other"
                    .to_string(),
            );
        }
        Ok(ObjectPerBatch {
            file_path,
            use_batch_key_as_prefix,
            separator: Bytes::from(separator),
        })
    }

    /// The name of `batch`'s object: derived from its locks when every item has one, else
    /// new (written now, a random UUID).
    pub(crate) fn name(&self, batch: &Outgoing) -> Result<String, TransformError> {
        let key = batch.key.as_str();
        let prefix = if self.use_batch_key_as_prefix && !key.is_empty() {
            data_path::confine(&self.file_path.prefix, key)
                .map_err(|why| TransformError::failed(self.key_error(key, why)))?
        } else {
            self.file_path.prefix.clone()
        };
        let path = self.file_path.make(&prefix, Identity::of(batch).as_ref());
        if path.is_empty() || path.ends_with('/') {
            return Err(TransformError::failed(format!(
                "file_path gives no file name for batch key {key:?}"
            )));
        }
        Ok(path)
    }

    /// Checks a message's batch key before the message is held: with
    /// `use_batch_key_as_prefix`, a key that cannot be a path under the prefix
    /// ([`data_path::check`]) refuses the message alone, with an error naming the key and the
    /// settings.
    pub(crate) fn check_key(&self, key: &str) -> Result<(), String> {
        if !self.use_batch_key_as_prefix || key.is_empty() {
            return Ok(());
        }
        data_path::check(key).map_err(|why| self.key_error(key, why))
    }

    /// The error of a batch key refused as a path.
    fn key_error(&self, key: &str, why: data_path::UnsafeName) -> String {
        format!(
            "batch key {key:?} (the message's object.batch_key) cannot be used as a path under \
             file_path.prefix {:?} (use_batch_key_as_prefix): {why}; a key from data is kept \
             inside the prefix",
            self.file_path.prefix
        )
    }

    /// The part of `name` (one of [`Self::name`]'s) that the config fixes, and the rest, below
    /// it: the prefix as a directory, `""` for the working directory when there is none.
    /// `None` when the name is the prefix and suffix alone (nothing below the prefix).
    pub(crate) fn split_root<'a>(&self, name: &'a str) -> Option<(String, &'a str)> {
        let prefix = &self.file_path.prefix;
        let root = match prefix.trim_end_matches('/') {
            "" if !prefix.is_empty() => "/",
            r => r,
        };
        if root.is_empty() {
            return Some((String::new(), name));
        }
        let rest = if root == "/" {
            name.strip_prefix('/')
        } else {
            name.strip_prefix(root).and_then(|r| r.strip_prefix('/'))
        }?;
        Some((root.to_string(), rest))
    }

    /// Before `batch` is written as the object `name`: records in the lock of each copy the
    /// batch holds that the copy goes there (`LockStore::record`, one call per lock store),
    /// so that a later attempt at any of its messages, in whatever batch it comes back,
    /// finds the object and does not write the copy again (the batcher's check of
    /// placements: `Destination::holds_object`). Only for a batch named after its locks
    /// (every item locked, `file_path.uuid` set): that name is the batch's alone.
    ///
    /// Nothing is written when this fails: a store failure, or a lock another process took
    /// over (its ticket is marked lost, so the message is not sent under it), fails the
    /// batch certainly.
    pub(crate) async fn place(&self, batch: &Outgoing, name: &str) -> Result<(), SendError> {
        if !self.unique() || Identity::of(batch).is_none() {
            return Ok(());
        }
        place_copies(&batch.send, batch.copies.iter().flatten(), name)
            .await
            .map_err(|why| {
                SendError::from(TransformError::failed(format!(
                    "{name} was not written: {why}"
                )))
            })
    }

    /// Whether names carry a UUID part (random or of the batch's locks), which data cannot
    /// choose.
    pub(crate) fn unique(&self) -> bool {
        self.file_path.uuid
    }

    /// The object's bytes: `items` joined by the separator.
    pub(crate) fn contents(&self, items: &[Bytes]) -> Bytes {
        join(items, &self.separator)
    }
}

/// Records `send`'s placement of each of `copies` in `name` in their locks' stores, then in
/// their tickets; the error says why not.
async fn place_copies<'a>(
    send: &str,
    copies: impl Iterator<Item = &'a (Arc<LockTicket>, u32)>,
    name: &str,
) -> Result<(), String> {
    // Per store and owner, per key: the ticket and what to record.
    type Group = (
        Arc<dyn LockStore>,
        BTreeMap<String, (Arc<LockTicket>, Progress)>,
    );
    let mut groups: BTreeMap<(usize, Arc<str>), Group> = BTreeMap::new();
    for (ticket, copy) in copies {
        let id = Arc::as_ptr(&ticket.store).cast::<()>() as usize;
        let (_, keys) = groups
            .entry((id, ticket.owner.clone()))
            .or_insert_with(|| (ticket.store.clone(), BTreeMap::new()));
        let (_, progress) = keys
            .entry(ticket.key.clone())
            .or_insert_with(|| (ticket.clone(), Progress::new()));
        progress.place(send, *copy, name);
    }
    for ((_, owner), (store, keys)) in groups {
        let requests: Vec<RecordRequest> = keys
            .iter()
            .map(|(key, (_, progress))| RecordRequest {
                key: key.clone(),
                progress: progress.clone(),
            })
            .collect();
        let settled = store
            .record(&owner, &requests, PLACE_CONCURRENCY)
            .await
            .map_err(|e| {
                format!(
                    "recording where its messages go in {} failed: {e}",
                    store.describe()
                )
            })?;
        let mut lost = Vec::new();
        for ((key, (ticket, progress)), outcome) in keys.iter().zip(settled) {
            match outcome {
                Settled::Ok => ticket.record_placements(progress),
                Settled::NotOwner(_) => {
                    ticket.mark_lost();
                    lost.push(key.as_str());
                }
            }
        }
        if let Some(first) = lost.first() {
            return Err(format!(
                "{} of its locks ({first:?}{}) were taken over by another process after their leases ran out",
                lost.len(),
                if lost.len() > 1 { ", ..." } else { "" }
            ));
        }
    }
    Ok(())
}

/// Lock store calls in flight while a batch's placements are recorded.
const PLACE_CONCURRENCY: usize = 8;

/// `items` with `separator` between consecutive ones; a single item is returned as is
/// (no copy).
pub(crate) fn join(items: &[Bytes], separator: &[u8]) -> Bytes {
    if let [one] = items {
        return one.clone();
    }
    let size = items.iter().map(Bytes::len).sum::<usize>()
        + separator.len() * items.len().saturating_sub(1);
    let mut out = Vec::with_capacity(size);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(separator);
        }
        out.extend_from_slice(item);
    }
    Bytes::from(out)
}

/// The `Content-Type` of an object that starts with `data`, sniffed from its first bytes
/// (as Substation does): gzip, zstd, bzip2, snappy (framed), zip and Parquet by their magic
/// numbers, UTF-8 text (JSON, CSV, lines) as `text/plain; charset=utf-8`, anything else as
/// `application/octet-stream`.
pub(crate) fn content_type(data: &[u8]) -> &'static str {
    match data {
        [0x1f, 0x8b, ..] => "application/gzip",
        [0x28, 0xb5, 0x2f, 0xfd, ..] => "application/zstd",
        [b'B', b'Z', b'h', ..] => "application/x-bzip2",
        [
            0xff,
            0x06,
            0x00,
            0x00,
            b's',
            b'N',
            b'a',
            b'P',
            b'p',
            b'Y',
            ..,
        ] => "application/x-snappy-framed",
        [b'P', b'K', 0x03, 0x04, ..] => "application/zip",
        [b'P', b'A', b'R', b'1', ..] => "application/vnd.apache.parquet",
        _ if is_text(&data[..data.len().min(512)]) => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Whether `head` (an object's first bytes) reads as UTF-8 text: valid UTF-8 (a character
/// cut at the end aside) without control characters other than tab, line feed, form feed
/// and carriage return.
fn is_text(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    valid
        && head
            .iter()
            .all(|&b| b >= 0x20 || matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r'))
        && !head.contains(&0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_store::LockTicket;
    use crate::kv_store::memory::MemoryStore;
    use std::num::NonZeroUsize;
    use std::sync::Arc;

    /// An unlocked batch with batch key `key`.
    fn keyed(key: &str) -> Outgoing {
        Outgoing {
            key: key.into(),
            items: vec![Bytes::from_static(b"x")],
            ..Default::default()
        }
    }

    /// A lock on `key`, taken at `taken_ms`, after an earlier attempt since `prior`.
    fn lock(key: &str, taken_ms: i64, prior: Option<i64>) -> Arc<LockTicket> {
        Arc::new(LockTicket::new(
            key.into(),
            0,
            taken_ms,
            prior.map(|since| (since, Default::default())),
            Arc::new(MemoryStore::new(NonZeroUsize::new(1).unwrap())),
            "me".into(),
            std::time::Instant::now(),
            None,
        ))
    }

    /// A batch of one item per lock in `locks` (`None`: an item without a lock).
    fn locked(locks: &[Option<Arc<LockTicket>>]) -> Outgoing {
        Outgoing {
            key: String::new(),
            items: locks.iter().map(|_| Bytes::from_static(b"x")).collect(),
            locks: ItemLocks::PerItem(locks.iter().map(|l| l.iter().cloned().collect()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn a_locked_batch_is_named_after_its_keys_and_first_attempt() {
        let o = ObjectPerBatch {
            file_path: FilePath {
                prefix: "out".into(),
                time_format: "2006/01/02/15".into(),
                uuid: true,
                suffix: ".jsonl".into(),
            },
            use_batch_key_as_prefix: false,
            separator: Bytes::new(),
        };
        // 2024-01-02T03:04:05Z, and a day later.
        let (t0, t1) = (1_704_164_645_000, 1_704_251_045_000);
        let name = |locks: &[Option<Arc<LockTicket>>]| o.name(&locked(locks)).unwrap();
        let first = name(&[Some(lock("a", t1, Some(t0))), Some(lock("b", t1, None))]);
        assert!(
            first.starts_with("out/2024/01/02/03/"),
            "the first attempt's time: {first}"
        );
        let id = first
            .strip_prefix("out/2024/01/02/03/")
            .and_then(|r| r.strip_suffix(".jsonl"))
            .unwrap();
        let uuid = uuid::Uuid::parse_str(id).unwrap();
        assert_eq!(uuid.get_version_num(), 8, "{id}");
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
        // The same keys, taken again later by someone else (who inherits when each first
        // attempt began): the same name.
        let again = name(&[
            Some(lock("a", t1 + 5, Some(t0))),
            Some(lock("b", t1 + 5, Some(t1))),
        ]);
        assert_eq!(again, first);
        // The same keys taken afresh (their TTL passed: a new event with the same key): a
        // new name, which never replaces the earlier object.
        let later = name(&[
            Some(lock("a", t1 + 3_600_000, None)),
            Some(lock("b", t1 + 3_600_000, None)),
        ]);
        assert_ne!(later, first);
        // The same messages in another order (a redelivery in which one key came free
        // later): the same name, so the object is replaced.
        let swapped = name(&[
            Some(lock("b", t1 + 9, Some(t1))),
            Some(lock("a", t1 + 9, Some(t0))),
        ]);
        assert_eq!(swapped, first);
        // Other keys: another name.
        let other = name(&[Some(lock("a", t1, Some(t0))), Some(lock("c", t1, Some(t0)))]);
        // No key list is another's: ["ab"] vs ["a", "b"].
        let joined = name(&[Some(lock("ab", t1, Some(t0)))]);
        for n in [&other, &joined] {
            assert_ne!(*n, first);
            assert!(n.starts_with("out/2024/01/02/03/"), "{n}");
        }
        // Without an earlier attempt, the time is when the key was taken.
        assert!(name(&[Some(lock("a", t1, None))]).starts_with("out/2024/01/03/03/"));
        // An item without a lock: named as without locks (now, a random UUID), every time.
        let mixed = [Some(lock("a", t1, Some(t0))), None];
        let (m1, m2) = (name(&mixed), name(&mixed));
        assert_ne!(m1, m2);
        let now = Utc::now().format("out/%Y/%m/%d/").to_string();
        assert!(m1.starts_with(&now), "{m1}");
        // With auxiliary transforms: the batch's locks.
        let aux = |keys: &[&str]| {
            o.name(&Outgoing {
                locks: ItemLocks::Batch(
                    keys.iter()
                        .map(|&k| lock(k, t1, (k == "a").then_some(t0)))
                        .collect(),
                ),
                ..keyed("")
            })
            .unwrap()
        };
        assert_eq!(aux(&["a", "b"]), first, "the same keys, the same name");
        assert_ne!(aux(&[]), aux(&[]), "no lock: random");
    }

    /// Alerts "once per key per hour" into objects named by the key alone (no time part):
    /// the second hour's alert for a host must not replace the first hour's object.
    #[test]
    fn a_recurring_key_after_its_ttl_never_takes_an_earlier_objects_name() {
        let o = ObjectPerBatch {
            file_path: FilePath {
                prefix: "alerts".into(),
                uuid: true,
                ..FilePath::default()
            },
            ..ObjectPerBatch::default()
        };
        let t0 = 1_704_164_645_000;
        let hour = 3_600_000;
        let first = o.name(&locked(&[Some(lock("host-1", t0, None))])).unwrap();
        let crashed_and_taken_over = o
            .name(&locked(&[Some(lock("host-1", t0 + 70_000, Some(t0)))]))
            .unwrap();
        let next_hour = o
            .name(&locked(&[Some(lock("host-1", t0 + hour + 1, None))]))
            .unwrap();
        assert_eq!(
            crashed_and_taken_over, first,
            "a re-sent batch keeps its name"
        );
        assert_ne!(
            next_hour, first,
            "a new window's message gets its own object"
        );
    }

    /// One message fanned out into several batches of one send (split by count, size, time
    /// or batch key): each batch holds other copies of it, and gets its own object.
    #[test]
    fn batches_of_other_copies_of_one_message_get_other_names() {
        let o = ObjectPerBatch {
            file_path: FilePath {
                prefix: "out".into(),
                uuid: true,
                ..FilePath::default()
            },
            ..ObjectPerBatch::default()
        };
        let t = lock("f-1", 1_704_164_645_000, None);
        let batch = |key: &str, copy: u32| Outgoing {
            key: key.into(),
            copies: vec![vec![(t.clone(), copy)]],
            send: "s1".into(),
            ..locked(&[Some(t.clone())])
        };
        let first = o.name(&batch("", 0)).unwrap();
        assert_eq!(
            o.name(&batch("", 0)).unwrap(),
            first,
            "the same copy, again"
        );
        for other in [batch("", 1), batch("eu-west-1", 0)] {
            assert_ne!(o.name(&other).unwrap(), first);
        }
        let other_send = Outgoing {
            send: "s2".into(),
            ..batch("", 0)
        };
        assert_ne!(o.name(&other_send).unwrap(), first, "another send");
    }

    #[test]
    fn join_table() {
        let b = |s: &[&str]| {
            s.iter()
                .map(|i| Bytes::from(i.to_string()))
                .collect::<Vec<_>>()
        };
        for (items, sep, want) in [
            (b(&[]), "", ""),
            (b(&["a"]), "\n", "a"),
            (b(&["a", "b", "c"]), "", "abc"),
            (b(&["a", "b", "c"]), "\n", "a\nb\nc"),
            (b(&["a", "", "c"]), ", ", "a, , c"),
        ] {
            assert_eq!(
                join(&items, sep.as_bytes()),
                want.as_bytes(),
                "{items:?} {sep:?}"
            );
        }
    }

    #[test]
    fn names_table() {
        let fp = |prefix: &str, time_format: &str, uuid: bool, suffix: &str| FilePath {
            prefix: prefix.into(),
            time_format: time_format.into(),
            uuid,
            suffix: suffix.into(),
        };
        let year = Utc::now().format("%Y").to_string();
        // (file_path, use_batch_key_as_prefix, batch key, the name with each UUID as "U")
        let cases = [
            (
                fp("logs", "", false, ".json"),
                false,
                "k",
                "logs.json".to_string(),
            ),
            (fp("logs/", "", true, ".gz"), false, "k", "logs/U.gz".into()),
            (
                fp("logs", "2006", true, ""),
                false,
                "k",
                format!("logs/{year}/U"),
            ),
            // The key goes under the prefix (Substation replaces the prefix with it).
            (fp("logs", "", true, ""), true, "k", "logs/k/U".into()),
            (fp("logs", "", true, ""), true, "", "logs/U".into()),
            (fp("", "", true, ".x"), true, "a/b/", "a/b/U.x".into()),
            (fp("", "", false, ".x"), false, "", ".x".into()),
        ];
        let uuid =
            regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
                .unwrap();
        for (file_path, by_key, key, want) in cases {
            let o = ObjectPerBatch {
                file_path: file_path.clone(),
                use_batch_key_as_prefix: by_key,
                separator: Bytes::new(),
            };
            let got = o.name(&keyed(key)).unwrap();
            assert_eq!(uuid.replace_all(&got, "U"), want, "{file_path:?} {key:?}");
        }
        // A key from data never leaves the prefix: refused, naming the key and the setting.
        for key in ["../x", "/abs", "a/../../b", "a//b"] {
            let o = ObjectPerBatch {
                file_path: fp("logs", "", true, ""),
                use_batch_key_as_prefix: true,
                separator: Bytes::new(),
            };
            let e = o.name(&keyed(key)).unwrap_err().to_string();
            assert!(e.contains(&format!("batch key {key:?}")), "{e}");
            assert!(e.contains("use_batch_key_as_prefix"), "{e}");
            assert_eq!(o.check_key(key).unwrap_err(), e);
        }
        // A name that ends in a directory names nothing.
        let o = ObjectPerBatch {
            file_path: fp("logs/", "", false, ""),
            use_batch_key_as_prefix: true,
            separator: Bytes::new(),
        };
        assert_eq!(o.name(&keyed("")).unwrap(), "logs");
        let o = ObjectPerBatch {
            file_path: fp("", "2006/", false, ""),
            ..o
        };
        let e = o.name(&keyed("k")).unwrap_err().to_string();
        assert!(
            e.contains("file_path gives no file name for batch key \"k\""),
            "{e}"
        );
    }

    #[test]
    fn content_types_table() {
        for (data, want) in [
            (&b"\x1f\x8b\x08\x00rest"[..], "application/gzip"),
            (b"\x28\xb5\x2f\xfdrest", "application/zstd"),
            (b"BZh91AY", "application/x-bzip2"),
            (b"\xff\x06\x00\x00sNaPpY", "application/x-snappy-framed"),
            (b"PK\x03\x04", "application/zip"),
            (b"PAR1....", "application/vnd.apache.parquet"),
            (b"{\"a\":1}\n{\"a\":2}\n", "text/plain; charset=utf-8"),
            (b"", "text/plain; charset=utf-8"),
            ("naïve\tcafé\r\n".as_bytes(), "text/plain; charset=utf-8"),
            (b"\x00\x01\x02", "application/octet-stream"),
            (b"caf\xc3", "text/plain; charset=utf-8"),
            (b"\xc3\x28", "application/octet-stream"),
        ] {
            assert_eq!(content_type(data), want, "{data:?}");
        }
        // Only the first 512 bytes are looked at; a character cut there is fine.
        let mut long = "é".repeat(256).into_bytes();
        long.insert(0, b'x');
        long.push(0);
        assert_eq!(content_type(&long), "text/plain; charset=utf-8");
    }
}
