//! Error types of the engine.
//!
//! A transform's error reaches the user with the chain of transform ids that led to it
//! (`transform <id>: ...`), the way Substation prints them, so that `meta_err` and
//! `meta_retry` can match error text with regular expressions as Substation users expect.

use std::sync::Arc;

use crate::path::PathError;

/// An error raised while processing a message.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// An error from inside a named transform; the pipeline adds this layer. Its text
    /// includes the inner error (it is not also a `source`, so chains print it once).
    #[error("transform {id}: {inner}")]
    In {
        /// The transform's `id` setting (or its type name when it has none).
        id: Arc<str>,
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

    /// Adds the `transform <id>:` layer.
    pub fn within(self, id: &Arc<str>) -> Self {
        TransformError::In {
            id: id.clone(),
            inner: Box::new(self),
        }
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
            TransformError::In { id, inner } => {
                format!("transform {id}: {}", inner.substation_text())
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
