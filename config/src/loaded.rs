//! A loaded config and its parts.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{ConfigLoadError, describe};

/// A compiled config whose top level is an object with a `transforms` array.
///
/// Its schema is Substation's: `{"transforms": [...], "tests": [...], "concurrency": n}`.
/// Only `transforms` is checked when loading; `tests()` and `concurrency()` check their
/// parts when asked, so that a command that does not use them is not stopped by them.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The whole compiled config.
    pub json: Value,
    /// The file it was loaded from.
    pub path: PathBuf,
}

/// One entry of a config's `tests`: `{name, transforms, condition}`.
///
/// Substation's `test` command feeds one ctrl message through `transforms` (usually
/// `test_message`s), the outputs through a fresh instance of the config's pipeline, and
/// checks `condition` on every data message that comes out.
#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    /// Its index in `tests`.
    pub index: usize,
    /// Its `name`.
    pub name: String,
    /// Its `transforms`, a JSON array (empty when the test has none).
    pub transforms: Value,
    /// Its `condition`, a `{type, settings}` object.
    pub condition: Value,
    /// sluice's `outputs`: how many data messages must come out (Substation has no such
    /// field and ignores it), so that a test can prove a duplicate was dropped.
    pub outputs: Option<usize>,
}

impl TestCase {
    /// Where its transforms are, for `Registry::build_pipeline`: `tests[i].transforms`.
    pub fn transforms_location(&self) -> String {
        format!("tests[{}].transforms", self.index)
    }

    /// Where its condition is, for `Registry::build_condition`: `tests[i].condition`.
    pub fn condition_location(&self) -> String {
        format!("tests[{}].condition", self.index)
    }
}

impl LoadedConfig {
    /// Checks the shape every config must have and wraps it.
    pub fn new(json: Value, path: &Path) -> Result<Self, ConfigLoadError> {
        let path = path.to_path_buf();
        let Value::Object(top) = &json else {
            return Err(ConfigLoadError::NotAnObject {
                found: describe(&json),
                path,
            });
        };
        match top.get("transforms") {
            None => return Err(ConfigLoadError::MissingTransforms { path }),
            Some(Value::Array(_)) => {}
            Some(other) => {
                return Err(ConfigLoadError::Invalid {
                    field: "transforms".into(),
                    message: format!("must be an array of transforms, not {}", describe(other)),
                    path,
                });
            }
        }
        Ok(LoadedConfig { json, path })
    }

    /// The `transforms` array, to hand to `Registry::build_pipeline(.., "transforms")`.
    pub fn transforms(&self) -> &Value {
        &self.json["transforms"]
    }

    /// The `tests`; none when the config has no `tests` (or `tests: null`).
    pub fn tests(&self) -> Result<Vec<TestCase>, ConfigLoadError> {
        let invalid = |field: String, message: String| ConfigLoadError::Invalid {
            path: self.path.clone(),
            field,
            message,
        };
        let list = match self.json.get("tests") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(other) => {
                return Err(invalid(
                    "tests".into(),
                    format!(
                        "must be an array of {{name, transforms, condition}}, not {}",
                        describe(other)
                    ),
                ));
            }
        };
        let mut tests = Vec::with_capacity(list.len());
        for (index, test) in list.iter().enumerate() {
            let at = |field: &str| {
                if field.is_empty() {
                    format!("tests[{index}]")
                } else {
                    format!("tests[{index}].{field}")
                }
            };
            let Value::Object(test) = test else {
                return Err(invalid(
                    at(""),
                    format!(
                        "must be an object {{name, transforms, condition}}, not {}",
                        describe(test)
                    ),
                ));
            };
            let name = match test.get("name") {
                Some(Value::String(s)) => s.clone(),
                None => return Err(invalid(at("name"), "is missing".into())),
                Some(other) => {
                    return Err(invalid(
                        at("name"),
                        format!("must be a string, not {}", describe(other)),
                    ));
                }
            };
            let transforms = match test.get("transforms") {
                None | Some(Value::Null) => Value::Array(Vec::new()),
                Some(list @ Value::Array(_)) => list.clone(),
                Some(other) => {
                    return Err(invalid(
                        at("transforms"),
                        format!(
                            "test {name:?}: must be an array of transforms, not {}",
                            describe(other)
                        ),
                    ));
                }
            };
            let condition = match test.get("condition") {
                Some(c @ Value::Object(_)) => c.clone(),
                None | Some(Value::Null) => {
                    return Err(invalid(
                        at("condition"),
                        format!(
                            "test {name:?}: is missing; a test checks a condition on every output"
                        ),
                    ));
                }
                Some(other) => {
                    return Err(invalid(
                        at("condition"),
                        format!(
                            "test {name:?}: must be a condition {{type, settings}}, not {}",
                            describe(other)
                        ),
                    ));
                }
            };
            let outputs = match test.get("outputs") {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().map(|n| n as usize),
                Some(other) => {
                    return Err(invalid(
                        at("outputs"),
                        format!(
                            "test {name:?}: must be a whole number of output messages, not {}",
                            describe(other)
                        ),
                    ));
                }
            };
            tests.push(TestCase {
                index,
                name,
                transforms,
                condition,
                outputs,
            });
        }
        Ok(tests)
    }

    /// The `concurrency`, a positive integer, when the config sets one (`null` counts as
    /// not set). Zero is refused: Substation's Lambda app hangs on it.
    pub fn concurrency(&self) -> Result<Option<usize>, ConfigLoadError> {
        let invalid = |message: String| ConfigLoadError::Invalid {
            path: self.path.clone(),
            field: "concurrency".into(),
            message,
        };
        match self.json.get("concurrency") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(0) => Err(invalid(
                    "must be a positive integer, not 0 (it is the number of messages processed at once)"
                        .into(),
                )),
                Some(c) => usize::try_from(c)
                    .map(Some)
                    .map_err(|_| invalid(format!("{c} is too large"))),
                None => Err(invalid(format!("must be a positive integer, not {n}"))),
            },
            Some(other) => Err(invalid(format!(
                "must be a positive integer, not {}",
                describe(other)
            ))),
        }
    }
}
