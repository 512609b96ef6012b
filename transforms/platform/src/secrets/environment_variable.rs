//! The `environment_variable` secret provider: a secret read from an environment variable
//! of the process (`sub.secrets.environment_variable({id, name, ttl_offset})`).
//!
//! Where sluice differs from Substation: a variable that is unset (or empty, or not
//! Unicode) is an error naming the variable, when the transform is built and when the
//! value is refreshed; Substation silently caches nothing, so `${SECRET:id}` then stays
//! in the request as literal text.

use serde::Deserialize;
use sluice_engine::{Build, ConfigError};

use super::Secret;

/// Settings of the `environment_variable` provider.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The cache id that `${SECRET:id}` names.
    pub id: Option<String>,
    /// The environment variable.
    pub name: Option<String>,
    /// How long a value is used before it is read again (default 15m).
    pub ttl_offset: Option<String>,
}

/// A secret in an environment variable.
#[derive(Debug)]
pub struct EnvironmentVariable {
    name: String,
}

impl EnvironmentVariable {
    /// Builds it from `s`, found at `field`.
    pub fn build(b: &Build<'_>, field: &str, s: &Settings) -> Result<Self, ConfigError> {
        let name = s.name.clone().filter(|n| !n.is_empty()).ok_or_else(|| {
            b.field_error(
                &format!("{field}.name"),
                "missing required option: the environment variable that holds the secret",
            )
        })?;
        if name.contains('=') || name.contains('\0') {
            return Err(b.field_error(
                &format!("{field}.name"),
                format!("{name:?} is not an environment variable name"),
            ));
        }
        Ok(EnvironmentVariable { name })
    }

    /// The variable's value now.
    pub fn fetch(&self) -> Result<Secret, String> {
        match std::env::var(&self.name) {
            Ok(v) if !v.is_empty() => Ok(Secret::new(v)),
            Ok(_) => Err(format!("environment variable {:?} is empty", self.name)),
            Err(std::env::VarError::NotPresent) => {
                Err(format!("environment variable {:?} is not set", self.name))
            }
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "environment variable {:?} is not valid Unicode",
                self.name
            )),
        }
    }
}
