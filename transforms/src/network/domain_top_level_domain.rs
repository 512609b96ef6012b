//! `network_domain_top_level_domain`: the public suffix of a domain name, e.g. `co.uk` for
//! `www.example.co.uk` (the library's `tld`).
//!
//! Substation compatibility: Go's `publicsuffix.PublicSuffix`, whose errors Substation
//! ignores: a name the list has no rule for gets its last label, and nothing here fails.

/// The public suffix of `domain`.
pub(crate) fn part(domain: &str) -> Result<String, String> {
    Ok(super::suffix(domain).to_string())
}

/// What registers the `network_domain_top_level_domain` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_domain_top_level_domain",
    aliases: &[],
    library: "sub.tf.net.domain.tld",
    summary: "the public suffix",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let obj = json!({"object": {"source_key": "d", "target_key": "t"}});
        let data = json!({});
        let cases = [
            ("one label", data.clone(), "www.example.com", "com"),
            ("two labels", data.clone(), "www.example.co.uk", "co.uk"),
            ("private section", data.clone(), "a.github.io", "github.io"),
            ("unknown", data.clone(), "host.internal", "internal"),
            ("a suffix itself", data.clone(), "co.uk", "co.uk"),
            (
                "object mode",
                obj.clone(),
                r#"{"d":"mail.google.com"}"#,
                r#"{"d":"mail.google.com","t":"com"}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"x":1}"#,
                r#"{"x":1}"#,
            ),
        ];
        testing::assert_single_outputs(&registry(), "network_domain_top_level_domain", &cases);
    }
}
