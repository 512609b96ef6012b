//! The item store interface: what `enrich_kv_store_*` asks of a store, and how a store
//! fails. The stores are its siblings; [`super::item_store`] builds them from a config.

use sluice_engine::{Value, async_trait};

/// An item store's failure.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    /// The store cannot be written.
    #[error("{store}: {operation} is not supported: the store is read-only")]
    ReadOnly {
        /// The store, as [`ItemStore::describe`] gives it.
        store: String,
        /// `set` or `set_add`.
        operation: &'static str,
    },
    /// The key cannot be looked up in this store (e.g. not an IP address for `mmdb`).
    #[error("{store}: bad key {key:?}: {why}")]
    BadKey {
        /// The store.
        store: String,
        /// The key as given.
        key: String,
        /// Why.
        why: String,
    },
    /// The store's file could not be read or parsed.
    #[error("{store}: {why}")]
    Load {
        /// The store.
        store: String,
        /// What went wrong, naming the file.
        why: String,
    },
    /// The store (a service) failed, after its own retries.
    #[error("{0}")]
    Failed(String),
}

/// Where `enrich_kv_store_*` items are kept. Keys arrive with their prefix.
#[async_trait]
pub trait ItemStore: Send + Sync + 'static {
    /// A short description for errors, e.g. `csv_file users.csv`.
    fn describe(&self) -> String;

    /// The value under `key`, `None` when there is none (or its TTL has passed).
    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError>;

    /// Stores `value` under `key`, replacing what was there; `ttl` (epoch seconds) is when
    /// it stops being returned, `None` for never. A read-only store (the file stores) keeps
    /// this default, which refuses.
    async fn set(&self, key: &str, value: Value, ttl: Option<i64>) -> Result<(), ItemError> {
        let _ = (key, value, ttl);
        Err(ItemError::ReadOnly {
            store: self.describe(),
            operation: "set",
        })
    }

    /// Adds `values` to the set of strings under `key` (creating it), and sets its TTL
    /// when `ttl` is given (a set without one keeps the TTL it had). Refused by default,
    /// like [`ItemStore::set`].
    async fn set_add(
        &self,
        key: &str,
        values: Vec<String>,
        ttl: Option<i64>,
    ) -> Result<(), ItemError> {
        let _ = (key, values, ttl);
        Err(ItemError::ReadOnly {
            store: self.describe(),
            operation: "set_add",
        })
    }

    /// Lets go of what the store holds that it can get again (a file store forgets its
    /// file and reads it anew on next use); `close_kv_store` calls it at every ctrl.
    async fn close(&self) {}
}

/// The strings `set_add` adds for `v`: each element's text for an array (a string as
/// itself, anything else as its JSON), the value's text otherwise.
pub fn set_members(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a
            .iter()
            .map(|e| sluice_engine::value::to_text(e).into_owned())
            .collect(),
        other => vec![sluice_engine::value::to_text(other).into_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_engine::json;

    #[test]
    fn set_members_are_texts() {
        assert_eq!(set_members(&json!("a")), vec!["a"]);
        assert_eq!(set_members(&json!(1.5)), vec!["1.5"]);
        assert_eq!(set_members(&json!(["a", 2, true])), vec!["a", "2", "true"]);
        assert_eq!(set_members(&json!({"k": 1})), vec![r#"{"k":1}"#]);
        assert!(set_members(&json!([])).is_empty());
    }
}
