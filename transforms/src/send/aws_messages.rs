//! What the SQS and SNS sends share: their `object` settings, the ids of FIFO messages, the
//! text rules of a message body, and reading a batch call's per-entry results.
//!
//! Both APIs take up to 10 entries per call, each with an `Id` unique within the call, and
//! answer by `Id` (`Successful[]` and `Failed[]`), not by position. The sends number the
//! entries of a call `0`, `1`, ... in the order sent, and [`results_by_id`] turns the
//! answer into one [`RecordResult`] per entry for
//! [`put_with_retries`](super::aws_records::put_with_retries); an entry the answer does not
//! mention counts as failed.
//!
//! FIFO queues and topics (names ending in `.fifo`) need a `MessageGroupId` and, unless
//! content-based deduplication is on, a `MessageDeduplicationId` per message:
//!
//! - **Group**: the batch key (`object.batch_key`) when the batch has one, so that each
//!   key's messages stay in order; otherwise one random id per batch, as Substation does
//!   (messages of different batches may then be received out of order: set a batch key
//!   for order).
//! - **Deduplication**: the text of the value at `object.deduplication_key` in the item's
//!   data (sluice's setting), else (no such setting, or no value there) the hex SHA-256 of
//!   the data. So a message sent again (a retry of a call whose answer was lost, a
//!   `meta_retry`, a redelivered input) within the destination's 5-minute deduplication
//!   interval is accepted but not delivered twice. Substation sets no deduplication id, so
//!   its sends to FIFO destinations fail unless content-based deduplication is on.
//!
//! Both ids may hold 1 to 128 of the ASCII letters, digits and punctuation; a value that
//! does not fit is replaced by its hex SHA-256 (64 characters), so equal values still give
//! equal ids.
//!
//! Order: the messages of a call go in batch order, but a message that failed in a call and
//! is sent again lands after the messages of that call that were accepted; within a group,
//! order holds except around such a retry.

use bytes::Bytes;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sluice_engine::message::Target;
use sluice_engine::{Build, ConfigError, Key, Message, value};

use super::aws_records::{RecordResult, non_empty};

/// Most entries in one `SendMessageBatch` or `PublishBatch` call.
pub(crate) const MAX_ENTRIES: usize = 10;
/// Most characters of a `MessageGroupId` or `MessageDeduplicationId`.
pub(crate) const MAX_FIFO_ID: usize = 128;

/// `object`: the keys every send takes, plus sluice's `deduplication_key`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct MessageObject {
    /// Not used (the library's shared `object` defaults include it).
    pub source_key: Option<String>,
    /// Not used (the library's shared `object` defaults include it).
    pub target_key: Option<String>,
    /// What partitions batches; FIFO destinations use it as the message group.
    pub batch_key: Option<String>,
    /// Where each message's deduplication id is read (sluice's own setting; FIFO only).
    pub deduplication_key: Option<String>,
}

/// Whether a queue or topic name is a FIFO one.
pub(crate) fn is_fifo(name: &str) -> bool {
    name.ends_with(".fifo")
}

/// Whether `id` may be a `MessageGroupId` or `MessageDeduplicationId` as it is: 1 to 128
/// ASCII letters, digits and punctuation.
pub(crate) fn valid_fifo_id(id: &str) -> bool {
    (1..=MAX_FIFO_ID).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// `value` as a FIFO id: itself when valid, else its hex SHA-256.
pub(crate) fn fifo_id(value: &str) -> String {
    if valid_fifo_id(value) {
        value.to_string()
    } else {
        sha256_hex(value.as_bytes())
    }
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The ids the messages of a destination get.
#[derive(Debug, Clone)]
pub(crate) enum MessageIds {
    /// A standard queue or topic: no group or deduplication ids.
    Standard,
    /// A FIFO queue or topic; deduplication ids from the value at this key, if set.
    Fifo(Option<Key>),
}

/// The FIFO ids of one batch's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FifoIds {
    /// The `MessageGroupId` of every message of the batch.
    pub group: String,
    /// The `MessageDeduplicationId` of each message, in order.
    pub dedup: Vec<String>,
}

impl MessageIds {
    /// Reads `object.deduplication_key` for the destination `name` (FIFO or not).
    pub(crate) fn from_settings(
        b: &Build<'_>,
        name: &str,
        deduplication_key: Option<String>,
    ) -> Result<Self, ConfigError> {
        let key = match non_empty(deduplication_key) {
            None => None,
            Some(k) => {
                let key = b.key("object.deduplication_key", &k)?;
                if key.target() == Target::Meta {
                    return Err(b.field_error(
                        "object.deduplication_key",
                        "must be a key in the data: a send keeps no metadata of the messages it batches",
                    ));
                }
                Some(key)
            }
        };
        if !is_fifo(name) {
            if key.is_some() {
                b.warn(format!(
                    "object.deduplication_key is set but {name} is not a FIFO queue or topic \
                     (its name does not end in .fifo): no deduplication ids are sent"
                ));
            }
            return Ok(MessageIds::Standard);
        }
        Ok(MessageIds::Fifo(key))
    }

    /// The FIFO ids of a batch with key `batch_key`, or `None` for a standard destination.
    pub(crate) fn of(&self, batch_key: &str, items: &[Bytes]) -> Option<FifoIds> {
        let MessageIds::Fifo(key) = self else {
            return None;
        };
        let group = if batch_key.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            fifo_id(batch_key)
        };
        let dedup = items.iter().map(|i| dedup_id(key.as_ref(), i)).collect();
        Some(FifoIds { group, dedup })
    }
}

/// The deduplication id of `item`: the text of the value at `key`, else the hex SHA-256
/// of the data.
fn dedup_id(key: Option<&Key>, item: &Bytes) -> String {
    let value = key.and_then(|k| {
        Message::new(item.clone())
            .get(k)
            .map(|v| value::to_text(&v).into_owned())
    });
    match value {
        Some(v) if !v.is_empty() => fifo_id(&v),
        _ => sha256_hex(item),
    }
}

/// Checks that `item` can be a message body: not empty, UTF-8 text, and (`xml_chars`)
/// only the characters XML 1.0 allows, as SQS requires (`#x9 | #xA | #xD | #x20-#xD7FF |
/// #xE000-#xFFFD | #x10000-#x10FFFF`). The error is the rule broken, to follow the
/// destination's name (`takes no empty message`).
pub(crate) fn check_text(item: &[u8], xml_chars: bool) -> Result<(), String> {
    if item.is_empty() {
        return Err("takes no empty message".to_string());
    }
    let text = std::str::from_utf8(item).map_err(|e| {
        format!(
            "takes only UTF-8 text; the data is not UTF-8 (at byte {})",
            e.valid_up_to()
        )
    })?;
    if xml_chars && let Some((at, c)) = text.char_indices().find(|&(_, c)| !xml_char(c)) {
        return Err(format!(
            "takes only the characters XML allows (#x9 | #xA | #xD | #x20-#xD7FF | \
             #xE000-#xFFFD | #x10000-#x10FFFF); the data holds U+{:04X} at byte {at}",
            c as u32
        ));
    }
    Ok(())
}

/// Whether XML 1.0 allows `c` (a Rust `char` is never a surrogate).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// The `Id` of the entry at `pos` in a call.
pub(crate) fn entry_id(pos: usize) -> String {
    pos.to_string()
}

/// One message of a call as `SendMessageBatch` and `PublishBatch` both take it, before it
/// becomes the SDK's entry type.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    /// Its `Id` ([`entry_id`] of its position in the call).
    pub id: String,
    /// Its text (the item, checked to be UTF-8 when it arrived).
    pub text: std::borrow::Cow<'a, str>,
    /// Its `MessageGroupId` (FIFO destinations).
    pub group: Option<&'a str>,
    /// Its `MessageDeduplicationId` (FIFO destinations).
    pub dedup: Option<&'a str>,
}

/// The entries of a call that sends `items[i]` for each `i` of `pending`, in that order;
/// `fifo` is the call's group id and its items' deduplication ids (indexed like `items`).
pub(crate) fn entries<'a>(
    pending: &'a [usize],
    items: &'a [Bytes],
    fifo: Option<(&'a str, &'a [String])>,
) -> impl Iterator<Item = Entry<'a>> + 'a {
    pending.iter().enumerate().map(move |(pos, &i)| Entry {
        id: entry_id(pos),
        text: String::from_utf8_lossy(&items[i]),
        group: fifo.map(|(group, _)| group),
        dedup: fifo.map(|(_, dedup)| dedup[i].as_str()),
    })
}

/// One result per entry of a call of `count` entries (numbered by [`entry_id`]) from the
/// answer's `Successful` ids and `Failed` (id, code, message) entries. An entry the answer
/// does not mention failed (`NoResult`).
pub(crate) fn results_by_id<'a>(
    count: usize,
    successful: impl IntoIterator<Item = &'a str>,
    failed: impl IntoIterator<Item = (&'a str, &'a str, Option<&'a str>)>,
) -> Vec<RecordResult> {
    let mut out: Vec<RecordResult> = vec![
        Some((
            "NoResult".to_string(),
            "the answer has no result for this entry".to_string(),
        ));
        count
    ];
    let slot = |id: &str| id.parse::<usize>().ok().filter(|&i| i < count);
    for id in successful {
        if let Some(i) = slot(id) {
            out[i] = None;
        }
    }
    for (id, code, message) in failed {
        if let Some(i) = slot(id) {
            let code = if code.is_empty() { "Failed" } else { code };
            out[i] = Some((code.to_string(), message.unwrap_or("").to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_ids_table() {
        let long = "k".repeat(129);
        let table: &[(&str, bool)] = &[
            ("a", true),
            ("user-1/x:y!~", true),
            (&long[..128], true),
            (&long, false),
            ("", false),
            ("has space", false),
            ("ünï", false),
            ("tab\t", false),
        ];
        for (id, valid) in table {
            assert_eq!(valid_fifo_id(id), *valid, "{id:?}");
            let got = fifo_id(id);
            if *valid {
                assert_eq!(&got, id);
            } else {
                assert_eq!(got, sha256_hex(id.as_bytes()), "{id:?}");
                assert_eq!(got.len(), 64);
                assert!(valid_fifo_id(&got));
            }
        }
    }

    fn items(data: &[&str]) -> Vec<Bytes> {
        data.iter().map(|d| Bytes::from(d.to_string())).collect()
    }

    #[test]
    fn message_ids_per_batch() {
        let data = items(&[
            r#"{"id":"a1","v":1}"#,
            r#"{"v":2}"#,
            r#"{"id":""}"#,
            "not json",
        ]);
        // Standard: nothing.
        assert_eq!(MessageIds::Standard.of("k", &data), None);
        // FIFO without a key: the data's SHA-256; the batch key is the group.
        let ids = MessageIds::Fifo(None).of("tenant-1", &data).unwrap();
        assert_eq!(ids.group, "tenant-1");
        let hashes: Vec<String> = data.iter().map(|d| sha256_hex(d)).collect();
        assert_eq!(ids.dedup, hashes);
        // With a key: its value, else the SHA-256 of the data.
        let key = Key::parse("id").unwrap();
        let ids = MessageIds::Fifo(Some(key)).of("", &data).unwrap();
        assert_eq!(
            ids.dedup,
            vec![
                "a1".to_string(),
                hashes[1].clone(),
                hashes[2].clone(),
                hashes[3].clone()
            ]
        );
        // No batch key: one random group per batch, the same for all its messages.
        assert_eq!(ids.group.len(), 36);
        let again = MessageIds::Fifo(None).of("", &data).unwrap();
        assert_ne!(ids.group, again.group);
        // A batch key that cannot be a group id is hashed.
        let ids = MessageIds::Fifo(None).of("a b", &data).unwrap();
        assert_eq!(ids.group, sha256_hex(b"a b"));
        // A number at the key is its text.
        let key = Key::parse("n").unwrap();
        let ids = MessageIds::Fifo(Some(key))
            .of("", &items(&[r#"{"n":42}"#]))
            .unwrap();
        assert_eq!(ids.dedup, vec!["42"]);
    }

    #[test]
    fn text_rules_table() {
        // (data, XML characters only, the error's distinctive part or "" for Ok)
        let table: &[(&[u8], bool, &str)] = &[
            (b"hello", true, ""),
            ("tab\tnew\nline\r ünï 😀".as_bytes(), true, ""),
            (b"", true, "takes no empty message"),
            (b"", false, "takes no empty message"),
            (b"ok \xff", true, "not UTF-8 (at byte 3)"),
            (b"ok \xff", false, "not UTF-8 (at byte 3)"),
            (b"nul \x00", true, "holds U+0000 at byte 4"),
            (b"nul \x00", false, ""),
            ("x\u{FFFE}".as_bytes(), true, "holds U+FFFE at byte 1"),
            (b"esc \x1b", true, "holds U+001B"),
        ];
        for (data, xml, want) in table {
            let got = check_text(data, *xml);
            if want.is_empty() {
                assert_eq!(got, Ok(()), "{data:?}");
            } else {
                let e = got.unwrap_err();
                assert!(e.contains(want), "{data:?}: {e}");
                assert!(e.starts_with("takes "), "{e}");
            }
        }
    }

    #[test]
    fn entries_are_numbered_in_call_order_with_their_ids() {
        let items = items(&["a", "b", "c"]);
        let dedup: Vec<String> = ["da", "db", "dc"].map(String::from).to_vec();
        let standard: Vec<_> = entries(&[2, 0], &items, None).collect();
        assert_eq!(
            standard,
            [
                Entry {
                    id: "0".into(),
                    text: "c".into(),
                    group: None,
                    dedup: None
                },
                Entry {
                    id: "1".into(),
                    text: "a".into(),
                    group: None,
                    dedup: None
                },
            ]
        );
        let fifo: Vec<_> = entries(&[1, 2], &items, Some(("g", &dedup))).collect();
        assert_eq!(
            fifo,
            [
                Entry {
                    id: "0".into(),
                    text: "b".into(),
                    group: Some("g"),
                    dedup: Some("db")
                },
                Entry {
                    id: "1".into(),
                    text: "c".into(),
                    group: Some("g"),
                    dedup: Some("dc")
                },
            ]
        );
    }

    #[test]
    fn results_are_read_by_id() {
        let got = results_by_id(
            4,
            ["0", "2", "99", "x"],
            [("1", "InternalError", Some("boom")), ("7", "X", None)],
        );
        assert_eq!(
            got,
            vec![
                None,
                Some(("InternalError".into(), "boom".into())),
                None,
                Some((
                    "NoResult".into(),
                    "the answer has no result for this entry".into()
                )),
            ]
        );
        assert_eq!(entry_id(3), "3");
    }
}
