//! `utility_random`: true or false at random, each with probability one half.
//!
//! Substation compatibility: the same fair coin, without Substation's unsynchronised shared
//! random source (each thread has its own generator). It has no settings (Substation's
//! library drops the argument of `sub.cnd.util.random()`; sluice's passes it on, so stray
//! keys are reported). A ctrl message is false, as for every leaf condition.

use serde::Deserialize;
use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

/// Settings of `utility_random`: none.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `utility_random` condition.
pub(crate) struct UtilityRandom;

impl UtilityRandom {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(UtilityRandom)
    }
}

impl Condition for UtilityRandom {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        Ok(!msg.is_ctrl() && fastrand::bool())
    }
}

/// What registers the `utility_random` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_random",
    aliases: &[],
    library: "sub.cnd.util.random",
    summary: "true with probability ½",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::condition::tests::*;
    use crate::registry;
    use sluice_engine::json;

    #[test]
    fn cases() {
        let c = registry()
            .build_condition(&json!({"type": "utility_random"}), "c")
            .unwrap()
            .value;
        // Both outcomes, in roughly equal numbers: 4000 fair flips stay within 1700..2300
        // except with a probability far below 1e-15.
        for input in ["", "x", r#"{"a":1}"#] {
            let m = data(input);
            let trues = (0..4000).filter(|_| c.test(&m).unwrap()).count();
            assert!((1700..=2300).contains(&trues), "{input:?}: {trues} of 4000");
        }
        ctrl_is_false("utility_random", json!({}));
        // A ctrl message is never true, however often it is asked.
        let ctrl = sluice_engine::Message::ctrl();
        assert!((0..200).all(|_| !c.test(&ctrl).unwrap()));
    }

    #[test]
    fn config_errors() {
        let err = build_error("utility_random", json!(["x"]));
        assert!(err.to_string().contains("utility_random"), "{err}");
    }
}
