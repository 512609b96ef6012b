//! What a type's constructor is handed while the registry builds it: [`Build`], the one
//! interface every type's `build` function is written against. It decodes the settings
//! (an unknown key warns, with the known name it most likely meant, and an error about a
//! setting names such a near miss), makes errors that name the transform and the field,
//! compiles keys and Go regexes, and builds the lists, conditions and transforms nested in
//! the settings through the same registry. Beside [`super`], which holds the table of types
//! and walks a config to find what to build.

use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Builder, ConfigJson, nearest};
use crate::context::Context;
use crate::error::{ConfigError, ConfigWarning};
use crate::message::Key;
use crate::name::TransformName;
use crate::pipeline::Pipeline;
use crate::transform::{Condition, Transform};

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
    /// The handle for the type `type_name` found at `location`, with its id and its
    /// settings (the id removed).
    pub(super) fn new(
        builder: &'a Builder<'a>,
        location: &str,
        type_name: &'a str,
        id: Arc<str>,
        settings: Value,
    ) -> Self {
        Build {
            builder,
            location: location.to_string(),
            type_name,
            id,
            settings,
            unknown: Mutex::default(),
        }
    }

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

/// The keys of a transform's `object` setting, as Substation and the library name them.
const OBJECT_KEYS: &[&str] = &[
    "source_key",
    "target_key",
    "batch_key",
    "src",
    "trg",
    "btch",
];

#[cfg(test)]
mod tests {
    use super::super::{Builder, Registry};
    use super::*;
    use crate::transform::MapTransform;
    use crate::type_info::TypeInfo;

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
}
