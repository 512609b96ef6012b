//! `enrich_dns_text_lookup` (also registered as `enrich_dns_txt_lookup`, the type
//! Substation's own library emits for `sub.tf.enrich.dns.txt_lookup`, which Substation's
//! engine does not know): the TXT records of a name, as Go's `net.LookupTXT` gives them
//! to Substation: one string per record, its character-strings joined. Settings, modes and
//! errors are the DNS family's ([`super::dns`]).

use sluice_engine::{Build, ConfigError, Message, StatelessTransform, TransformError, async_trait};

use super::dns::{Lookup, lookup_error};

/// The `enrich_dns_text_lookup` transform.
#[derive(Debug)]
pub(crate) struct EnrichDnsTextLookup {
    lookup: Lookup,
}

impl EnrichDnsTextLookup {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(EnrichDnsTextLookup {
            lookup: Lookup::build(b)?,
        })
    }
}

#[async_trait]
impl StatelessTransform for EnrichDnsTextLookup {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
            return Ok(());
        }
        let Some(name) = self.lookup.query(&msg) else {
            out.push(msg);
            return Ok(());
        };
        let answer = self
            .lookup
            .resolver()?
            .txt_lookup(name.as_str())
            .await
            .map_err(|e| lookup_error("TXT", &name, e))?;
        let texts: Vec<String> = answer
            .iter()
            .map(|txt| {
                txt.iter()
                    .map(|part| String::from_utf8_lossy(part).into_owned())
                    .collect::<String>()
            })
            .collect();
        if texts.is_empty() {
            return Err(lookup_error("TXT", &name, "no records"));
        }
        self.lookup.write(&mut msg, texts)?;
        out.push(msg);
        Ok(())
    }
}

/// What registers the `enrich_dns_text_lookup` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_dns_text_lookup",
    // Substation's library spells it so (its engine does not know this name).
    aliases: &["enrich_dns_txt_lookup"],
    library: "sub.tf.enrich.dns.txt_lookup",
    summary: "the TXT records of a name",
    reach: sluice_engine::Reach::Network,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::super::dns::test_server;
    use crate::registry;
    use sluice_engine::{json, testing};

    fn run(kind: &str, settings: sluice_engine::Value, input: &str) -> Result<Vec<String>, String> {
        let t = testing::build(&registry(), json!({"type": kind, "settings": settings}))
            .map_err(|e| e.to_string())?;
        testing::run(t, &[input]).map_err(|e| e.to_string())
    }

    #[test]
    fn lookups_table_under_both_names() {
        let server = test_server::start();
        let obj = json!({"resolver": server, "object": {"source_key": "d", "target_key": "txt"}});
        let data = json!({"resolver": server});
        for kind in ["enrich_dns_text_lookup", "enrich_dns_txt_lookup"] {
            let cases = [
                (
                    &obj,
                    r#"{"d":"txt.test"}"#,
                    r#"{"d":"txt.test","txt":["v=spf1 -all","part one part two"]}"#,
                ),
                (&data, "txt.test", "v=spf1 -all"),
                (&obj, r#"{"x":1}"#, r#"{"x":1}"#),
            ];
            for (settings, input, want) in cases {
                assert_eq!(
                    run(kind, settings.clone(), input).unwrap(),
                    [want],
                    "{kind} {input}"
                );
            }
            let e = run(kind, obj.clone(), r#"{"d":"nothing.test"}"#).unwrap_err();
            assert!(e.contains("TXT lookup of \"nothing.test\" failed"), "{e}");
        }
    }

    #[test]
    fn compliance() {
        let server = test_server::start();
        testing::check_type_compliance(
            &registry(),
            "enrich_dns_text_lookup",
            json!({"resolver": server}),
        );
    }
}
