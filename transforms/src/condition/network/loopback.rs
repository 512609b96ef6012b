//! `network_ip_loopback`: Go's `IsLoopback`: IPv4 `127.0.0.0/8`; IPv6 `::1`.
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_loopback` condition.
pub(crate) struct NetworkIpLoopback(IpCondition);

impl NetworkIpLoopback {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_loopback).map(NetworkIpLoopback)
    }
}

impl Condition for NetworkIpLoopback {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsLoopback`: IPv4 `127.0.0.0/8`; IPv6 `::1`.
pub(crate) fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 127,
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// What registers the `network_ip_loopback` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_loopback",
    aliases: &[],
    library: "sub.cnd.net.ip.loopback",
    summary: "Go's `IsLoopback`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_loopback",
            &[
                ("127.0.0.1", true),
                ("127.255.0.9", true),
                ("::1", true),
                ("::ffff:127.0.0.1", true),
                ("128.0.0.1", false),
                ("::2", false),
                ("0.0.0.0", false),
                ("::", false),
            ],
        );
    }
}
