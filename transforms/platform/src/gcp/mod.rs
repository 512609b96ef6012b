//! Google Cloud access for the GCP transforms (`send_gcp_storage`): the Application Default
//! Credentials ([`credentials`]) and Cloud Storage's JSON API ([`storage`]).
//!
//! There is no Google Cloud SDK for Rust that is both maintained by Google and slim (the
//! `google-cloud-*` crates pull in gRPC, another HTTP stack and another TLS stack), and
//! what `send_gcp_storage` needs is three HTTP calls and one RS256 signature. So this module
//! speaks the documented REST protocols itself over the HTTP client the other transforms
//! use ([`crate::http::Client`]), and signs with `ring`, already in the build for TLS.

pub mod credentials;
pub mod storage;

/// `http://HOST[:PORT]` for a host given without a scheme (`GCE_METADATA_HOST`,
/// `STORAGE_EMULATOR_HOST`), a URL as it is; no trailing `/` either way.
pub(crate) fn base_url(host: &str) -> String {
    let host = host.trim_end_matches('/');
    if host.contains("://") {
        host.to_string()
    } else {
        format!("http://{host}")
    }
}
