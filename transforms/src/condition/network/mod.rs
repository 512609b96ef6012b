//! The `network_ip_*` conditions: a predicate on an IP address read from the data or from
//! `object.source_key` (its text).
//!
//! Substation compatibility: the predicates are Go's `net.IP` methods, defined here exactly
//! (one per file). Parsing is Go's `net.ParseIP`: dotted-quad IPv4 without leading zeros, or
//! IPv6 (an IPv4 address may end it); no zones (`%eth0`), no CIDR suffixes, no surrounding
//! whitespace. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is judged as the IPv4 address,
//! as Go does. Text that is not an address is false for every predicate (not an error), a
//! missing source value is false, and a ctrl message is false.

pub(crate) mod global_unicast;
pub(crate) mod link_local_multicast;
pub(crate) mod link_local_unicast;
pub(crate) mod loopback;
pub(crate) mod multicast;
pub(crate) mod private;
pub(crate) mod unicast;
pub(crate) mod unspecified;
pub(crate) mod valid;

use std::net::IpAddr;

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, Message, TransformError};

use super::{Source, SourceSettings};

/// Settings of every `network_ip_*` condition.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key`: where the address is read; absent means the data.
    pub object: SourceSettings,
}

/// What the `network_ip_*` conditions share: where the address is, and the predicate.
pub(crate) struct IpCondition {
    source: Source,
    predicate: fn(IpAddr) -> bool,
}

impl IpCondition {
    pub(crate) fn build(
        b: &Build<'_>,
        predicate: fn(IpAddr) -> bool,
    ) -> Result<IpCondition, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(IpCondition {
            source: Source::new(b, &s.object.source_key)?,
            predicate,
        })
    }

    pub(crate) fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        let Some(input) = self.source.read(msg) else {
            return Ok(false);
        };
        Ok(parse(&input.bytes()).is_some_and(self.predicate))
    }
}

/// Go's `net.ParseIP`, with IPv4-mapped IPv6 addresses turned into IPv4 ones.
pub(crate) fn parse(b: &[u8]) -> Option<IpAddr> {
    let ip: IpAddr = std::str::from_utf8(b).ok()?.parse().ok()?;
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::condition::tests::{Case, Want, data, run_table};
    use sluice_engine::json;

    /// Runs `(address, expected)` pairs through `ty` in data mode and in object mode, and the
    /// checks every `network_ip_*` condition shares.
    pub(crate) fn run_ip_table(ty: &str, addrs: &[(&'static str, bool)]) {
        let mut cases: Vec<Case> = Vec::new();
        for &(addr, want) in addrs {
            let w = if want { Want::T } else { Want::F };
            cases.push((addr, json!({}), data(addr), w));
            cases.push((
                addr,
                json!({"object": {"source_key": "ip"}}),
                data(&json!({ "ip": addr }).to_string()),
                w,
            ));
            cases.push((
                addr,
                json!({"object": {"source_key": "meta ip"}}),
                crate::condition::tests::with_meta("", json!({ "ip": addr })),
                w,
            ));
        }
        for bad in [
            "not an ip",
            "",
            "10.0.0.1/8",
            "fe80::1%eth0",
            " 127.0.0.1",
            "010.0.0.1",
        ] {
            cases.push((bad, json!({}), data(bad), Want::F));
        }
        cases.push((
            "missing key",
            json!({"object": {"source_key": "ip"}}),
            data(r#"{"addr":"127.0.0.1"}"#),
            Want::F,
        ));
        cases.push((
            "number value",
            json!({"object": {"source_key": "ip"}}),
            data(r#"{"ip":127}"#),
            Want::F,
        ));
        run_table(ty, cases);
        crate::condition::tests::ctrl_is_false(ty, json!({}));
        crate::condition::tests::config_error(
            ty,
            json!({"object": {"source_key": ["ip"]}}),
            "object.source_key",
        );
    }
}
