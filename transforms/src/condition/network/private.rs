//! `network_ip_private`: Go's `IsPrivate`: IPv4 `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918); IPv6 `fc00::/7` (unique local, RFC 4193). Loopback, link-local and shared (`100.64.0.0/10`) addresses are not private.
//!
//! See [`super`] for how the address is read and parsed (Go's `net.ParseIP` rules).

use std::net::IpAddr;

use sluice_engine::{Build, Condition, ConfigError, Message, TransformError};

use super::IpCondition;

/// The `network_ip_private` condition.
pub(crate) struct NetworkIpPrivate(IpCondition);

impl NetworkIpPrivate {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        IpCondition::build(b, is_private).map(NetworkIpPrivate)
    }
}

impl Condition for NetworkIpPrivate {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        self.0.test(msg)
    }
}

/// Go's `IsPrivate`: IPv4 `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918); IPv6 `fc00::/7` (unique local, RFC 4193). Loopback, link-local and shared (`100.64.0.0/10`) addresses are not private.
pub(crate) fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 10 || (o[0] == 172 && o[1] & 0xf0 == 16) || (o[0] == 192 && o[1] == 168)
        }
        IpAddr::V6(v6) => v6.octets()[0] & 0xfe == 0xfc,
    }
}

/// What registers the `network_ip_private` condition and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_ip_private",
    aliases: &[],
    library: "sub.cnd.net.ip.private",
    summary: "Go's `IsPrivate`",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    #[test]
    fn cases() {
        super::super::tests::run_ip_table(
            "network_ip_private",
            &[
                ("10.0.0.1", true),
                ("172.16.0.1", true),
                ("172.31.255.255", true),
                ("192.168.1.1", true),
                ("fc00::1", true),
                ("fdff::1", true),
                ("::ffff:10.1.1.1", true),
                ("172.32.0.1", false),
                ("172.15.0.1", false),
                ("192.169.0.1", false),
                ("100.64.0.1", false),
                ("127.0.0.1", false),
                ("fe80::1", false),
                ("8.8.8.8", false),
            ],
        );
    }
}
