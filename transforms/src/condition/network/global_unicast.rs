//! `network_ip_global_unicast`: Go's `IsGlobalUnicast`: any address that is not unspecified, loopback, multicast, link-local unicast or the IPv4 broadcast address `255.255.255.255`. Private (RFC 1918, ULA) and reserved addresses count as global unicast, as in Go.
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_global_unicast` condition.
pub(crate) struct NetworkIpGlobalUnicast(IpCondition);

impl NetworkIpGlobalUnicast {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_global_unicast).map(NetworkIpGlobalUnicast)
    }
}

impl Condition for NetworkIpGlobalUnicast {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsGlobalUnicast`: any address that is not unspecified, loopback, multicast, link-local unicast or the IPv4 broadcast address `255.255.255.255`. Private (RFC 1918, ULA) and reserved addresses count as global unicast, as in Go.
pub(crate) fn is_global_unicast(ip: IpAddr) -> bool {
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || super::link_local_unicast::is_link_local_unicast(ip)
        || matches!(ip, IpAddr::V4(v4) if v4.is_broadcast()))
}

/// What registers the `network_ip_global_unicast` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_global_unicast",
    aliases: &[],
    library: "sub.cnd.net.ip.global_unicast",
    summary: "Go's `IsGlobalUnicast`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_global_unicast",
            &[
                ("8.8.8.8", true),
                ("10.1.2.3", true),
                ("240.0.0.1", true),
                ("2001:db8::1", true),
                ("fd00::1", true),
                ("::ffff:8.8.8.8", true),
                ("255.255.255.255", false),
                ("0.0.0.0", false),
                ("127.0.0.1", false),
                ("224.0.0.1", false),
                ("169.254.1.1", false),
                ("fe80::1", false),
                ("ff02::1", false),
                ("::", false),
                ("::1", false),
            ],
        );
    }
}
