//! `meta_all`, `meta_any` and `meta_none` (aliases `all`, `any`, `none`): conditions over
//! other conditions.
//!
//! Each takes `conditions` (a list of condition configs) and an optional
//! `object.source_key`. Without a source key the inner conditions are evaluated on the
//! message itself. With one, a missing value is false; an array value has each element
//! evaluated as its own message (strings as their raw text, other values as JSON, the
//! metadata copied, so `meta ...` keys still work); any other value is evaluated as one such
//! message. Evaluation stops at the first element or condition that decides the result, and
//! the first error is returned.

pub(crate) mod all;
pub(crate) mod any;
pub(crate) mod none;

use std::sync::Arc;

use serde::Deserialize;
use sluice_engine::{Build, Condition, ConfigError, Key, Message, TransformError, Value, value};

use super::SourceSettings;

/// Settings of `meta_all`, `meta_any` and `meta_none`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The inner conditions, each `{type, settings}`.
    pub conditions: Vec<Value>,
    /// `source_key`: a value (or array of values) to evaluate instead of the message.
    pub object: SourceSettings,
}

/// How the inner results combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quantifier {
    /// Every element satisfies every condition.
    All,
    /// Some element satisfies some condition.
    Any,
    /// No element satisfies any condition.
    None,
}

/// The part all three share: the inner conditions and the source key.
pub(crate) struct Inner {
    conditions: Vec<Arc<dyn Condition>>,
    source: Option<Key>,
    quantifier: Quantifier,
}

impl Inner {
    /// Decodes the settings and builds the inner conditions (`conditions[i]` in errors).
    pub(crate) fn build(b: &Build<'_>, quantifier: Quantifier) -> Result<Inner, ConfigError> {
        let s: Settings = b.settings()?;
        if quantifier == Quantifier::None && s.conditions.is_empty() {
            return Err(b.field_error(
                "conditions",
                "missing required option: at least one condition must be set",
            ));
        }
        let conditions = s
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| b.condition(&format!("conditions[{i}]"), c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Inner {
            conditions,
            source: b.opt_key("object.source_key", &s.object.source_key)?,
            quantifier,
        })
    }

    /// Evaluates the conditions on the message or on the source value's elements.
    pub(crate) fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        let Some(key) = &self.source else {
            return self.test_one(msg);
        };
        let Some(v) = msg.get(key) else {
            return Ok(false);
        };
        let elements: &[Value] = match v.as_ref() {
            Value::Array(a) => a,
            other => std::slice::from_ref(other),
        };
        for e in elements {
            let sub = element_message(msg, e);
            let hit = self.test_one(&sub)?;
            match self.quantifier {
                Quantifier::All if !hit => return Ok(false),
                Quantifier::Any if hit => return Ok(true),
                Quantifier::None if !hit => return Ok(false),
                _ => {}
            }
        }
        Ok(self.quantifier != Quantifier::Any)
    }

    /// Evaluates the conditions on one message: AND, OR, or NOR.
    fn test_one(&self, msg: &Message) -> Result<bool, TransformError> {
        match self.quantifier {
            Quantifier::All => {
                for c in &self.conditions {
                    if !c.test(msg)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Quantifier::Any | Quantifier::None => {
                for c in &self.conditions {
                    if c.test(msg)? {
                        return Ok(self.quantifier == Quantifier::Any);
                    }
                }
                Ok(self.quantifier == Quantifier::None)
            }
        }
    }
}

/// A message whose data is `v` (strings raw, other values as JSON) with `msg`'s metadata.
fn element_message(msg: &Message, v: &Value) -> Message {
    let mut m = match v {
        Value::String(_) => Message::new(value::to_bytes(v)),
        other => Message::from_value(other.clone()),
    };
    m.set_metadata(msg.metadata().clone());
    m
}
