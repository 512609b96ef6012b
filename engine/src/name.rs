//! What a transform is called in what a user reads: where the config has it and its type
//! (`transforms[3] (object_copy, id c1)`, nested as
//! `transforms[0].settings.transforms[2] (send_file, id ...)`), as the errors of building
//! the config name it, so that a run-time error points at the same place.
//!
//! Its `id` is kept apart: Substation's text of an error (`transform <id>: ...`) is what
//! `meta_err` and `meta_retry` match their patterns against, so it stays as Substation
//! builds it ([`crate::TransformError::substation_text`]).

use std::fmt;
use std::sync::Arc;

/// A transform's id and, when it was built from a config, where it is in the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransformName {
    id: Arc<str>,
    /// `transforms[3] (object_copy, id c1)`; `None` for a transform built without a config
    /// (in code or tests), which is named `transform <id>` as Substation names it.
    written: Option<Arc<str>>,
}

impl TransformName {
    /// The transform at `location` in the config, of type `type_name`, whose id (its `id`
    /// setting, or its type name when it has none) is `id`.
    pub fn written(location: &str, type_name: &str, id: Arc<str>) -> TransformName {
        let written = if *id == *type_name {
            format!("{location} ({type_name})")
        } else {
            format!("{location} ({type_name}, id {id})")
        };
        TransformName {
            id,
            written: Some(Arc::from(written)),
        }
    }

    /// The transform's id: its `id` setting, or its type name when it has none.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// Whether the name says where the config has the transform (it was built from one).
    pub fn is_written(&self) -> bool {
        self.written.is_some()
    }
}

impl From<Arc<str>> for TransformName {
    fn from(id: Arc<str>) -> Self {
        TransformName { id, written: None }
    }
}

impl From<&str> for TransformName {
    fn from(id: &str) -> Self {
        TransformName::from(Arc::<str>::from(id))
    }
}

impl From<&Arc<str>> for TransformName {
    fn from(id: &Arc<str>) -> Self {
        TransformName::from(id.clone())
    }
}

impl fmt::Display for TransformName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.written {
            Some(w) => f.write_str(w),
            None => write!(f, "transform {}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_table() {
        let cases: &[(TransformName, &str)] = &[
            (
                TransformName::written("transforms[3]", "object_copy", Arc::from("c1")),
                "transforms[3] (object_copy, id c1)",
            ),
            (
                TransformName::written(
                    "transforms[0].settings.transforms[2]",
                    "send_file",
                    Arc::from("send_file"),
                ),
                "transforms[0].settings.transforms[2] (send_file)",
            ),
            (TransformName::from("t0"), "transform t0"),
        ];
        for (name, want) in cases {
            assert_eq!(name.to_string(), *want);
        }
        assert_eq!(&**cases[0].0.id(), "c1");
        assert!(cases[0].0.is_written() && !cases[2].0.is_written());
    }
}
