//! `network_ip_unicast`: Global unicast (Go's `IsGlobalUnicast`, which includes private addresses) or link-local unicast (`IsLinkLocalUnicast`), as Substation defines it. Loopback, unspecified, multicast and the IPv4 broadcast address are not.
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_unicast` condition.
pub(crate) struct NetworkIpUnicast(IpCondition);

impl NetworkIpUnicast {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_unicast).map(NetworkIpUnicast)
    }
}

impl Condition for NetworkIpUnicast {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Global unicast (Go's `IsGlobalUnicast`, which includes private addresses) or link-local unicast (`IsLinkLocalUnicast`), as Substation defines it. Loopback, unspecified, multicast and the IPv4 broadcast address are not.
pub(crate) fn is_unicast(ip: IpAddr) -> bool {
    super::global_unicast::is_global_unicast(ip)
        || super::link_local_unicast::is_link_local_unicast(ip)
}

/// What registers the `network_ip_unicast` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_unicast",
    aliases: &[],
    library: "sub.cnd.net.ip.unicast",
    summary: "global unicast or link-local unicast",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_unicast",
            &[
                ("8.8.8.8", true),
                ("192.168.0.1", true),
                ("169.254.1.1", true),
                ("fe80::1", true),
                ("2001:db8::1", true),
                ("127.0.0.1", false),
                ("::1", false),
                ("0.0.0.0", false),
                ("255.255.255.255", false),
                ("224.0.0.1", false),
                ("ff02::1", false),
            ],
        );
    }
}
