//! The registry: builds transforms and conditions from their `{type, settings}` configs.
//!
//! The engine knows no transform by name; the `sluice-transforms` crate registers each one
//! with a single line that passes its [`TypeInfo`] (name, library function, summary, reach,
//! example), from which the lists about the types are derived. Building reports problems with their place in the config
//! (`transforms[2].settings.cases[0].transforms[1]`), the type, the id and the field, and an
//! unknown type names the nearest known ones.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::context::Context;
use crate::error::{ConfigError, ConfigWarning};
use crate::message::Key;
use crate::name::TransformName;
use crate::pipeline::Pipeline;
use crate::transform::{Condition, MapTransform, StatefulTransform, StatelessTransform, Transform};
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

/// What a constructor sees: its settings, where it is, the context it is built in, and how
/// to build what it contains.
pub struct Build<'a> {
    builder: &'a Builder<'a>,
    location: String,
    type_name: &'a str,
    id: Arc<str>,
    settings: Value,
    /// The unknown keys [`Build::settings`] found, as dotted paths.
    unknown: Mutex<Vec<String>>,
}

impl<'a> Build<'a> {
    /// What the pipeline's transforms share: state files, store instances, telemetry, the
    /// clock.
    pub fn context(&self) -> &Arc<Context> {
        self.builder.ctx
    }

    /// The transform's id: its `id` setting, or its type name.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// The transform as the user reads it in errors: where it is, its type and its id.
    pub fn name(&self) -> TransformName {
        TransformName::written(&self.location, self.type_name, self.id.clone())
    }

    /// The type name.
    pub fn type_name(&self) -> &str {
        self.type_name
    }

    /// Where it is in the config.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The settings as configured, undecoded (what identifies this transform's configuration,
    /// e.g. in a fingerprint); [`Build::settings`] decodes them.
    pub fn raw_settings(&self) -> &Value {
        &self.settings
    }

    /// Decodes the settings into the transform's settings struct; unknown keys warn, with
    /// the known names closest to a top-level one, and are kept so that an error about a
    /// setting they resemble names them ([`Build::error`]).
    pub fn settings<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        match crate::settings::decode::<T>(&self.settings) {
            Ok((v, unknown)) => {
                let known = crate::settings::field_names::<T>();
                // A key of `object` given beside it (`sub.tf.obj.copy({ src: 'a' })` for
                // `{ obj: { src: 'a' } }`) would leave the transform doing nothing.
                if known.contains(&"object")
                    && let Some(k) = unknown.iter().find(|k| OBJECT_KEYS.contains(&k.as_str()))
                {
                    return Err(self.field_error(
                        k,
                        format!(
                            "{k:?} belongs inside \"object\" (the library's obj: {{ {k}: ... }}); beside it, it is not a setting and the transform would read nothing"
                        ),
                    ));
                }
                for k in &unknown {
                    let close = if k.contains('.') {
                        Vec::new()
                    } else {
                        nearest(k, known.iter().copied())
                    };
                    let hint = match close.as_slice() {
                        [] => format!(
                            "check its spelling against the reference for {}",
                            self.type_name
                        ),
                        names => format!(
                            "did you mean {}?",
                            names
                                .iter()
                                .map(|n| format!("{n:?}"))
                                .collect::<Vec<_>>()
                                .join(" or ")
                        ),
                    };
                    self.warn(format!("unknown setting {k:?} is ignored ({hint})"));
                }
                if let Ok(mut u) = self.unknown.lock() {
                    *u = unknown;
                }
                Ok(v)
            }
            Err((field, msg)) => {
                Err(self.error(if field.is_empty() { None } else { Some(field) }, msg))
            }
        }
    }

    /// An error about `field` of this transform. When the settings hold an unknown key
    /// that looks like `field` (`seperator` for a missing `separator`), the error names it.
    pub fn error(&self, field: Option<String>, message: impl Into<String>) -> ConfigError {
        let mut message = message.into();
        if let Some(f) = &field
            && let Ok(unknown) = self.unknown.lock()
        {
            let name = f.rsplit('.').next().unwrap_or(f);
            let parent = &f[..f.len() - name.len()];
            if let Some(typo) = unknown.iter().find(|u| {
                let (u_parent, u_name) = match u.rsplit_once('.') {
                    Some((p, n)) => (&u[..p.len() + 1], n),
                    None => ("", u.as_str()),
                };
                u_parent == parent && !nearest(u_name, std::iter::once(name)).is_empty()
            }) {
                message.push_str(&format!(
                    " (the settings have {typo:?}, which is not a setting: did you mean {f:?}?)"
                ));
            }
        }
        ConfigError {
            location: self.location.clone(),
            type_name: Some(self.type_name.to_string()),
            id: Some(self.id.to_string()),
            field,
            message,
        }
    }

    /// An error about `field` of this transform.
    pub fn field_error(&self, field: &str, message: impl Into<String>) -> ConfigError {
        self.error(Some(field.to_string()), message)
    }

    /// Reports a warning at this transform.
    pub fn warn(&self, message: String) {
        if let Ok(mut w) = self.builder.warnings.lock() {
            w.push(ConfigWarning {
                location: self.location.clone(),
                message,
            });
        }
    }

    /// Compiles a key found in `field`.
    pub fn key(&self, field: &str, key: &str) -> Result<Key, ConfigError> {
        Key::parse(key).map_err(|e| self.field_error(field, e.to_string()))
    }

    /// Compiles an optional key; empty strings count as absent.
    pub fn opt_key(&self, field: &str, key: &Option<String>) -> Result<Option<Key>, ConfigError> {
        match key.as_deref() {
            None | Some("") => Ok(None),
            Some(k) => self.key(field, k).map(Some),
        }
    }

    /// Compiles a regular expression found in `field`, read with Go's syntax (a Substation
    /// config's patterns are Go's; see [`crate::go_regex`]).
    pub fn regex(&self, field: &str, pattern: &str) -> Result<regex::Regex, ConfigError> {
        crate::go_regex::compile(pattern)
            .map_err(|e| self.field_error(field, format!("invalid regular expression: {e}")))
    }

    /// [`Build::regex`] for matching bytes.
    pub fn bytes_regex(
        &self,
        field: &str,
        pattern: &str,
    ) -> Result<regex::bytes::Regex, ConfigError> {
        crate::go_regex::compile_bytes(pattern)
            .map_err(|e| self.field_error(field, format!("invalid regular expression: {e}")))
    }

    /// Builds the transform list found in `field` (e.g. `transforms`, `cases[0].transforms`).
    pub fn pipeline(&self, field: &str, list: &impl ConfigJson) -> Result<Pipeline, ConfigError> {
        self.builder.list(
            &list.to_config(),
            &format!("{}.settings.{field}", self.location),
        )
    }

    /// Builds the condition found in `field`.
    pub fn condition(
        &self,
        field: &str,
        cfg: &impl ConfigJson,
    ) -> Result<Arc<dyn Condition>, ConfigError> {
        self.builder.cond(
            &cfg.to_config(),
            &format!("{}.settings.{field}", self.location),
        )
    }

    /// Builds a single transform found in `field` (e.g. an auxiliary transform).
    pub fn transform(&self, field: &str, cfg: &impl ConfigJson) -> Result<Transform, ConfigError> {
        self.builder
            .one(
                &cfg.to_config(),
                &format!("{}.settings.{field}", self.location),
            )
            .map(|(_, t)| t)
    }
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

/// The keys of a transform's `object` setting, as Substation and the library name them.
const OBJECT_KEYS: &[&str] = &[
    "source_key",
    "target_key",
    "batch_key",
    "src",
    "trg",
    "btch",
];

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
        let b = Build {
            builder: self,
            location: location.to_string(),
            type_name,
            id,
            settings,
            unknown: Mutex::default(),
        };
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
        let b = Build {
            builder: self,
            location: location.to_string(),
            type_name,
            id,
            settings,
            unknown: Mutex::default(),
        };
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

    /// A transform whose settings are `{separator, batch}` and that needs `separator`.
    fn needs_separator(b: &Build<'_>) -> Result<Transform, ConfigError> {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Settings {
            separator: Option<String>,
            #[allow(dead_code)]
            batch: Option<Value>,
        }
        let s: Settings = b.settings()?;
        if s.separator.is_none() {
            return Err(b.field_error("separator", "missing required option: separator"));
        }
        Err(b.field_error("separator", "built"))
    }

    #[test]
    fn misspelt_settings_are_named_with_what_they_probably_meant() {
        let mut r = Registry::new();
        const JOINER: TypeInfo = TypeInfo::named("joiner");
        r.transform(&JOINER, needs_separator);
        let built = |settings: Value| {
            let ctx = Arc::default();
            let b = Builder::new(&r, &ctx);
            let made = b.one(
                &serde_json::json!({"type": "joiner", "settings": settings}),
                "t[0]",
            );
            let warnings: Vec<String> = b
                .warnings
                .lock()
                .unwrap()
                .iter()
                .map(|w| w.message.clone())
                .collect();
            (made.err().map(|e| e.to_string()), warnings)
        };
        let (err, warnings) = built(serde_json::json!({"seperator": ",", "btach": {}}));
        let err = err.unwrap();
        assert!(
            err.contains("missing required option: separator (the settings have \"seperator\", which is not a setting: did you mean \"separator\"?)"),
            "{err}"
        );
        assert_eq!(
            warnings,
            [
                "unknown setting \"seperator\" is ignored (did you mean \"separator\"?)",
                "unknown setting \"btach\" is ignored (did you mean \"batch\"?)",
            ]
        );
        // Nothing like it: the reference.
        let (_, warnings) = built(serde_json::json!({"separator": ",", "zzz": 1}));
        assert_eq!(
            warnings,
            [
                "unknown setting \"zzz\" is ignored (check its spelling against the reference for joiner)"
            ]
        );
        assert_eq!(
            crate::settings::field_names::<BatchSettingsProbe>(),
            ["count", "size"]
        );
    }

    #[test]
    fn a_key_of_object_given_beside_it_is_an_error() {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Settings {
            #[allow(dead_code)]
            object: Option<Value>,
        }
        let mut r = Registry::new();
        struct Keep;
        impl MapTransform for Keep {
            fn map(
                &self,
                _: &mut crate::message::Message,
            ) -> Result<crate::transform::InPlace, crate::error::TransformError> {
                Ok(crate::transform::InPlace::Keep)
            }
        }
        const COPIER: TypeInfo = TypeInfo::named("copier");
        r.transform(&COPIER, |b| {
            let _: Settings = b.settings()?;
            Ok(Transform::map(Keep))
        });
        let err = r
            .build_pipeline(
                &serde_json::json!([{"type": "copier", "settings": {"src": "a", "trg": "b"}}]),
                "transforms",
            )
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("settings.src: \"src\" belongs inside \"object\""),
            "{err}"
        );
        assert!(
            r.build_pipeline(
                &serde_json::json!([{"type": "copier", "settings": {"object": {"src": "a"}}}]),
                "transforms",
            )
            .is_ok()
        );
    }

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct BatchSettingsProbe {
        count: u32,
        size: u32,
    }

    #[test]
    fn missing_transforms_is_an_error() {
        let r = Registry::new();
        let err = r.build_pipeline(&Value::Null, "transforms").err().unwrap();
        assert!(err.to_string().contains("no transforms configured"));
    }
}
