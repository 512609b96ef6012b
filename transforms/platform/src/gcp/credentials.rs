//! Application Default Credentials (ADC): where Google's client libraries, and so
//! Substation's `send_gcp_storage`, find the identity to call Google Cloud with, and the
//! OAuth 2 access tokens made from it.
//!
//! Looked up in the client libraries' order, on the first call (so `sluice test` and
//! `sluice build` need none):
//!
//! 1. the JSON file named by `GOOGLE_APPLICATION_CREDENTIALS`;
//! 2. gcloud's file, `$CLOUDSDK_CONFIG/application_default_credentials.json`, else
//!    `$HOME/.config/gcloud/application_default_credentials.json` (written by
//!    `gcloud auth application-default login`), when it exists;
//! 3. the metadata server of Compute Engine, GKE, Cloud Run and Cloud Functions
//!    (`GCE_METADATA_HOST`, default `169.254.169.254`).
//!
//! A file holds a `service_account` key (a token is got by a JWT signed with its RSA key,
//! RFC 7523, from its `token_uri`) or an `authorized_user` (a refresh token, RFC 6749
//! §6). A user's calls are billed to the file's `quota_project_id`, or to
//! `GOOGLE_CLOUD_QUOTA_PROJECT` when that is set (the `x-goog-user-project` header), as
//! Google's libraries bill them. Other types (`external_account`, `impersonated_service_account`) are refused with
//! an error that names the file and the type. Tokens are kept until a minute before they
//! expire; errors name where the credentials came from and what the token endpoint said.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_smithy_types::body::SdkBody;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde::Deserialize;

use super::base_url;
use crate::http::{self, Client};

/// Read and write access to Cloud Storage objects.
pub(crate) const STORAGE_SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_write";
/// Google's OAuth 2 token endpoint, for files that name none.
const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The metadata server's address (an IP, so no DNS is needed), when `GCE_METADATA_HOST`
/// does not set one.
const METADATA_HOST: &str = "169.254.169.254";
/// A token is renewed this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);
/// How long a self-signed JWT asks its token to live (the most Google grants).
const JWT_LIFETIME: u64 = 3600;

/// Reads an environment variable (the process's, or a test's).
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process's environment.
pub fn process_env() -> Env {
    Arc::new(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// Where tokens come from.
enum Source {
    /// A service account's key.
    ServiceAccount {
        email: String,
        key: Box<RsaKeyPair>,
        key_id: Option<String>,
        token_uri: String,
        file: PathBuf,
    },
    /// A user's refresh token (gcloud's file).
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
        file: PathBuf,
        quota_project: Option<String>,
    },
    /// The metadata server at `host`.
    Metadata { host: String },
}

/// A credentials file, as far as it is read.
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key: Option<String>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
    quota_project_id: Option<String>,
}

/// A token endpoint's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: Option<u64>,
}

/// An access token and when to renew it.
#[derive(Clone)]
struct Token {
    value: String,
    renew_at: Instant,
}

/// Application Default Credentials, found on first use, and the token they give.
pub struct Credentials {
    env: Env,
    scope: &'static str,
    source: OnceLock<Result<Source, String>>,
    token: tokio::sync::Mutex<Option<Token>>,
    client: Client,
    metadata_client: Client,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Credentials found through `env`, asking for tokens of `scope`.
    pub fn new(env: Env, scope: &'static str) -> Self {
        Credentials {
            env,
            scope,
            source: OnceLock::new(),
            token: tokio::sync::Mutex::new(None),
            client: Client::new(Duration::from_secs(10), 3, Duration::from_millis(500)),
            // Off Google Cloud nothing answers at the metadata address: give up soon.
            metadata_client: Client::new(Duration::from_secs(3), 2, Duration::from_millis(200)),
        }
    }

    /// The headers a call carries: `Authorization` with a valid token, and
    /// `x-goog-user-project` when the calls are billed to a quota project.
    pub(crate) async fn headers(&self) -> Result<Vec<(&'static str, String)>, String> {
        let mut headers = vec![("authorization", format!("Bearer {}", self.token().await?))];
        let file_project = match self.source.get() {
            Some(Ok(Source::AuthorizedUser { quota_project, .. })) => quota_project.clone(),
            _ => None,
        };
        if let Some(project) = (self.env)("GOOGLE_CLOUD_QUOTA_PROJECT").or(file_project) {
            headers.push(("x-goog-user-project", project));
        }
        Ok(headers)
    }

    /// A valid access token: the kept one, or a new one.
    pub(crate) async fn token(&self) -> Result<String, String> {
        let source = self
            .source
            .get_or_init(|| discover(&*self.env))
            .as_ref()
            .map_err(Clone::clone)?;
        let mut kept = self.token.lock().await;
        if let Some(t) = kept.as_ref().filter(|t| Instant::now() < t.renew_at) {
            return Ok(t.value.clone());
        }
        let token = self
            .fetch(source)
            .await
            .map_err(|e| format!("getting a Google access token ({}): {e}", source.describe(),))?;
        *kept = Some(token.clone());
        Ok(token.value)
    }

    async fn fetch(&self, source: &Source) -> Result<Token, String> {
        let asked = Instant::now();
        let answer = match source {
            Source::ServiceAccount {
                email,
                key,
                key_id,
                token_uri,
                ..
            } => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let jwt = sign_jwt(key, key_id.as_deref(), email, self.scope, token_uri, now)?;
                let form = form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &jwt),
                ]);
                self.post_form(token_uri, form).await?
            }
            Source::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                token_uri,
                ..
            } => {
                let form = form(&[
                    ("grant_type", "refresh_token"),
                    ("client_id", client_id),
                    ("client_secret", client_secret),
                    ("refresh_token", refresh_token),
                ]);
                self.post_form(token_uri, form).await?
            }
            Source::Metadata { host } => {
                let url = format!(
                    "{}/computeMetadata/v1/instance/service-accounts/default/token?scopes={}",
                    base_url(host),
                    encode(self.scope)
                );
                let req = http::request(
                    "GET",
                    &url,
                    &[("metadata-flavor", "Google".to_string())],
                    SdkBody::empty(),
                )?;
                let resp = self
                    .metadata_client
                    .execute(req, |s| s == 200, "metadata server token")
                    .await
                    .map_err(|f| {
                        format!(
                            "the metadata server at {} did not give one ({}); outside Google \
                             Cloud, set GOOGLE_APPLICATION_CREDENTIALS to a service account key \
                             file or run `gcloud auth application-default login`",
                            base_url(host),
                            f.text
                        )
                    })?;
                resp.body
            }
        };
        // The answer is not shown: a token answer that fails to parse may still hold the
        // token, or echo the credentials the request carried.
        let answer: TokenAnswer = serde_json::from_slice(&answer).map_err(|e| {
            format!(
                "the token endpoint's answer ({} bytes, not shown: it may hold a credential) is not a token: {e}",
                answer.len()
            )
        })?;
        let lifetime = Duration::from_secs(answer.expires_in.unwrap_or(JWT_LIFETIME));
        Ok(Token {
            value: answer.access_token,
            renew_at: asked + lifetime.saturating_sub(RENEW_BEFORE),
        })
    }

    /// POSTs `form` to `url`; the answer's body.
    async fn post_form(&self, url: &str, form: String) -> Result<Vec<u8>, String> {
        let req = http::request(
            "POST",
            url,
            &[(
                "content-type",
                "application/x-www-form-urlencoded".to_string(),
            )],
            SdkBody::from(form),
        )?;
        let resp = self
            .client
            // The form carries a credential (a signed assertion, a refresh token and client
            // secret): an error's body may echo it, so it is left out.
            .execute_carrying(req, |s| s == 200, url, true)
            .await
            .map_err(|f| format!("POST {url}: {}", f.text))?;
        Ok(resp.body)
    }
}

impl Source {
    /// Where the credentials came from, for errors.
    fn describe(&self) -> String {
        match self {
            Source::ServiceAccount { email, file, .. } => {
                format!("service account {email}, key file {}", file.display())
            }
            Source::AuthorizedUser { file, .. } => {
                format!("user credentials in {}", file.display())
            }
            Source::Metadata { host } => format!("metadata server at {}", base_url(host)),
        }
    }
}

/// Finds the credentials, in the order the module documentation gives.
fn discover(env: &(dyn Fn(&str) -> Option<String> + Send + Sync)) -> Result<Source, String> {
    if let Some(path) = env("GOOGLE_APPLICATION_CREDENTIALS") {
        let path = PathBuf::from(path);
        let text = std::fs::read(&path).map_err(|e| {
            format!(
                "GOOGLE_APPLICATION_CREDENTIALS names {}, which cannot be read: {e}",
                path.display()
            )
        })?;
        return from_file(&text, &path);
    }
    let gcloud = env("CLOUDSDK_CONFIG")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config/gcloud")));
    if let Some(path) = gcloud.map(|d| d.join("application_default_credentials.json"))
        && let Ok(text) = std::fs::read(&path)
    {
        return from_file(&text, &path);
    }
    Ok(Source::Metadata {
        host: env("GCE_METADATA_HOST").unwrap_or_else(|| METADATA_HOST.to_string()),
    })
}

/// The credentials in a file's `text`; errors name the file.
fn from_file(text: &[u8], file: &Path) -> Result<Source, String> {
    let bad = |why: String| format!("Google credentials file {}: {why}", file.display());
    let f: CredentialsFile =
        serde_json::from_slice(text).map_err(|e| bad(format!("not a credentials file ({e})")))?;
    let need = |v: Option<String>, field: &str| {
        v.filter(|s| !s.is_empty())
            .ok_or_else(|| bad(format!("{field} is missing")))
    };
    let token_uri = f
        .token_uri
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| TOKEN_URI.to_string());
    match f.kind.as_deref() {
        Some("service_account") => {
            let pem = need(f.private_key, "private_key")?;
            let key = rsa_key(&pem).map_err(|e| bad(format!("private_key: {e}")))?;
            Ok(Source::ServiceAccount {
                email: need(f.client_email, "client_email")?,
                key: Box::new(key),
                key_id: f.private_key_id.filter(|s| !s.is_empty()),
                token_uri,
                file: file.to_path_buf(),
            })
        }
        Some("authorized_user") => Ok(Source::AuthorizedUser {
            client_id: need(f.client_id, "client_id")?,
            client_secret: need(f.client_secret, "client_secret")?,
            refresh_token: need(f.refresh_token, "refresh_token")?,
            token_uri,
            file: file.to_path_buf(),
            quota_project: f.quota_project_id.filter(|s| !s.is_empty()),
        }),
        Some(other) => Err(bad(format!(
            "credentials of type {other:?} are not supported (use a service_account key or \
             authorized_user credentials)"
        ))),
        None => Err(bad("type is missing".to_string())),
    }
}

/// The RSA key in PEM text: PKCS#8 (`BEGIN PRIVATE KEY`, what Google's key files hold) or
/// PKCS#1 (`BEGIN RSA PRIVATE KEY`).
fn rsa_key(pem: &str) -> Result<RsaKeyPair, String> {
    let block = |label: &str| {
        let begin = format!("-----BEGIN {label}-----");
        let end = format!("-----END {label}-----");
        let start = pem.find(&begin)? + begin.len();
        let stop = start + pem[start..].find(&end)?;
        Some(
            pem[start..stop]
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>(),
        )
    };
    let (b64, pkcs8) = match (block("PRIVATE KEY"), block("RSA PRIVATE KEY")) {
        (Some(b), _) => (b, true),
        (None, Some(b)) => (b, false),
        (None, None) => return Err("not a PEM private key".to_string()),
    };
    let der = STANDARD
        .decode(b64)
        .map_err(|e| format!("the PEM's base64 is damaged ({e})"))?;
    let key = if pkcs8 {
        RsaKeyPair::from_pkcs8(&der)
    } else {
        RsaKeyPair::from_der(&der)
    };
    key.map_err(|e| format!("not an RSA key of 2048 bits or more ({e})"))
}

/// A JWT asking `token_uri` for a token of `scope` for `email`, issued at `now` (Unix
/// seconds), signed RS256 with `key`.
fn sign_jwt(
    key: &RsaKeyPair,
    key_id: Option<&str>,
    email: &str,
    scope: &str,
    token_uri: &str,
    now: u64,
) -> Result<String, String> {
    let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    if let Some(id) = key_id {
        header["kid"] = id.into();
    }
    let claims = serde_json::json!({
        "iss": email,
        "scope": scope,
        "aud": token_uri,
        "iat": now,
        "exp": now + JWT_LIFETIME,
    });
    let mut jwt = URL_SAFE_NO_PAD.encode(header.to_string());
    jwt.push('.');
    jwt.push_str(&URL_SAFE_NO_PAD.encode(claims.to_string()));
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        jwt.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "signing the token request failed".to_string())?;
    jwt.push('.');
    jwt.push_str(&URL_SAFE_NO_PAD.encode(signature));
    Ok(jwt)
}

/// `application/x-www-form-urlencoded` text of `pairs`.
fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// `s` encoded for a query string.
pub(crate) fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests;
