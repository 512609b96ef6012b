//! `network_ip_unspecified`: Go's `IsUnspecified`: `0.0.0.0` or `::` (and `::ffff:0.0.0.0`).
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_unspecified` condition.
pub(crate) struct NetworkIpUnspecified(IpCondition);

impl NetworkIpUnspecified {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_unspecified).map(NetworkIpUnspecified)
    }
}

impl Condition for NetworkIpUnspecified {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsUnspecified`: `0.0.0.0` or `::` (and `::ffff:0.0.0.0`).
pub(crate) fn is_unspecified(ip: IpAddr) -> bool {
    ip.is_unspecified()
}

/// What registers the `network_ip_unspecified` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_unspecified",
    aliases: &[],
    library: "sub.cnd.net.ip.unspecified",
    summary: "Go's `IsUnspecified`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_unspecified",
            &[
                ("0.0.0.0", true),
                ("::", true),
                ("0:0:0:0:0:0:0:0", true),
                ("::ffff:0.0.0.0", true),
                ("0.0.0.1", false),
                ("::1", false),
                ("8.8.8.8", false),
            ],
        );
    }
}
