//! `network_domain_subdomain`: what comes before the registered domain, e.g. `www.mail`
//! for `www.mail.example.com`.
//!
//! Substation compatibility: a name without a subdomain (`example.com`) is the error
//! `no subdomain`, and names the registered domain cannot be derived from are errors, as
//! in Substation. Substation removes the first occurrence of `.` + the registered domain
//! anywhere in the name; sluice removes it from the end, which is the same for every name
//! whose registered domain does not also appear earlier in it.

/// The subdomain of `domain`.
pub(crate) fn part(domain: &str) -> Result<String, String> {
    let registered = super::registered(domain)?;
    match domain.len().checked_sub(registered.len() + 1) {
        Some(end) if end > 0 => Ok(domain[..end].to_string()),
        _ => Err(format!("no subdomain in {domain:?}")),
    }
}

/// What registers the `network_domain_subdomain` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "network_domain_subdomain",
    aliases: &[],
    library: "sub.tf.net.domain.subdomain",
    summary: "what comes before the registered domain",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};

    #[test]
    fn cases() {
        let obj = json!({"object": {"source_key": "d", "target_key": "s"}});
        let data = json!({});
        let cases = [
            ("one label", data.clone(), "www.example.com", "www"),
            ("several labels", data.clone(), "a.b.example.co.uk", "a.b"),
            (
                "the domain repeated",
                data.clone(),
                "example.com.example.com",
                "example.com",
            ),
            (
                "object mode",
                obj.clone(),
                r#"{"d":"mail.google.com"}"#,
                r#"{"d":"mail.google.com","s":"mail"}"#,
            ),
            (
                "missing source passes",
                obj.clone(),
                r#"{"x":1}"#,
                r#"{"x":1}"#,
            ),
        ];
        testing::assert_single_outputs(&registry(), "network_domain_subdomain", &cases);
    }

    #[test]
    fn a_name_without_a_subdomain_is_an_error() {
        let r = registry();
        for (input, want) in [
            ("example.com", "no subdomain in \"example.com\""),
            ("co.uk", "cannot derive eTLD+1"),
            ("a..b.com", "empty label"),
        ] {
            let t = testing::build(&r, json!({"type": "network_domain_subdomain"})).unwrap();
            let e = testing::run(t, &[input]).unwrap_err().to_string();
            assert!(e.contains(want), "{input:?}: {e}");
        }
    }
}
