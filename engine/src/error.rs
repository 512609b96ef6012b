//! Error types of the engine.
//!
//! A transform's error reaches the user naming the transform as the config has it
//! (`transforms[1].settings.cases[0].transforms[0] (object_insert, id ...): ...`,
//! [`TransformName`]); `meta_err` and `meta_retry` match their patterns against the chain of
//! transform ids that led to it (`transform <id>: ...`, [`TransformError::substation_text`]),
//! the way Substation prints them, as Substation users expect.

use crate::name::TransformName;
use crate::path::PathError;

/// An error raised while processing a message.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// An error from inside a named transform; the pipeline adds this layer. Its text
    /// includes the inner error (it is not also a `source`, so chains print it once), under
    /// the innermost transform that has a place in the config (its place names the ones
    /// around it).
    #[error("{}", in_text(name, inner))]
    In {
        /// The transform: its id and where the config has it.
        name: TransformName,
        /// What went wrong inside it.
        inner: Box<TransformError>,
    },
    /// A path could not be applied to a message.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A message's data or metadata is not JSON where JSON is needed.
    #[error("{0}")]
    NotJson(String),
    /// A condition failed to evaluate.
    #[error("condition: {0}")]
    Condition(String),
    /// Any other failure, with a message for the user.
    #[error("{0}")]
    Failed(String),
    /// An error a config raises on purpose (`utility_err`), with its message as written.
    #[error("{0}")]
    Raised(String),
    /// An error from a library (I/O, a client, ...); its text includes the library's.
    #[error("{context}: {cause}")]
    External {
        /// What was being done.
        context: String,
        /// The library error.
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An error that looks systemic ([`FAILURES_IN_A_ROW_TO_STOP`] in a row where messages
    /// fail alone): later messages would fail the same way, so the run stops at it.
    #[error("{inner} ({why}: stopping)")]
    Stopping {
        /// The last error.
        inner: Box<TransformError>,
        /// What made it look systemic.
        why: String,
    },
}

/// The text of `inner` raised in `name`: the innermost transform built from the config says
/// where it is, which names the transforms around it; a transform built in code has no
/// place, and is named (`transform <id>`) with what is inside it.
fn in_text(name: &TransformName, inner: &TransformError) -> String {
    match inner {
        TransformError::In { name: within, .. } if within.is_written() => inner.to_string(),
        _ => format!("{name}: {inner}"),
    }
}

/// How many times in a row a transform may fail messages alone (a send: batches of which
/// nothing was delivered; any stateful transform: calls that returned an error) before the
/// run stops as it does without `fails_alone`: a destination or store that is down would
/// otherwise spend its whole retry budget on every batch, one after another, for the
/// length of the input.
pub const FAILURES_IN_A_ROW_TO_STOP: u32 = 3;

impl TransformError {
    /// A failure with a message.
    pub fn failed(msg: impl Into<String>) -> Self {
        TransformError::Failed(msg.into())
    }

    /// Wraps a library error with what was being done.
    pub fn external(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        TransformError::External {
            context: context.into(),
            cause: source.into(),
        }
    }

    /// The same error, stopping the run: `why` says what made it look systemic.
    pub fn stopping(self, why: impl Into<String>) -> Self {
        TransformError::Stopping {
            inner: Box::new(self),
            why: why.into(),
        }
    }

    /// Adds the layer of the transform it came from.
    pub fn within(self, name: &TransformName) -> Self {
        TransformError::In {
            name: name.clone(),
            inner: Box::new(self),
        }
    }

    /// The text of this error raised in `name`, as [`TransformError::within`] would make it
    /// (for a caller that keeps the error).
    pub fn text_within(&self, name: &TransformName) -> String {
        in_text(name, self)
    }

    /// The error's text as Substation builds it, which `meta_err` and `meta_retry` match
    /// their `error_messages` against: the `transform <id>:` layers and the cause, except
    /// that an error raised by `utility_err` has no layer of its own (Substation's returns
    /// its message as written, so `^test` matches the message `test error`).
    pub fn substation_text(&self) -> String {
        match self {
            TransformError::In { inner, .. } if matches!(**inner, TransformError::Raised(_)) => {
                inner.to_string()
            }
            TransformError::In { name, inner } => {
                format!("transform {}: {}", name.id(), inner.substation_text())
            }
            TransformError::External { context, cause } => {
                let kept = cause.downcast_ref::<Self>().or_else(|| {
                    cause
                        .downcast_ref::<Box<Self>>()
                        .map(|boxed| boxed.as_ref())
                });
                match kept {
                    Some(cause) => format!("{context}: {}", cause.substation_text()),
                    None => format!("{context}: {cause}"),
                }
            }
            other => other.to_string(),
        }
    }

    /// Whether nothing after it can be delivered either: the output is gone (a broken
    /// pipe: standard output closed by `head` or a dead reader), or failures in a row
    /// made it [stop](TransformError::stopping). A run ends at it even
    /// where messages fail alone ([`crate::Pipeline::fail_alone`]).
    pub fn ends_run(&self) -> bool {
        match self.root() {
            TransformError::Stopping { .. } => true,
            TransformError::External { cause, .. } => cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe),
            _ => false,
        }
    }

    /// The innermost error, without the transform layers.
    pub fn root(&self) -> &TransformError {
        match self {
            TransformError::In { inner, .. } => inner.root(),
            other => other,
        }
    }
}

/// An error raised while building a pipeline from its configuration.
///
/// It names where the problem is (`transforms[2].settings.transforms[0]`), the transform's
/// type and id, and the field, so that a user can find the line to fix.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{location}{what}: {message}", what = describe(type_name, id, field))]
pub struct ConfigError {
    /// Where in the compiled config, e.g. `transforms[3]` or `tests[0].condition`.
    pub location: String,
    /// The `type` of the transform or condition, when known.
    pub type_name: Option<String>,
    /// The `id` setting, when present.
    pub id: Option<String>,
    /// The settings field at fault, e.g. `object.source_key`.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

fn describe(type_name: &Option<String>, id: &Option<String>, field: &Option<String>) -> String {
    let mut s = String::new();
    match (type_name, id) {
        (Some(t), Some(i)) if i != t => s.push_str(&format!(" ({t}, id {i})")),
        (Some(t), _) => s.push_str(&format!(" ({t})")),
        (None, Some(i)) => s.push_str(&format!(" (id {i})")),
        (None, None) => {}
    }
    if let Some(f) = field {
        s.push_str(&format!(" settings.{f}"));
    }
    s
}

impl ConfigError {
    /// An error at `location` with a message.
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            location: location.into(),
            type_name: None,
            id: None,
            field: None,
            message: message.into(),
        }
    }

    /// Names the settings field at fault.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

/// A warning found while building (an unknown settings key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Where in the compiled config.
    pub location: String,
    /// What to look at.
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What a user reads names the innermost transform the config places (its place names
    /// the ones around it); what `meta_err` and `meta_retry` match is Substation's chain of
    /// ids.
    #[test]
    fn errors_read_as_written_and_match_as_substation_builds_them() {
        let switch = TransformName::written("transforms[1]", "meta_switch", Arc::from("sw-1"));
        let insert = TransformName::written(
            "transforms[1].settings.cases[0].transforms[0]",
            "object_insert",
            Arc::from("object_insert"),
        );
        let root = || TransformError::NotJson("cannot set a key: the data is not JSON".into());
        let cases: Vec<(&str, TransformError, &str, &str)> = vec![
            (
                "nested, both placed: the inner place",
                root().within(&insert).within(&switch),
                "transforms[1].settings.cases[0].transforms[0] (object_insert): cannot set a key: the data is not JSON",
                "transform sw-1: transform object_insert: cannot set a key: the data is not JSON",
            ),
            (
                "built in code: Substation's layers",
                root().within(&"inner".into()).within(&"outer".into()),
                "transform outer: transform inner: cannot set a key: the data is not JSON",
                "transform outer: transform inner: cannot set a key: the data is not JSON",
            ),
            (
                "a placed transform inside one built in code",
                root().within(&insert).within(&"under_test".into()),
                "transforms[1].settings.cases[0].transforms[0] (object_insert): cannot set a key: the data is not JSON",
                "transform under_test: transform object_insert: cannot set a key: the data is not JSON",
            ),
            (
                "a cause kept by meta_retry matches by its ids",
                TransformError::external(
                    "retry limit reached after 2 attempts",
                    Box::new(root().within(&insert)),
                )
                .within(&switch),
                "transforms[1] (meta_switch, id sw-1): retry limit reached after 2 attempts: transforms[1].settings.cases[0].transforms[0] (object_insert): cannot set a key: the data is not JSON",
                "transform sw-1: retry limit reached after 2 attempts: transform object_insert: cannot set a key: the data is not JSON",
            ),
            (
                "utility_err's message has no layer of its own in Substation's text",
                TransformError::Raised("bad record".into()).within(&insert),
                "transforms[1].settings.cases[0].transforms[0] (object_insert): bad record",
                "bad record",
            ),
        ];
        for (name, e, shown, substation) in cases {
            assert_eq!(e.to_string(), shown, "{name}");
            assert_eq!(e.substation_text(), substation, "{name}");
            assert_eq!(
                root().text_within(&insert),
                root().within(&insert).to_string()
            );
        }
    }
}
