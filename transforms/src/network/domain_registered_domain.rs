//! `network_domain_registered_domain`: the registered domain (eTLD+1) of a domain name,
//! e.g. `example.co.uk` for `www.example.co.uk`.
//!
//! Substation compatibility: Go's `publicsuffix.EffectiveTLDPlusOne`: a name with an empty
//! label (`a..b`, a leading or trailing dot) or that is itself a public suffix (`co.uk`) is
//! an error naming the domain. Object mode writes a string at the target; a missing source
//! passes the message through; data mode replaces the data.

/// The registered domain of `domain`.
pub(crate) fn part(domain: &str) -> Result<String, String> {
    super::registered(domain).map(str::to_string)
}

/// What registers the `network_domain_registered_domain` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_domain_registered_domain",
    aliases: &[],
    library: "sub.tf.net.domain.registered_domain",
    summary: "the registered domain (eTLD+1) of a domain name",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let obj = json!({"object": {"source_key": "d", "target_key": "r"}});
        let data = json!({});
        let cases = [
            ("two labels", data.clone(), "example.com", "example.com"),
            ("subdomains", data.clone(), "a.b.example.com", "example.com"),
            (
                "two-label suffix",
                data.clone(),
                "www.example.co.uk",
                "example.co.uk",
            ),
            (
                "private section",
                data.clone(),
                "x.y.github.io",
                "y.github.io",
            ),
            (
                "unknown suffix counts as one label",
                data.clone(),
                "a.b.internal",
                "b.internal",
            ),
            (
                "object mode",
                obj.clone(),
                r#"{"d":"mail.google.com"}"#,
                r#"{"d":"mail.google.com","r":"google.com"}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"x":1}"#,
                r#"{"x":1}"#,
            ),
        ];
        testing::assert_single_outputs(&registry(), "network_domain_registered_domain", &cases);
    }

    #[test]
    fn errors_name_the_domain() {
        let r = registry();
        for (input, want) in [
            ("co.uk", "cannot derive eTLD+1 for domain \"co.uk\""),
            ("com", "cannot derive eTLD+1 for domain \"com\""),
            ("a..example.com", "empty label in domain \"a..example.com\""),
            (".example.com", "empty label"),
            ("example.com.", "empty label"),
            ("", "empty label"),
        ] {
            let t =
                testing::build(&r, json!({"type": "network_domain_registered_domain"})).unwrap();
            let e = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(e.contains(want), "{input:?}: {e}");
        }
    }

    #[test]
    fn config_errors() {
        testing::assert_config_errors(
            &registry(),
            "network_domain_registered_domain",
            &[(json!({"object": {"source_key": "a"}}), "object.target_key")],
        );
    }
}
