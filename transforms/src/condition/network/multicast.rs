//! `network_ip_multicast`: Go's `IsMulticast`: IPv4 `224.0.0.0/4`; IPv6 `ff00::/8`.
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_multicast` condition.
pub(crate) struct NetworkIpMulticast(IpCondition);

impl NetworkIpMulticast {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_multicast).map(NetworkIpMulticast)
    }
}

impl Condition for NetworkIpMulticast {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsMulticast`: IPv4 `224.0.0.0/4`; IPv6 `ff00::/8`.
pub(crate) fn is_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] & 0xf0 == 0xe0,
        IpAddr::V6(v6) => v6.octets()[0] == 0xff,
    }
}

/// What registers the `network_ip_multicast` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_multicast",
    aliases: &[],
    library: "sub.cnd.net.ip.multicast",
    summary: "Go's `IsMulticast`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_multicast",
            &[
                ("224.0.0.1", true),
                ("239.255.255.255", true),
                ("ff02::1", true),
                ("ff0e::1", true),
                ("::ffff:230.1.2.3", true),
                ("223.255.255.255", false),
                ("240.0.0.1", false),
                ("fe80::1", false),
                ("2001:db8::1", false),
            ],
        );
    }
}
