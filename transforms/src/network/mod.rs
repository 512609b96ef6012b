//! The `network_*` transforms: the parts of a domain name by the public suffix list
//! (registered domain, subdomain, top-level domain).
//!
//! The three share one shape: read a domain (the value's text in object mode, the data in
//! data mode), write one part of it. [`NetworkDomain`] is that shape; each type's file
//! gives the function that picks its part. The public suffix list is the `psl` crate's
//! compiled copy (ICANN and private sections, as Go's `golang.org/x/net/publicsuffix`
//! that Substation uses); a name whose last label is not on the list counts as a
//! one-label suffix, as in Go.

pub(crate) mod domain_registered_domain;
pub(crate) mod domain_subdomain;
pub(crate) mod domain_top_level_domain;

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, InPlace, MapTransform, Message, Registry, Transform, TransformError, Value,
};

use crate::common::Io;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.transform(&domain_registered_domain::INFO, |b| {
        NetworkDomain::build(b, domain_registered_domain::part).map(Transform::map)
    });
    r.transform(&domain_subdomain::INFO, |b| {
        NetworkDomain::build(b, domain_subdomain::part).map(Transform::map)
    });
    r.transform(&domain_top_level_domain::INFO, |b| {
        NetworkDomain::build(b, domain_top_level_domain::part).map(Transform::map)
    });
}

/// Settings of the `network_domain_*` transforms.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` and `target_key` (both or neither).
    pub object: ObjectSettings,
}

/// Picks one part of a domain name, or says why it has none.
pub(crate) type Part = fn(&str) -> Result<String, String>;

/// A `network_domain_*` transform: reads a domain, writes the part `part` picks.
pub(crate) struct NetworkDomain {
    io: Io,
    part: Part,
}

impl NetworkDomain {
    /// Builds one from its settings.
    pub(crate) fn build(b: &Build<'_>, part: Part) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        Ok(NetworkDomain {
            io: Io::new(b, &s.object)?,
            part,
        })
    }

    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let Some(domain) = self.io.read_text(msg) else {
            return Ok(());
        };
        let part = (self.part)(&domain).map_err(TransformError::failed)?;
        self.io.write(msg, Value::String(part.into()))?;
        Ok(())
    }
}

impl MapTransform for NetworkDomain {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

/// Go's checks before a look-up: no empty label (`a..b`, a leading or trailing dot, `""`).
fn check_labels(domain: &str) -> Result<(), String> {
    if domain.split('.').any(str::is_empty) {
        return Err(format!("empty label in domain {domain:?}"));
    }
    Ok(())
}

/// The public suffix of `domain` (the last label when the list has no rule for it).
fn suffix(domain: &str) -> &str {
    psl::suffix_str(domain).unwrap_or_else(|| domain.rsplit('.').next().unwrap_or(domain))
}

/// The registered domain (eTLD+1) of `domain`.
fn registered(domain: &str) -> Result<&str, String> {
    check_labels(domain)?;
    let suffix = suffix(domain);
    if suffix.len() >= domain.len() {
        return Err(format!("cannot derive eTLD+1 for domain {domain:?}"));
    }
    // The label before the suffix, and the suffix.
    let head = &domain[..domain.len() - suffix.len() - 1];
    let start = head.rfind('.').map_or(0, |i| i + 1);
    Ok(&domain[start..])
}
