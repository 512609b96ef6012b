//! `utility_drop`: drops every data message.
//!
//! Substation compatibility: the same; it is how a route ends (sends pass their input on).
//! A dropped message's acknowledgement tokens are released with it, so the message counts
//! as deliberately dropped ("done"), not failed. Ctrl messages pass (being stateless, it is
//! not even handed them by a pipeline).

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

/// Settings of `utility_drop` (none).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `utility_drop` transform.
pub(crate) struct UtilityDrop;

impl UtilityDrop {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(UtilityDrop)
    }
}

#[async_trait]
impl StatelessTransform for UtilityDrop {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
        }
        Ok(())
    }

    fn discards(&self) -> bool {
        true
    }
}

/// What registers the `utility_drop` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "utility_drop",
    aliases: &[],
    library: "sub.tf.util.drop",
    summary: "drops every data message",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::meta::test_support::{assert_status, tracked};
    use crate::registry;
    use sluice_engine::ack::AckStatus;
    use sluice_engine::{Message, Pipeline, json, testing};

    #[test]
    fn drops_data_and_releases_it_as_done() {
        let t = testing::build(&registry(), json!({"type": "utility_drop"})).unwrap();
        assert_eq!(
            testing::run(t.clone(), &["a", "{}", ""]).unwrap(),
            Vec::<String>::new()
        );
        let p = Pipeline::new(vec![("drop", t)]);
        let (m, tracker) = tracked("a");
        let out = testing::block_on(p.apply(vec![m, Message::ctrl()])).unwrap();
        assert!(out.len() == 1 && out[0].is_ctrl());
        assert_status(&tracker, AckStatus::Delivered, "dropped on purpose");
    }
}
