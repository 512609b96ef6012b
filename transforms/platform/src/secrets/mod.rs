//! Secrets: the process-wide cache that `utility_secret` fills, the [`Secret`] type that
//! keeps values out of logs, errors and `Debug` output, and [`Template`], the one
//! interpolation of `${SECRET:id}` (and `${DATA}`) that the HTTP transforms use.
//!
//! Substation keeps secrets in a global cache (capacity 1000) keyed by the secret's `id`;
//! `utility_secret` puts them there and strings that contain `${SECRET:id}` read them. The
//! same happens here, with these differences (`reference/substation.md` §1.10, §2.5):
//!
//! - A template naming a secret that is not loaded is an error that names the id, instead
//!   of sending the literal `${SECRET:id}` text.
//! - An entry expires `ttl_offset` after it was *fetched* (not after the transform was
//!   built), and is refreshed once when it expires; Substation never advances the expiry,
//!   so after the first expiry it re-fetches on every message.
//! - The cache has no capacity bound: its ids come from the config, not from data.
//!
//! Every error text that could carry a value (an HTTP client's error, say) goes through
//! `redact`, which replaces every cached value with `<redacted>`: the value as is, and
//! the forms a server may echo it back in (JSON-escaped, percent-encoded with `%20` or
//! `+` for a space, base64 standard and URL-safe, padded or not), computed once when the
//! value is stored. Text that is cut to a length (an answer's body in an error) goes
//! through `redact_cut`, which redacts *before* cutting and drops a tail that is the
//! start of a secret, so a cut never leaves a secret's first characters.

#[cfg(feature = "aws")]
pub mod aws_secrets_manager;
pub mod environment_variable;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sluice_engine::{Build, ConfigError, TransformError};

/// How long a fetched secret is used before it is fetched again, when `ttl_offset` is not
/// set (Substation's default).
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// What replaces a secret's value wherever it would be shown.
pub(crate) const REDACTED: &str = "<redacted>";

/// A secret value. Its `Debug` and `Display` never show it; [`Secret::expose`] does, for the
/// one place that must use it (a request being built).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Secret(value.into())
    }

    /// The value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({REDACTED})")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

struct Entry {
    value: Secret,
    /// The value and its encoded forms ([`forms`]), longest first.
    forms: Vec<String>,
    /// `None`: never expires.
    expires: Option<Instant>,
}

/// The forms `value` may be echoed back in: as is, JSON-escaped, percent-encoded (`%20`
/// and `+` for a space, upper- and lower-case hex), base64 (standard and URL-safe, with and
/// without padding); each once, longest first (so a longer form is replaced before a
/// shorter one inside it).
fn forms(value: &str) -> Vec<String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    if value.is_empty() {
        return Vec::new();
    }
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json
        .strip_prefix('"')
        .and_then(|j| j.strip_suffix('"'))
        .unwrap_or(value)
        .to_string();
    let percent = percent_encode(value);
    let plus: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
    let mut out = vec![
        value.to_string(),
        json.replace('/', "\\/"),
        json,
        percent.to_ascii_lowercase(),
        percent,
        plus,
    ];
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        out.push(engine.encode(value));
    }
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

/// `value` with every byte but RFC 3986's unreserved characters as `%XX`.
pub(crate) fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

static CACHE: LazyLock<RwLock<HashMap<String, Entry>>> = LazyLock::new(Default::default);

fn cache_read() -> std::sync::RwLockReadGuard<'static, HashMap<String, Entry>> {
    CACHE.read().unwrap_or_else(|p| p.into_inner())
}

/// Puts `value` in the cache under `id`, fresh for `ttl` from now (`Duration::ZERO`: for
/// the life of the process).
pub fn store(id: &str, value: Secret, ttl: Duration) {
    let expires = (!ttl.is_zero()).then(|| Instant::now() + ttl);
    CACHE.write().unwrap_or_else(|p| p.into_inner()).insert(
        id.to_string(),
        Entry {
            forms: forms(value.expose()),
            value,
            expires,
        },
    );
}

/// The value cached under `id`, fresh or not (a template uses the last value fetched; the
/// `utility_secret` that owns the id refreshes it).
pub(crate) fn lookup(id: &str) -> Option<Secret> {
    cache_read().get(id).map(|e| e.value.clone())
}

/// Whether `id` is cached and not expired at `now`.
pub fn is_fresh(id: &str, now: Instant) -> bool {
    cache_read()
        .get(id)
        .is_some_and(|e| e.expires.is_none_or(|t| now < t))
}

/// `text` with every cached secret value, in each of its forms (see the module
/// documentation), replaced by [`REDACTED`].
pub(crate) fn redact(text: &str) -> String {
    let cache = cache_read();
    let mut forms: Vec<&str> = cache
        .values()
        .flat_map(|e| e.forms.iter().map(String::as_str))
        .collect();
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let mut out = text.to_string();
    for f in forms {
        if out.contains(f) {
            out = out.replace(f, REDACTED);
        }
    }
    out
}

/// The shortest start of a secret that [`redact_cut`] drops from the end of a text: a
/// shorter one is too likely to be ordinary text.
const SHORTEST_PREFIX: usize = 3;

/// `text` redacted ([`redact`]) and then cut after `max_chars` characters (on a character
/// boundary; a `<redacted>` the cut falls in is kept whole; `...` appended when cut); a tail that is the start of a secret in
/// one of its forms (at least [`SHORTEST_PREFIX`] characters, as a cut elsewhere may have
/// left it) is dropped as well.
pub(crate) fn redact_cut(text: &str, max_chars: usize) -> String {
    let mut out = redact(text);
    let cut = out.char_indices().nth(max_chars).map(|(at, _)| {
        // A cut inside a `<redacted>` keeps the whole of it.
        out.match_indices(REDACTED)
            .map(|(start, m)| start + m.len())
            .find(|&end| end - REDACTED.len() < at && at < end)
            .unwrap_or(at)
    });
    if let Some(at) = cut {
        out.truncate(at);
    }
    let dropped = drop_secret_tail(&mut out);
    if cut.is_some() || dropped {
        out.push_str("...");
    }
    out
}

/// Drops the longest tail of `text` that is a proper start of a cached secret's form;
/// whether it dropped one.
fn drop_secret_tail(text: &mut String) -> bool {
    let cache = cache_read();
    let mut longest = 0;
    for f in cache.values().flat_map(|e| e.forms.iter()) {
        for (at, _) in f.char_indices().skip(SHORTEST_PREFIX) {
            if at > longest && text.ends_with(&f[..at]) {
                longest = at;
            }
        }
    }
    if longest > 0 {
        text.truncate(text.len() - longest);
    }
    longest > 0
}

/// Whether `bytes` hold a cached secret's value (as is).
pub(crate) fn holds_secret(bytes: &[u8]) -> bool {
    let cache = cache_read();
    cache.values().any(|e| {
        let v = e.value.expose().as_bytes();
        !v.is_empty() && bytes.windows(v.len()).any(|w| w == v)
    })
}

/// An error from filling a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template names a secret no `utility_secret` has loaded.
    #[error(
        "secret {0:?} is not loaded: a utility_secret transform with this id must run before this one"
    )]
    NotLoaded(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Secret(String),
    Data,
}

/// A string with `${SECRET:id}` and `${DATA}` placeholders, parsed once when a transform is
/// built and filled per request. Any other `${...}` is kept as written (URLs may carry such
/// text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

const SECRET_OPEN: &str = "${SECRET:";
const DATA: &str = "${DATA}";

impl Template {
    /// Parses `text`; the error says what is wrong (an unterminated or empty secret id).
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("${") {
            lit.push_str(&rest[..at]);
            let tail = &rest[at..];
            if let Some(after) = tail.strip_prefix(SECRET_OPEN) {
                let end = after
                    .find('}')
                    .ok_or_else(|| format!("{text:?}: `${{SECRET:` without a closing `}}`"))?;
                let id = &after[..end];
                if id.is_empty() {
                    return Err(format!("{text:?}: `${{SECRET:}}` names no secret"));
                }
                if !lit.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut lit)));
                }
                parts.push(Part::Secret(id.to_string()));
                rest = &after[end + 1..];
            } else if let Some(after) = tail.strip_prefix(DATA) {
                if !lit.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut lit)));
                }
                parts.push(Part::Data);
                rest = after;
            } else {
                lit.push_str("${");
                rest = &tail[2..];
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template {
            source: text.to_string(),
            parts,
        })
    }

    /// The template as written (placeholders unfilled): what errors show.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether it has a `${DATA}` placeholder.
    pub fn uses_data(&self) -> bool {
        self.parts.contains(&Part::Data)
    }

    /// The ids of the secrets it names.
    pub fn secret_ids(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Secret(id) => Some(id.as_str()),
            _ => None,
        })
    }

    /// The text with each `${SECRET:id}` replaced by the cached secret and each `${DATA}`
    /// by `data` (or nothing). The result may hold secrets: it is for the request only,
    /// never for a message or an error.
    pub fn render(&self, data: Option<&str>) -> Result<String, TemplateError> {
        self.fill(data.unwrap_or(""))
    }

    /// Whether the whole text is `${DATA}`: a URL that data gives whole.
    pub fn is_data_alone(&self) -> bool {
        self.parts == [Part::Data]
    }

    /// [`Template::render`] for a URL: `data` is percent-encoded (every byte but RFC 3986's
    /// unreserved characters), so it stays one path segment or query value and cannot
    /// change the scheme, host or port or add segments; a template that is `${DATA}` alone
    /// takes the data as the whole URL (see `crate::http`).
    pub fn render_url(&self, data: Option<&str>) -> Result<String, TemplateError> {
        let data = data.unwrap_or("");
        if self.is_data_alone() {
            return Ok(data.to_string());
        }
        self.fill(&percent_encode(data))
    }

    /// Where `${DATA}` first stands in the URL, when it is before the end of the authority
    /// (`scheme://host:port/`): the text before it has no `://` followed by a `/`, `?` or
    /// `#`. Data there would choose the host.
    pub fn data_in_authority(&self) -> bool {
        let mut before = String::new();
        for p in &self.parts {
            match p {
                Part::Data => {
                    let after_scheme = before.find("://").map(|at| &before[at + 3..]);
                    return !after_scheme.is_some_and(|a| a.contains(['/', '?', '#']));
                }
                Part::Text(t) => before.push_str(t),
                Part::Secret(_) => before.push('s'),
            }
        }
        false
    }

    fn fill(&self, data: &str) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(self.source.len());
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Data => out.push_str(data),
                Part::Secret(id) => {
                    let s = lookup(id).ok_or_else(|| TemplateError::NotLoaded(id.clone()))?;
                    out.push_str(s.expose());
                }
            }
        }
        Ok(out)
    }
}

/// `secret`: a secret provider's config, `{type, settings}`, as `utility_secret` takes it.
#[derive(Debug, Clone, Deserialize)]
pub struct SecretConfig {
    /// `environment_variable` or `aws_secrets_manager`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The provider's settings.
    #[serde(default)]
    pub settings: serde_json::Value,
}

/// `ttl_offset`: [`DEFAULT_TTL`] when unset.
fn parse_ttl(b: &Build<'_>, field: &str, ttl: &Option<String>) -> Result<Duration, ConfigError> {
    match ttl.as_deref() {
        None | Some("") => Ok(DEFAULT_TTL),
        Some(t) => {
            sluice_engine::settings::parse_go_duration(t).map_err(|m| b.field_error(field, m))
        }
    }
}

/// Where a secret comes from.
pub enum Provider {
    /// An environment variable of the process.
    Environment(environment_variable::EnvironmentVariable),
    /// AWS Secrets Manager.
    #[cfg(feature = "aws")]
    AwsSecretsManager(Box<aws_secrets_manager::AwsSecretsManager>),
}

/// A configured secret: its cache id, how long a value is used, and its provider.
pub struct SecretSource {
    /// The cache key that `${SECRET:id}` names.
    pub id: String,
    /// How long a fetched value is used (`Duration::ZERO`: for the life of the process).
    pub ttl: Duration,
    /// Where it comes from.
    pub provider: Provider,
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.provider {
            Provider::Environment(_) => "environment_variable",
            #[cfg(feature = "aws")]
            Provider::AwsSecretsManager(_) => "aws_secrets_manager",
        };
        f.debug_struct("SecretSource")
            .field("id", &self.id)
            .field("ttl", &self.ttl)
            .field("provider", &kind)
            .finish()
    }
}

impl SecretSource {
    /// Builds the provider config found at `field` (e.g. `secret`) of a transform.
    pub fn build(b: &Build<'_>, field: &str, cfg: &SecretConfig) -> Result<Self, ConfigError> {
        let settings_field = format!("{field}.settings");
        let (id, ttl_offset, provider) = match cfg.kind.as_str() {
            "environment_variable" => {
                let s: environment_variable::Settings = decode(b, &settings_field, &cfg.settings)?;
                let p = environment_variable::EnvironmentVariable::build(b, &settings_field, &s)?;
                (s.id, s.ttl_offset, Provider::Environment(p))
            }
            #[cfg(not(feature = "aws"))]
            "aws_secrets_manager" => {
                return Err(b.field_error(
                    &format!("{field}.type"),
                    crate::built_without_aws("the aws_secrets_manager secret provider"),
                ));
            }
            #[cfg(feature = "aws")]
            "aws_secrets_manager" => {
                let s: aws_secrets_manager::Settings = decode(b, &settings_field, &cfg.settings)?;
                let p = aws_secrets_manager::AwsSecretsManager::build(b, &settings_field, &s)?;
                (s.id, s.ttl_offset, Provider::AwsSecretsManager(Box::new(p)))
            }
            other => {
                return Err(b.field_error(
                    &format!("{field}.type"),
                    format!(
                        "unknown secret provider {other:?} (known: environment_variable, aws_secrets_manager)"
                    ),
                ));
            }
        };
        let id = id.filter(|i| !i.is_empty()).ok_or_else(|| {
            b.field_error(
                &format!("{settings_field}.id"),
                "missing required option: the id that ${SECRET:id} names",
            )
        })?;
        if id.contains('}') {
            return Err(b.field_error(
                &format!("{settings_field}.id"),
                format!("{id:?}: an id cannot contain `}}`"),
            ));
        }
        let ttl = parse_ttl(b, &format!("{settings_field}.ttl_offset"), &ttl_offset)?;
        Ok(SecretSource { id, ttl, provider })
    }

    /// Fetches the value now.
    pub async fn fetch(&self) -> Result<Secret, TransformError> {
        match &self.provider {
            Provider::Environment(p) => p.fetch().map_err(|m| self.fail(m)),
            #[cfg(feature = "aws")]
            Provider::AwsSecretsManager(p) => p.fetch().await.map_err(|m| self.fail(m)),
        }
    }

    /// Fetches and caches the value now when the provider can answer without I/O (an
    /// environment variable); `None` for the others.
    pub fn fetch_now(&self) -> Option<Result<(), String>> {
        match &self.provider {
            Provider::Environment(p) => Some(p.fetch().map(|v| store(&self.id, v, self.ttl))),
            #[cfg(feature = "aws")]
            Provider::AwsSecretsManager(_) => None,
        }
    }

    fn fail(&self, why: String) -> TransformError {
        TransformError::failed(redact(&format!("secret {:?}: {why}", self.id)))
    }
}

/// Decodes a provider's settings, errors naming the field under `field`.
fn decode<T: serde::de::DeserializeOwned>(
    b: &Build<'_>,
    field: &str,
    settings: &serde_json::Value,
) -> Result<T, ConfigError> {
    let settings = if settings.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        settings.clone()
    };
    match sluice_engine::settings::decode::<T>(&settings) {
        Ok((v, unknown)) => {
            for k in unknown {
                b.warn(format!(
                    "unknown setting {field}.{k} is ignored (check its spelling against the reference for utility_secret)"
                ));
            }
            Ok(v)
        }
        Err((f, msg)) => Err(b.field_error(
            &if f.is_empty() {
                field.to_string()
            } else {
                format!("{field}.{f}")
            },
            msg,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn templates_parse_and_render() {
        store("tmpl-key", Secret::new("s3cr3t"), Duration::ZERO);
        // (template, data, rendered)
        let cases = [
            ("https://h/x", None, "https://h/x"),
            (
                "https://h/?k=${SECRET:tmpl-key}&q=${DATA}",
                Some("v"),
                "https://h/?k=s3cr3t&q=v",
            ),
            ("${DATA}", None, ""),
            ("Bearer ${SECRET:tmpl-key}", None, "Bearer s3cr3t"),
            ("a ${OTHER} b $ {", None, "a ${OTHER} b $ {"),
            ("${DATA}${DATA}", Some("x"), "xx"),
        ];
        for (t, data, want) in cases {
            let tpl = Template::parse(t).unwrap();
            assert_eq!(tpl.render(data).unwrap(), want, "{t}");
            assert_eq!(tpl.as_str(), t);
        }
        // Data in a URL: one encoded segment or value; never the authority.
        // (template, data, rendered, data in the authority)
        for (t, data, want, authority) in [
            (
                "https://h/ip/${DATA}",
                "1.2.3.4",
                "https://h/ip/1.2.3.4",
                false,
            ),
            (
                "https://h/ip/${DATA}",
                "../../admin",
                "https://h/ip/..%2F..%2Fadmin",
                false,
            ),
            (
                "https://h/?q=${DATA}",
                "a&b=c#d",
                "https://h/?q=a%26b%3Dc%23d",
                false,
            ),
            (
                "https://h/${DATA}",
                "@evil.com:81/x",
                "https://h/%40evil.com%3A81%2Fx",
                false,
            ),
            ("https://${DATA}/x", "evil.com", "https://evil.com/x", true),
            ("https://h:${DATA}/x", "81", "https://h:81/x", true),
            (
                "${DATA}/x",
                "https://evil.com",
                "https%3A%2F%2Fevil.com/x",
                true,
            ),
            (
                "${DATA}",
                "https://any.where/x?y",
                "https://any.where/x?y",
                false,
            ),
        ] {
            let tpl = Template::parse(t).unwrap();
            assert_eq!(tpl.render_url(Some(data)).unwrap(), want, "{t} {data}");
            assert_eq!(
                tpl.data_in_authority() && !tpl.is_data_alone(),
                authority,
                "{t}"
            );
        }
        assert!(Template::parse("${DATA}").unwrap().uses_data());
        assert!(!Template::parse("${SECRET:a}").unwrap().uses_data());
        assert_eq!(
            Template::parse("${SECRET:a}/${SECRET:b}")
                .unwrap()
                .secret_ids()
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        for (bad, why) in [
            ("x${SECRET:abc", "without a closing"),
            ("${SECRET:}", "names no secret"),
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = Template::parse("${SECRET:tmpl-missing}")
            .unwrap()
            .render(None)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "secret \"tmpl-missing\" is not loaded: a utility_secret transform with this id must run before this one"
        );
    }

    #[test]
    fn freshness_and_redaction() {
        store(
            "fresh-a",
            Secret::new("value-a-123"),
            Duration::from_secs(60),
        );
        store("fresh-b", Secret::new("value-b-456"), Duration::ZERO);
        store(
            "fresh-c",
            Secret::new("value-c-789"),
            Duration::from_nanos(1),
        );
        let now = Instant::now() + Duration::from_millis(1);
        assert!(is_fresh("fresh-a", now));
        assert!(is_fresh("fresh-b", now + Duration::from_secs(1_000_000)));
        assert!(!is_fresh("fresh-c", now), "expired");
        assert!(!is_fresh("fresh-none", now));
        assert_eq!(
            lookup("fresh-c").map(|s| s.expose().to_string()),
            Some("value-c-789".into()),
            "an expired value stays usable until it is refreshed"
        );
        assert_eq!(
            redact("connect to https://u:value-a-123@h failed (value-b-456)"),
            "connect to https://u:<redacted>@h failed (<redacted>)"
        );
    }
    /// A secret echoed back in any of the forms a server may use is redacted.
    #[test]
    fn encoded_forms_are_redacted() {
        let value = "p@ss w/rd\"+é&=k7";
        store("forms-a", Secret::new(value), Duration::ZERO);
        use base64::Engine;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let json = serde_json::to_string(value).unwrap();
        let json = &json[1..json.len() - 1];
        let plus: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
        // (what the text holds, named)
        let cases = [
            ("as is", value.to_string()),
            ("JSON-escaped", json.to_string()),
            ("JSON-escaped with \\/", json.replace('/', "\\/")),
            ("percent-encoded", percent_encode(value)),
            (
                "percent-encoded, lower-case",
                percent_encode(value).to_ascii_lowercase(),
            ),
            ("form-encoded (+)", plus),
            ("base64", STANDARD.encode(value)),
            ("base64, URL-safe", URL_SAFE_NO_PAD.encode(value)),
        ];
        for (form, echoed) in cases {
            assert!(percent_encode(value).contains("%20"));
            let text = format!(r#"{{"error":"bad token {echoed}"}}"#);
            let got = redact(&text);
            assert_eq!(
                got,
                format!(r#"{{"error":"bad token {REDACTED}"}}"#),
                "{form}: {echoed}"
            );
        }
    }

    /// Redaction comes before the cut, and a cut never leaves a secret's first characters.
    #[test]
    fn redaction_comes_before_the_cut() {
        store("cut-a", Secret::new("ZZsecretZZ-1234567"), Duration::ZERO);
        // (text, most characters, what an error shows)
        let cases = [
            // The secret straddles the cut: cut first, its start would show.
            (
                format!("{}ZZsecretZZ-1234567 tail", "x".repeat(195)),
                200,
                format!("{}{REDACTED}...", "x".repeat(195)),
            ),
            // The text itself ends in the secret's start (cut by the server).
            ("error: ZZsecr".to_string(), 200, "error: ...".into()),
            // Two characters of it are too few to tell from ordinary text.
            ("error: ZZ".to_string(), 200, "error: ZZ".into()),
            ("short".into(), 200, "short".into()),
            ("ééééé".into(), 3, "ééé...".into()),
        ];
        for (text, max, want) in cases {
            assert_eq!(redact_cut(&text, max), want, "{text}");
        }
        assert!(holds_secret(b"..ZZsecretZZ-1234567.."));
        assert!(!holds_secret(b"..ZZsecret.."));
    }
}
