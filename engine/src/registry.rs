//! The registry: builds transforms and conditions from their `{type, settings}` configs.
//!
//! The engine knows no transform by name; the `sluice-transforms` crate registers each one
//! with a single line that passes its [`TypeInfo`] (name, library function, summary, reach,
//! example), from which the lists about the types are derived. Building reports problems
//! with their place in the config (`transforms[2].settings.cases[0].transforms[1]`), the
//! type, the id and the field, and an unknown type names the nearest known ones.
//!
//! This file holds the table of types and the walk of a config; what a type's constructor
//! is handed, [`Build`], is in `registry/build.rs`.

mod build;

pub use build::Build;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::context::Context;
use crate::error::{ConfigError, ConfigWarning};
use crate::message::Key;
use crate::name::TransformName;
use crate::pipeline::Pipeline;
use crate::transform::{
    Compute, Condition, MapTransform, StatefulTransform, StatelessTransform, Transform,
};
use crate::type_info::TypeInfo;

/// Config JSON: what Jsonnet produces (`serde_json::Value`), or a message value used as
/// config (in tests, built with [`crate::json!`]).
pub trait ConfigJson {
    /// As `serde_json::Value`.
    fn to_config(&self) -> Cow<'_, Value>;
}

impl ConfigJson for Value {
    fn to_config(&self) -> Cow<'_, Value> {
        Cow::Borrowed(self)
    }
}

impl ConfigJson for crate::json::Value {
    fn to_config(&self) -> Cow<'_, Value> {
        Cow::Owned(Value::from(self.clone()))
    }
}

/// Builds a transform from its settings.
pub type TransformCtor =
    Arc<dyn Fn(&Build<'_>) -> Result<Transform, ConfigError> + Send + Sync + 'static>;
/// Builds a condition from its settings.
pub type ConditionCtor =
    Arc<dyn Fn(&Build<'_>) -> Result<Arc<dyn Condition>, ConfigError> + Send + Sync + 'static>;

/// Every transform and condition type sluice knows, each with its [`TypeInfo`].
#[derive(Default, Clone)]
pub struct Registry {
    transforms: BTreeMap<&'static str, TransformCtor>,
    conditions: BTreeMap<&'static str, ConditionCtor>,
    transform_infos: BTreeMap<&'static str, &'static TypeInfo>,
    condition_infos: BTreeMap<&'static str, &'static TypeInfo>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the transform type `info` describes (under its name and its aliases),
    /// whose constructor says which kind it builds (a transform whose kind depends on its
    /// settings, such as a meta transform around a list).
    pub fn transform(
        &mut self,
        info: &'static TypeInfo,
        ctor: impl Fn(&Build<'_>) -> Result<Transform, ConfigError> + Send + Sync + 'static,
    ) -> &mut Self {
        let ctor: TransformCtor = Arc::new(ctor);
        for name in info.names() {
            self.transforms.insert(name, ctor.clone());
            self.transform_infos.insert(name, info);
        }
        self
    }

    /// Registers a [`MapTransform`] transform type built by `build`.
    pub fn map<T: MapTransform>(
        &mut self,
        info: &'static TypeInfo,
        build: fn(&Build<'_>) -> Result<T, ConfigError>,
    ) -> &mut Self {
        self.transform(info, move |b| build(b).map(Transform::map))
    }

    /// Registers a [`MapTransform`] transform type built by `build` that, when `keys` gives
    /// its source and target keys, does nothing on a JSON document but write at the target
    /// what it computes from the values at the source ([`MapPlan::Compute`](crate::transform::MapPlan::Compute)): the pipeline
    /// may then run it together with the copies and computations next to it.
    pub fn computing<T: MapTransform + Compute>(
        &mut self,
        info: &'static TypeInfo,
        build: fn(&Build<'_>) -> Result<T, ConfigError>,
        keys: fn(&T) -> Option<(Key, Key)>,
    ) -> &mut Self {
        self.transform(info, move |b| {
            let t = build(b)?;
            Ok(match keys(&t) {
                Some((from, to)) => Transform::map_computing(from, to, t),
                None => Transform::map(t),
            })
        })
    }

    /// Registers a [`StatelessTransform`] transform type built by `build`.
    pub fn stateless<T: StatelessTransform>(
        &mut self,
        info: &'static TypeInfo,
        build: fn(&Build<'_>) -> Result<T, ConfigError>,
    ) -> &mut Self {
        self.transform(info, move |b| build(b).map(Transform::stateless))
    }

    /// Registers a [`StatefulTransform`] transform type built by `build`.
    pub fn stateful<T: StatefulTransform>(
        &mut self,
        info: &'static TypeInfo,
        build: fn(&Build<'_>) -> Result<T, ConfigError>,
    ) -> &mut Self {
        self.transform(info, move |b| build(b).map(Transform::stateful))
    }

    /// Registers the condition type `info` describes (under its name and its aliases),
    /// built by `build`.
    pub fn condition<C: Condition>(
        &mut self,
        info: &'static TypeInfo,
        build: fn(&Build<'_>) -> Result<C, ConfigError>,
    ) -> &mut Self {
        let ctor: ConditionCtor =
            Arc::new(move |b| build(b).map(|c| Arc::new(c) as Arc<dyn Condition>));
        for name in info.names() {
            self.conditions.insert(name, ctor.clone());
            self.condition_infos.insert(name, info);
        }
        self
    }

    /// The registered transform type names, aliases included, sorted.
    pub fn transform_types(&self) -> impl Iterator<Item = &str> {
        self.transforms.keys().copied()
    }

    /// The registered condition type names, aliases included, sorted.
    pub fn condition_types(&self) -> impl Iterator<Item = &str> {
        self.conditions.keys().copied()
    }

    /// The descriptor of the transform type `name` (a name or an alias).
    pub fn transform_info(&self, name: &str) -> Option<&'static TypeInfo> {
        self.transform_infos.get(name).copied()
    }

    /// The descriptor of the condition type `name` (a name or an alias).
    pub fn condition_info(&self, name: &str) -> Option<&'static TypeInfo> {
        self.condition_infos.get(name).copied()
    }

    /// Each registered transform type's descriptor once, sorted by name.
    pub fn transform_infos(&self) -> impl Iterator<Item = &'static TypeInfo> + '_ {
        primary(&self.transform_infos)
    }

    /// Each registered condition type's descriptor once, sorted by name.
    pub fn condition_infos(&self) -> impl Iterator<Item = &'static TypeInfo> + '_ {
        primary(&self.condition_infos)
    }

    /// Builds a pipeline from a JSON array of transform configs found at `location`, in a
    /// context of its own ([`Context::new`]).
    pub fn build_pipeline(
        &self,
        list: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<Pipeline>, ConfigError> {
        self.build_pipeline_in(&Context::new(), list, location)
    }

    /// Builds a pipeline from a JSON array of transform configs found at `location`, in
    /// `ctx`: its transforms share `ctx`'s stores and report to its telemetry.
    pub fn build_pipeline_in(
        &self,
        ctx: &Arc<Context>,
        list: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<Pipeline>, ConfigError> {
        let b = Builder::new(self, ctx);
        let p = b.list(&list.to_config(), location)?;
        Ok(b.done(p))
    }

    /// Builds one transform from `{type, settings}` found at `location`, in a context of its
    /// own.
    pub fn build_transform(
        &self,
        cfg: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<Transform>, ConfigError> {
        self.build_transform_in(&Context::new(), cfg, location)
    }

    /// Builds one transform from `{type, settings}` found at `location`, in `ctx`.
    pub fn build_transform_in(
        &self,
        ctx: &Arc<Context>,
        cfg: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<Transform>, ConfigError> {
        let b = Builder::new(self, ctx);
        let (_, t) = b.one(&cfg.to_config(), location)?;
        Ok(b.done(t))
    }

    /// [`Registry::build_transform_in`], with the transform's name (its place and id), which
    /// a pipeline of it names its errors by.
    pub fn build_named_transform_in(
        &self,
        ctx: &Arc<Context>,
        cfg: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<(TransformName, Transform)>, ConfigError> {
        let b = Builder::new(self, ctx);
        let named = b.one(&cfg.to_config(), location)?;
        Ok(b.done(named))
    }

    /// Builds a condition from `{type, settings}` found at `location`, in a context of its
    /// own.
    pub fn build_condition(
        &self,
        cfg: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<Arc<dyn Condition>>, ConfigError> {
        self.build_condition_in(&Context::new(), cfg, location)
    }

    /// Builds a condition from `{type, settings}` found at `location`, in `ctx`.
    pub fn build_condition_in(
        &self,
        ctx: &Arc<Context>,
        cfg: &impl ConfigJson,
        location: &str,
    ) -> Result<Built<Arc<dyn Condition>>, ConfigError> {
        let b = Builder::new(self, ctx);
        let c = b.cond(&cfg.to_config(), location)?;
        Ok(b.done(c))
    }
}

/// The descriptors of `infos` once each: the entries under their own name, not an alias.
fn primary<'r>(
    infos: &'r BTreeMap<&'static str, &'static TypeInfo>,
) -> impl Iterator<Item = &'static TypeInfo> + 'r {
    infos
        .iter()
        .filter(|(name, info)| **name == info.name)
        .map(|(_, info)| *info)
}

/// Something built, with the warnings found on the way.
pub struct Built<T> {
    /// What was built.
    pub value: T,
    /// Unknown settings keys.
    pub warnings: Vec<ConfigWarning>,
}

fn split_config<'v>(
    cfg: &'v Value,
    location: &str,
    what: &str,
) -> Result<(&'v str, Value), ConfigError> {
    let obj = cfg.as_object().ok_or_else(|| {
        ConfigError::new(
            location,
            format!(
                "a {what} must be an object {{\"type\": ..., \"settings\": {{...}}}}, found {}",
                kind_of(cfg)
            ),
        )
    })?;
    let type_name = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(ConfigError::new(
                location,
                format!("\"type\" must be a string, found {}", kind_of(other)),
            ));
        }
        None => {
            return Err(ConfigError::new(
                location,
                format!("the {what} has no \"type\""),
            ));
        }
    };
    let settings = match obj.get("settings") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(m)) => Value::Object(m.clone()),
        Some(other) => {
            return Err(ConfigError {
                type_name: Some(type_name.to_string()),
                ..ConfigError::new(
                    location,
                    format!("\"settings\" must be an object, found {}", kind_of(other)),
                )
            });
        }
    };
    Ok((type_name, settings))
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn take_id(settings: &mut Value, type_name: &str) -> Arc<str> {
    match settings.as_object_mut().and_then(|m| m.shift_remove("id")) {
        Some(Value::String(s)) if !s.is_empty() => Arc::from(s),
        _ => Arc::from(type_name),
    }
}

/// The known names closest to `name`, best first.
pub fn nearest<'n>(name: &str, known: impl Iterator<Item = &'n str>) -> Vec<&'n str> {
    let mut scored: Vec<(f64, &str)> = known
        .map(|k| {
            let mut s = strsim::jaro_winkler(name, k);
            if k.contains(name) || name.contains(k) {
                s += 0.1;
            }
            (s, k)
        })
        .filter(|(s, _)| *s > 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(3).map(|(_, k)| k).collect()
}

fn unknown_type(location: &str, what: &str, name: &str, known: Vec<&str>) -> ConfigError {
    let hint = if known.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            known
                .iter()
                .map(|k| format!("{k:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    ConfigError {
        type_name: Some(name.to_string()),
        ..ConfigError::new(location, format!("unknown {what} type {name:?}{hint}"))
    }
}

/// One build: the registry, the context, and the warnings found on the way.
struct Builder<'a> {
    registry: &'a Registry,
    ctx: &'a Arc<Context>,
    warnings: Mutex<Vec<ConfigWarning>>,
}

impl<'a> Builder<'a> {
    fn new(registry: &'a Registry, ctx: &'a Arc<Context>) -> Self {
        Builder {
            registry,
            ctx,
            warnings: Mutex::new(Vec::new()),
        }
    }

    fn done<T>(self, value: T) -> Built<T> {
        Built {
            value,
            warnings: self.warnings.into_inner().unwrap_or_default(),
        }
    }

    fn one(&self, cfg: &Value, location: &str) -> Result<(TransformName, Transform), ConfigError> {
        let (type_name, mut settings) = split_config(cfg, location, "transform")?;
        let id = take_id(&mut settings, type_name);
        let ctor = self
            .registry
            .transforms
            .get(type_name)
            .ok_or_else(|| ConfigError {
                id: Some(id.to_string()),
                ..unknown_type(
                    location,
                    "transform",
                    type_name,
                    nearest(type_name, self.registry.transform_types()),
                )
            })?;
        let b = Build::new(self, location, type_name, id, settings);
        Ok((b.name(), ctor(&b)?))
    }

    fn list(&self, list: &Value, location: &str) -> Result<Pipeline, ConfigError> {
        let items = match list {
            Value::Array(a) => a,
            Value::Null => return Err(ConfigError::new(location, "no transforms configured")),
            other => {
                return Err(ConfigError::new(
                    location,
                    format!("transforms must be an array, found {}", kind_of(other)),
                ));
            }
        };
        let mut steps = Vec::with_capacity(items.len());
        for (i, cfg) in items.iter().enumerate() {
            steps.push(self.one(cfg, &format!("{location}[{i}]"))?);
        }
        Ok(Pipeline::new(steps).in_context(self.ctx.clone()))
    }

    fn cond(&self, cfg: &Value, location: &str) -> Result<Arc<dyn Condition>, ConfigError> {
        let (type_name, mut settings) = split_config(cfg, location, "condition")?;
        let id = take_id(&mut settings, type_name);
        let ctor = self
            .registry
            .conditions
            .get(type_name)
            .ok_or_else(|| ConfigError {
                id: Some(id.to_string()),
                ..unknown_type(
                    location,
                    "condition",
                    type_name,
                    nearest(type_name, self.registry.condition_types()),
                )
            })?;
        let b = Build::new(self, location, type_name, id, settings);
        ctor(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names() {
        let known = [
            "object_copy",
            "object_delete",
            "string_to_upper",
            "send_stdout",
        ];
        assert_eq!(
            nearest("object_cpy", known.iter().copied())[0],
            "object_copy"
        );
        assert_eq!(
            nearest("send_stdou", known.iter().copied())[0],
            "send_stdout"
        );
        assert!(nearest("zzzz", known.iter().copied()).is_empty());
    }

    #[test]
    fn unknown_type_names_candidates() {
        let mut r = Registry::new();
        const COPY: TypeInfo = TypeInfo::named("object_copy");
        r.transform(&COPY, |_| unreachable!());
        let err = r
            .build_pipeline(&serde_json::json!([{"type": "object_cpy"}]), "transforms")
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(text.starts_with("transforms[0]"), "{text}");
        assert!(text.contains("did you mean \"object_copy\""), "{text}");
        // The id names which of several transforms of that type is meant.
        let err = r
            .build_pipeline(
                &serde_json::json!([{"type": "object_cpy", "settings": {"id": "c1"}}]),
                "transforms",
            )
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("transforms[0] (object_cpy, id c1): unknown transform type"),
            "{err}"
        );
    }

    #[test]
    fn missing_transforms_is_an_error() {
        let r = Registry::new();
        let err = r.build_pipeline(&Value::Null, "transforms").err().unwrap();
        assert!(err.to_string().contains("no transforms configured"));
    }
}
