//! `network_ip_link_local_unicast`: Go's `IsLinkLocalUnicast`: IPv4 `169.254.0.0/16`; IPv6 `fe80::/10`.
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_link_local_unicast` condition.
pub(crate) struct NetworkIpLinkLocalUnicast(IpCondition);

impl NetworkIpLinkLocalUnicast {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_link_local_unicast).map(NetworkIpLinkLocalUnicast)
    }
}

impl Condition for NetworkIpLinkLocalUnicast {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsLinkLocalUnicast`: IPv4 `169.254.0.0/16`; IPv6 `fe80::/10`.
pub(crate) fn is_link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 169 && o[1] == 254
        }
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xfe && o[1] & 0xc0 == 0x80
        }
    }
}

/// What registers the `network_ip_link_local_unicast` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_link_local_unicast",
    aliases: &[],
    library: "sub.cnd.net.ip.link_local_unicast",
    summary: "Go's `IsLinkLocalUnicast`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_link_local_unicast",
            &[
                ("169.254.0.1", true),
                ("169.254.255.255", true),
                ("fe80::1", true),
                ("febf::1", true),
                ("::ffff:169.254.3.4", true),
                ("169.253.0.1", false),
                ("fec0::1", false),
                ("ff02::1", false),
                ("8.8.8.8", false),
            ],
        );
    }
}
