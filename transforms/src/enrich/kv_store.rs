//! What the three `enrich_kv_store_*` transforms share: the store, the key (`prefix:` and
//! the value at `object.source_key`), the TTL of writes, and `close_kv_store` at ctrl.
//!
//! As in Substation, `prefix` makes the key `prefix:key`, and the TTL (epoch seconds) of a
//! write is: the value at `object.ttl_key` (seconds, or ms, µs or ns, truncated to
//! seconds) plus `ttl_offset` when `ttl_key` is set; now plus `ttl_offset` when only a
//! non-zero offset is set; none otherwise.
//!
//! Where sluice differs from Substation: a message without a value (or with null) at
//! `object.source_key` passes unchanged and nothing is read or written (Substation looks
//! up, or writes, the key `""`, or `prefix:`); a `ttl_key` whose value is missing or not a
//! whole number is an error naming it (Substation computes a TTL in 1970); the store's
//! errors name the store and the key. Without `close_kv_store` the transforms are
//! stateless and run on several messages at once; with it they see every ctrl message,
//! one message at a time, and close the store on each (a file store reads its file again
//! on next use).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use sluice_engine::settings::GoDuration;
use sluice_engine::{Build, ConfigError, Key, Message, TransformError, Value, value};

use crate::kv_store::item::{ItemError, ItemStore, item_store};
use crate::kv_store::truncate_to_seconds;

/// `object` of the `enrich_kv_store_*` transforms.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct KvObject {
    /// The key (item_get: to look up; item_set, set_add: to write).
    pub source_key: Option<String>,
    /// item_get: where the value goes; item_set, set_add: where the value to store is.
    pub target_key: Option<String>,
    /// item_set, set_add: the event time the TTL counts from.
    pub ttl_key: Option<String>,
}

/// Settings of `enrich_kv_store_item_get`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GetSettings {
    /// The kv store (`{type, settings}`), required.
    pub kv_store: Value,
    /// `source_key` and `target_key`, both required.
    pub object: GetObject,
    /// Put in front of every key, with a colon.
    pub prefix: String,
    /// Close the store at every ctrl message.
    pub close_kv_store: bool,
}

/// `object` of `enrich_kv_store_item_get` (no TTL).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GetObject {
    /// The key to look up.
    pub source_key: Option<String>,
    /// Where the value goes.
    pub target_key: Option<String>,
}

/// Settings of `enrich_kv_store_item_set` and `enrich_kv_store_set_add`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SetSettings {
    /// The kv store (`{type, settings}`), required.
    pub kv_store: Value,
    /// `source_key` and `target_key` (required), `ttl_key`.
    pub object: KvObject,
    /// Put in front of every key, with a colon.
    pub prefix: String,
    /// Added to the event time (`ttl_key`) or to now.
    pub ttl_offset: Option<GoDuration>,
    /// Close the store at every ctrl message.
    pub close_kv_store: bool,
}

/// The parts every `enrich_kv_store_*` transform has.
pub(crate) struct Common {
    pub(super) store: Arc<dyn ItemStore>,
    pub(super) source: Key,
    pub(super) target: Key,
    prefix: String,
    close: bool,
}

impl Common {
    /// The store, keys and options, checked; `what_source` and `what_target` say what the
    /// two keys are, for their "missing required option" errors.
    pub(crate) fn build(
        b: &Build<'_>,
        kv_store: &Value,
        object: (&Option<String>, &Option<String>),
        what: (&str, &str),
        prefix: String,
        close: bool,
    ) -> Result<Common, ConfigError> {
        if kv_store.is_null() {
            return Err(b.field_error(
                "kv_store",
                "missing required option: the kv store ({\"type\": ..., \"settings\": {...}})",
            ));
        }
        let store = item_store(b, "kv_store", kv_store)?;
        let source = b.opt_key("object.source_key", object.0)?.ok_or_else(|| {
            b.field_error(
                "object.source_key",
                format!("missing required option: {}", what.0),
            )
        })?;
        let target = b.opt_key("object.target_key", object.1)?.ok_or_else(|| {
            b.field_error(
                "object.target_key",
                format!("missing required option: {}", what.1),
            )
        })?;
        Ok(Common {
            store,
            source,
            target,
            prefix,
            close,
        })
    }

    /// The message's key (prefix included), `None` when it has no value at the source key.
    pub(crate) fn key(&self, msg: &Message) -> Option<String> {
        let v = msg.get(&self.source).filter(|v| !v.is_null())?;
        let raw = value::to_text(&v);
        Some(if self.prefix.is_empty() {
            raw.into_owned()
        } else {
            format!("{}:{raw}", self.prefix)
        })
    }

    /// Stateful (to see ctrl messages) only when the store is closed at each.
    pub(crate) fn is_stateful(&self) -> bool {
        self.close
    }

    /// Handles a ctrl message: closes the store if configured and passes the ctrl on.
    pub(crate) async fn ctrl(&self, msg: Message, out: &mut Vec<Message>) {
        if self.close {
            self.store.close().await;
        }
        out.push(msg);
    }
}

/// A store error as the transform's error.
pub(crate) fn failed(e: ItemError) -> TransformError {
    TransformError::failed(e.to_string())
}

/// The TTL of writes.
pub(crate) struct Ttl {
    key: Option<Key>,
    offset: i64,
}

impl Ttl {
    /// From `object.ttl_key` and `ttl_offset`.
    pub(crate) fn build(
        b: &Build<'_>,
        ttl_key: &Option<String>,
        offset: Option<GoDuration>,
    ) -> Result<Ttl, ConfigError> {
        Ok(Ttl {
            key: b.opt_key("object.ttl_key", ttl_key)?,
            offset: offset.map_or(0, |d| d.0.as_secs() as i64),
        })
    }

    /// The TTL (epoch seconds) of a write for `msg`, `None` for none.
    pub(crate) fn of(&self, msg: &Message) -> Result<Option<i64>, TransformError> {
        let Some(k) = &self.key else {
            if self.offset == 0 {
                return Ok(None);
            }
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            return Ok(Some(now + self.offset));
        };
        let bad = |what: &str| {
            TransformError::failed(format!(
                "object.ttl_key {:?}: {what}; the TTL counts from this event time (epoch seconds, ms, µs or ns)",
                k.as_str()
            ))
        };
        let v = msg
            .get(k)
            .filter(|v| !v.is_null())
            .ok_or_else(|| bad("no value in the message"))?;
        let t = match &*v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        }
        .ok_or_else(|| bad(&format!("{} is not a whole number", value::to_text(&v))))?;
        if t < 0 {
            return Err(bad("negative"));
        }
        Ok(Some(truncate_to_seconds(t) + self.offset))
    }
}
