//! `network_ip_valid`: the text parses as an IPv4 or IPv6 address (Go's `net.ParseIP` is not nil).
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_valid` condition.
pub(crate) struct NetworkIpValid(IpCondition);

impl NetworkIpValid {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_valid).map(NetworkIpValid)
    }
}

impl Condition for NetworkIpValid {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Every address that parsed is valid: parsing is the test.
pub(crate) fn is_valid(_: IpAddr) -> bool {
    true
}

/// What registers the `network_ip_valid` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_valid",
    aliases: &[],
    library: "sub.cnd.net.ip.valid",
    summary: "the text parses as an IP address",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_valid",
            &[
                ("8.8.8.8", true),
                ("0.0.0.0", true),
                ("::", true),
                ("2001:db8::8a2e:370:7334", true),
                ("::ffff:1.2.3.4", true),
                ("256.0.0.1", false),
                ("1.2.3", false),
                ("1.2.3.4.5", false),
                ("2001:db8:::1", false),
                ("gggg::1", false),
            ],
        );
    }
}
