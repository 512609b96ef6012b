//! `enrich_dns_domain_lookup`: the IP addresses of a host name (A and AAAA records), as
//! Go's `net.LookupHost` gives them to Substation: every address, IPv4 first, as strings.
//! Settings, modes and errors are the DNS family's ([`super::dns`]).

use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

use super::dns::{Lookup, lookup_error};

/// The `enrich_dns_domain_lookup` transform.
#[derive(Debug)]
pub(crate) struct EnrichDnsDomainLookup {
    lookup: Lookup,
}

impl EnrichDnsDomainLookup {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(EnrichDnsDomainLookup {
            lookup: Lookup::build(b)?,
        })
    }
}

#[async_trait]
impl StatelessTransform for EnrichDnsDomainLookup {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
            return Ok(());
        }
        let Some(host) = self.lookup.query(&msg) else {
            out.push(msg);
            return Ok(());
        };
        let answer = self
            .lookup
            .resolver()?
            .lookup_ip(host.as_str())
            .await
            .map_err(|e| lookup_error("address", &host, e))?;
        let mut ips: Vec<std::net::IpAddr> = answer.iter().collect();
        ips.sort_by_key(|ip| ip.is_ipv6());
        if ips.is_empty() {
            return Err(lookup_error("address", &host, "no addresses"));
        }
        self.lookup
            .write(&mut msg, ips.into_iter().map(|ip| ip.to_string()).collect())?;
        out.push(msg);
        Ok(())
    }
}

/// What registers the `enrich_dns_domain_lookup` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_dns_domain_lookup",
    aliases: &[],
    library: "sub.tf.enrich.dns.domain_lookup",
    summary: "the IP addresses of a host name",
    reach: sluice_engine::Reach::Network,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::super::dns::test_server;
    use crate::registry;
    use sluice_engine::{json, testing};

    fn run(settings: sluice_engine::Value, input: &str) -> Result<Vec<String>, String> {
        let t = testing::build(
            &registry(),
            json!({"type": "enrich_dns_domain_lookup", "settings": settings}),
        )
        .map_err(|e| e.to_string())?;
        testing::run(t, &[input]).map_err(|e| e.to_string())
    }

    #[test]
    fn lookups_table() {
        let server = test_server::start();
        let obj = json!({"resolver": server, "object": {"source_key": "h", "target_key": "ips"}});
        let data = json!({"resolver": server});
        // (settings, input, output)
        let cases = [
            (
                &obj,
                r#"{"h":"host.test"}"#,
                r#"{"h":"host.test","ips":["192.0.2.10","192.0.2.11","2001:db8::10"]}"#,
            ),
            (
                &obj,
                r#"{"h":"v6only.test"}"#,
                r#"{"h":"v6only.test","ips":["2001:db8::6"]}"#,
            ),
            (&data, "host.test.", "192.0.2.10"),
            (&data, "host.test\n", "192.0.2.10"),
            (&obj, r#"{"other":1}"#, r#"{"other":1}"#),
        ];
        for (settings, input, want) in cases {
            assert_eq!(run(settings.clone(), input).unwrap(), [want], "{input}");
        }
        for (input, why) in [
            (
                r#"{"h":"missing.test"}"#,
                "address lookup of \"missing.test\" failed",
            ),
            (
                r#"{"h":"empty.test"}"#,
                "address lookup of \"empty.test\" failed",
            ),
        ] {
            let e = run(obj.clone(), input).unwrap_err();
            assert!(e.contains(why), "{input}: {e}");
        }
    }

    #[test]
    fn settings_table() {
        testing::assert_config_errors(
            &registry(),
            "enrich_dns_domain_lookup",
            &[
                (
                    json!({"resolver": "dns.example"}),
                    "settings.resolver: \"dns.example\" is not a DNS server address",
                ),
                (
                    json!({"object": {"source_key": "a"}}),
                    "settings.object.target_key: missing required option",
                ),
                (
                    json!({"request": {"timeout": "1d"}}),
                    "settings.request.timeout",
                ),
                (
                    json!({"request": {"timeout": "0s"}}),
                    "settings.request.timeout: must be more than 0",
                ),
            ],
        );
    }

    #[test]
    fn compliance() {
        let server = test_server::start();
        testing::check_type_compliance(
            &registry(),
            "enrich_dns_domain_lookup",
            json!({"resolver": server}),
        );
    }
}
