//! `enrich_dns_ip_lookup`: the host names of an IP address (a reverse lookup of PTR
//! records), as Go's `net.LookupAddr` gives them to Substation: fully qualified, with the
//! trailing dot. A value that is not an IP address is an error naming it. Settings, modes
//! and errors are the DNS family's ([`super::dns`]).

use std::net::IpAddr;

use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

use super::dns::{Lookup, lookup_error};

/// The `enrich_dns_ip_lookup` transform.
#[derive(Debug)]
pub(crate) struct EnrichDnsIpLookup {
    lookup: Lookup,
}

impl EnrichDnsIpLookup {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(EnrichDnsIpLookup {
            lookup: Lookup::build(b)?,
        })
    }
}

#[async_trait]
impl StatelessTransform for EnrichDnsIpLookup {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
            return Ok(());
        }
        let Some(text) = self.lookup.query(&msg) else {
            out.push(msg);
            return Ok(());
        };
        let ip: IpAddr = text
            .parse()
            .map_err(|_| lookup_error("reverse", &text, "not an IP address"))?;
        let answer = self
            .lookup
            .resolver()?
            .reverse_lookup(ip)
            .await
            .map_err(|e| lookup_error("reverse", &text, e))?;
        let names: Vec<String> = answer.iter().map(|n| n.0.to_ascii()).collect();
        if names.is_empty() {
            return Err(lookup_error("reverse", &text, "no names"));
        }
        self.lookup.write(&mut msg, names)?;
        out.push(msg);
        Ok(())
    }
}

/// What registers the `enrich_dns_ip_lookup` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_dns_ip_lookup",
    aliases: &[],
    library: "sub.tf.enrich.dns.ip_lookup",
    summary: "the host names of an IP address (reverse lookup)",
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
            json!({"type": "enrich_dns_ip_lookup", "settings": settings}),
        )
        .map_err(|e| e.to_string())?;
        testing::run(t, &[input]).map_err(|e| e.to_string())
    }

    #[test]
    fn lookups_table() {
        let server = test_server::start();
        let obj =
            json!({"resolver": server, "object": {"source_key": "ip", "target_key": "names"}});
        let data = json!({"resolver": server});
        let cases = [
            (
                &obj,
                r#"{"ip":"1.2.3.4"}"#,
                r#"{"ip":"1.2.3.4","names":["named.test."]}"#,
            ),
            (&data, "1.2.3.4", "named.test."),
            (&obj, r#"{"x":1}"#, r#"{"x":1}"#),
        ];
        for (settings, input, want) in cases {
            assert_eq!(run(settings.clone(), input).unwrap(), [want], "{input}");
        }
        for (input, why) in [
            (
                r#"{"ip":"5.6.7.8"}"#,
                "reverse lookup of \"5.6.7.8\" failed",
            ),
            (
                r#"{"ip":"host.test"}"#,
                "reverse lookup of \"host.test\" failed: not an IP address",
            ),
        ] {
            let e = run(obj.clone(), input).unwrap_err();
            assert!(e.contains(why), "{input}: {e}");
        }
    }

    #[test]
    fn compliance() {
        let server = test_server::start();
        testing::check_type_compliance(
            &registry(),
            "enrich_dns_ip_lookup",
            json!({"resolver": server}),
        );
    }
}
