//! `network_ip_link_local_multicast`: Go's `IsLinkLocalMulticast`: IPv4 `224.0.0.0/24`; IPv6 multicast with link-local scope (`ffX2::/16` for any flags X, e.g. `ff02::1`).
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_link_local_multicast` condition.
pub(crate) struct NetworkIpLinkLocalMulticast(IpCondition);

impl NetworkIpLinkLocalMulticast {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_link_local_multicast).map(NetworkIpLinkLocalMulticast)
    }
}

impl Condition for NetworkIpLinkLocalMulticast {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsLinkLocalMulticast`: IPv4 `224.0.0.0/24`; IPv6 multicast with link-local scope (`ffX2::/16` for any flags X, e.g. `ff02::1`).
pub(crate) fn is_link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 224 && o[1] == 0 && o[2] == 0
        }
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xff && o[1] & 0x0f == 0x02
        }
    }
}

/// What registers the `network_ip_link_local_multicast` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_link_local_multicast",
    aliases: &[],
    library: "sub.cnd.net.ip.link_local_multicast",
    summary: "Go's `IsLinkLocalMulticast`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_link_local_multicast",
            &[
                ("224.0.0.1", true),
                ("224.0.0.251", true),
                ("ff02::1", true),
                ("ff12::1", true),
                ("::ffff:224.0.0.9", true),
                ("224.0.1.1", false),
                ("239.1.1.1", false),
                ("ff05::2", false),
                ("fe80::1", false),
                ("10.0.0.1", false),
            ],
        );
    }
}
