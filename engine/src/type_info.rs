//! What a transform or condition type says about itself, written once beside its code.
//!
//! Each type's file holds a `const INFO: TypeInfo` (its name, the library function that
//! emits it, a one-line summary, what it reaches beyond its messages, and settings that
//! build it), and its family registers the type with it. Everything that used to list the
//! types by hand is derived from the registered descriptors: the compliance tests build
//! every type from its example, a build without AWS names the types that call AWS, the
//! library check evaluates each library function, and `docs/reference/README.md`'s index
//! is rendered from them (and a test fails when the file is stale). As Vector declares a
//! component's name, summary and schema once and generates its docs from them.

/// What a type reaches beyond the messages it is given: what `sluice play` asks a flag for,
/// and what the compliance tests cannot exercise without a test double.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Nothing: it works on its messages in memory (a kv store or secret it is configured
    /// with is judged by that store's or provider's own type).
    Memory,
    /// Local files.
    Files,
    /// The network (HTTP, DNS, Cloud Storage).
    Network,
    /// AWS services (the network too); a build without the `aws` feature lacks the type.
    Aws,
}

/// A registered type's descriptor.
#[derive(Debug, Clone, Copy)]
pub struct TypeInfo {
    /// The type name configs use (Substation's).
    pub name: &'static str,
    /// Other names the same type is registered under (Substation's engine and library
    /// spell some differently).
    pub aliases: &'static [&'static str],
    /// The library function that emits it, with the library's short names
    /// (`sub.tf.str.append`); empty for a type the library has no function for.
    pub library: &'static str,
    /// One line for the reference index (Markdown).
    pub summary: &'static str,
    /// What it reaches beyond its messages.
    pub reach: Reach,
    /// Settings (JSON) that build it: the compliance tests build and run every type with
    /// them.
    pub example: &'static str,
}

impl TypeInfo {
    /// A descriptor with only a name: for types registered by tests.
    pub const fn named(name: &'static str) -> TypeInfo {
        TypeInfo {
            name,
            aliases: &[],
            library: "",
            summary: "",
            reach: Reach::Memory,
            example: "{}",
        }
    }

    /// Whether it calls AWS services.
    pub const fn calls_aws(&self) -> bool {
        matches!(self.reach, Reach::Aws)
    }

    /// Whether it reaches the network (AWS included).
    pub const fn reaches_network(&self) -> bool {
        matches!(self.reach, Reach::Network | Reach::Aws)
    }

    /// Its family: the part of its name before the first `_` (`string` for
    /// `string_append`), which names its page of the reference.
    pub fn family(&self) -> &'static str {
        self.name.split('_').next().unwrap_or(self.name)
    }

    /// Its name and its aliases.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + use<> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_and_names() {
        const INFO: TypeInfo = TypeInfo {
            aliases: &["enrich_dns_txt_lookup"],
            reach: Reach::Network,
            ..TypeInfo::named("enrich_dns_text_lookup")
        };
        assert_eq!(INFO.family(), "enrich");
        assert_eq!(
            INFO.names().collect::<Vec<_>>(),
            ["enrich_dns_text_lookup", "enrich_dns_txt_lookup"]
        );
        assert!(INFO.reaches_network() && !INFO.calls_aws());
        assert!(
            TypeInfo {
                reach: Reach::Aws,
                ..INFO
            }
            .calls_aws()
        );
        assert!(!TypeInfo::named("x").reaches_network());
    }

    #[test]
    fn a_type_is_registered_under_its_aliases_and_described_once() {
        const LOOKUP: TypeInfo = TypeInfo {
            aliases: &["lookup_old"],
            summary: "looks up",
            ..TypeInfo::named("lookup")
        };
        const ALL: TypeInfo = TypeInfo {
            aliases: &["all"],
            ..TypeInfo::named("meta_all")
        };
        struct Never;
        impl crate::Condition for Never {
            fn test(
                &self,
                _: &crate::message::Message,
            ) -> Result<bool, crate::error::TransformError> {
                Ok(false)
            }
        }
        let mut r = crate::Registry::new();
        r.transform(&LOOKUP, |b| Err(b.error(None, "built")));
        r.condition(&ALL, |_| Ok(Never));
        assert_eq!(
            r.transform_types().collect::<Vec<_>>(),
            ["lookup", "lookup_old"]
        );
        assert_eq!(r.condition_types().collect::<Vec<_>>(), ["all", "meta_all"]);
        let names =
            |i: &mut dyn Iterator<Item = &'static TypeInfo>| i.map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(names(&mut r.transform_infos()), ["lookup"]);
        assert_eq!(names(&mut r.condition_infos()), ["meta_all"]);
        assert_eq!(
            r.transform_info("lookup_old").map(|t| t.summary),
            Some("looks up")
        );
        assert!(r.condition_info("all").is_some() && r.transform_info("all").is_none());
        // Either name builds the type.
        let err = r
            .build_transform(&serde_json::json!({"type": "lookup_old"}), "t")
            .err()
            .unwrap();
        assert!(err.to_string().contains("built"), "{err}");
    }
}
