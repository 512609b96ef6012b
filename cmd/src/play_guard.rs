//! Who may use `sluice play`'s server: the checks every request passes before it is
//! routed, and the headers every response carries. A library module (not inside the
//! `play` command) so that `fuzz/fuzz_targets/play_api.rs` can drive it with arbitrary
//! requests.
//!
//! A server that runs configs runs code as the user, so a request must show all of:
//!
//! - **the token**: a random 256-bit secret made when the server starts and printed in its
//!   URL (`http://127.0.0.1:PORT/?token=…`, as Jupyter does). `GET /?token=…` answers with a
//!   redirect to `/` that sets it as an `HttpOnly`, `SameSite=Strict` cookie named after the
//!   port; every `/api/*` call must carry that cookie (or the token in an `X-Sluice-Token`
//!   header, for scripts), compared in constant time. Another local user, or a page of
//!   another origin, does not have it. The page itself without the token is refused too,
//!   so a framing page cannot even show it.
//! - **a Host that is this server's**: `localhost`, a loopback address, the address it
//!   listens on (or, when it listens on every interface, any IP address), with its port.
//!   A DNS-rebinding page reaches the server under a name of its own, never an IP literal.
//!   This holds whatever `--addr` is.
//! - **an Origin, when sent, that is one of those hosts** (compared with the allowed set,
//!   never with the request's own Host, which a rebinding attacker chooses).
//! - **`Content-Type: application/json` on a POST**, which a page of another origin cannot
//!   send without a CORS preflight (never granted here).
//!
//! The response headers ([`SECURITY_HEADERS`]) forbid framing (`X-Frame-Options`, CSP
//! `frame-ancestors 'none'`), allow only the server's own scripts and styles (the page has
//! no inline script), stop MIME sniffing and send no Referer (the token must not leak).

use std::net::IpAddr;

use hyper::header::{CONTENT_TYPE, COOKIE, HOST, ORIGIN};
use hyper::{HeaderMap, Method, StatusCode, Uri};

/// The headers on every response of the server.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("x-frame-options", "DENY"),
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// The header a script may send the token in, instead of the cookie.
pub const TOKEN_HEADER: &str = "x-sluice-token";

/// Paths served without the token: the page's script and styles, which hold nothing secret
/// and do nothing without the API.
pub const PUBLIC_PATHS: &[&str] = &["/play.js", "/play.css"];

/// What the checks decided for a request that may go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Route it.
    Route,
    /// `GET /?token=…` with the right token: redirect to `/`, setting this cookie
    /// (a `Set-Cookie` value).
    SetCookie(String),
}

/// Why a request is refused: the status and a message for the person reading it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// The checks of one server: its address and its token.
#[derive(Clone)]
pub struct Guard {
    listen: IpAddr,
    port: u16,
    token: String,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("listen", &self.listen)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// A new token: 32 bytes from the operating system's generator, as hex.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Guard {
    /// The checks for a server listening on `listen:port` with `token`.
    pub fn new(listen: IpAddr, port: u16, token: String) -> Guard {
        Guard {
            listen,
            port,
            token,
        }
    }

    /// The cookie that holds the token: one per port, so two servers on one machine do not
    /// overwrite each other's (cookies ignore ports).
    pub fn cookie_name(&self) -> String {
        format!("sluice_play_{}", self.port)
    }

    /// Decides whether a request may go on; see the module documentation.
    pub fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<Admit, Refusal> {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !self.host_allowed(host) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                format!(
                    "Host {host:?} is not this playground's address; open it at \
                     http://127.0.0.1:{}/ (or localhost) with the URL sluice play printed",
                    self.port
                ),
            ));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            let allowed = origin
                .strip_prefix("http://")
                .is_some_and(|h| self.host_allowed(h));
            if !allowed {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "requests from {origin:?} are not accepted; only the playground's own \
                         page may call its API"
                    ),
                ));
            }
        }
        if *method == Method::POST {
            let json = headers
                .get(CONTENT_TYPE)
                .and_then(|c| c.to_str().ok())
                .is_some_and(|c| c.starts_with("application/json"));
            if !json {
                return Err(Refusal::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "the API takes Content-Type: application/json",
                ));
            }
        }
        let path = uri.path();
        if PUBLIC_PATHS.contains(&path) {
            return Ok(Admit::Route);
        }
        if path == "/"
            && *method == Method::GET
            && let Some(given) = query_value(uri.query().unwrap_or_default(), "token")
        {
            if self.is_token(given) {
                return Ok(Admit::SetCookie(format!(
                    "{}={}; Path=/; HttpOnly; SameSite=Strict",
                    self.cookie_name(),
                    self.token
                )));
            }
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "this is not the playground's token: open the URL sluice play printed when it \
                 started",
            ));
        }
        let name = self.cookie_name();
        let presented = headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .chain(
                headers
                    .get_all(TOKEN_HEADER)
                    .iter()
                    .filter_map(|v| v.to_str().ok()),
            )
            .any(|t| self.is_token(t));
        if presented {
            return Ok(Admit::Route);
        }
        Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "sluice play needs its token: open the URL it printed when it started \
             (http://127.0.0.1:PORT/?token=...), or send the token in an X-Sluice-Token header",
        ))
    }

    /// Whether `given` is the token, in time that does not depend on where they differ.
    fn is_token(&self, given: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Whether `host` (a `Host` header, or an Origin's host: name and port) is this server:
    /// `localhost` or an IP address it answers on, with its port.
    pub fn host_allowed(&self, host: &str) -> bool {
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !name.is_empty() && !port.contains(']') => (name, Some(port)),
            _ => (host, None),
        };
        let port_ok = match port {
            Some(p) => p.parse::<u16>().is_ok_and(|p| p == self.port),
            None => self.port == 80,
        };
        if !port_ok {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let ip = match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().map(IpAddr::V6),
            None => name.parse::<std::net::Ipv4Addr>().map(IpAddr::V4),
        };
        let Ok(ip) = ip else {
            return false;
        };
        ip.is_loopback() || ip == self.listen || self.listen.is_unspecified()
    }
}

/// The value of `key` in a URL query (`a=1&token=x`), as is.
fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    const TOKEN: &str = "abc123";

    fn guard(listen: &str, port: u16) -> Guard {
        Guard::new(listen.parse().unwrap(), port, TOKEN.into())
    }

    /// A request as the checks see it.
    type Parts = (Method, Uri, HeaderMap);

    fn req(method: Method, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        (method, uri.parse().unwrap(), map)
    }

    #[test]
    fn hosts_table() {
        let lo = guard("127.0.0.1", 8080);
        let lan = guard("192.168.1.5", 8080);
        let any = guard("0.0.0.0", 8080);
        for (g, host, want) in [
            (&lo, "127.0.0.1:8080", true),
            (&lo, "localhost:8080", true),
            (&lo, "LOCALHOST:8080", true),
            (&lo, "[::1]:8080", true),
            (&lo, "127.1.2.3:8080", true),
            (&lo, "127.0.0.1:9999", false),
            (&lo, "127.0.0.1", false),
            (&lo, "evil.example:8080", false),
            (&lo, "localhost.evil.example:8080", false),
            (&lo, "192.168.1.5:8080", false),
            (&lo, "", false),
            (&lo, ":8080", false),
            // A non-loopback address still refuses names (DNS rebinding).
            (&lan, "192.168.1.5:8080", true),
            (&lan, "127.0.0.1:8080", true),
            (&lan, "rebind.evil.example:8080", false),
            (&lan, "10.0.0.1:8080", false),
            (&any, "10.0.0.1:8080", true),
            (&any, "[fe80::1]:8080", true),
            (&any, "rebind.evil.example:8080", false),
            (&guard("127.0.0.1", 80), "localhost", true),
        ] {
            assert_eq!(g.host_allowed(host), want, "{g:?} {host}");
        }
    }

    #[test]
    fn requests_table() {
        let g = guard("192.168.1.5", 8080);
        let host = ("host", "192.168.1.5:8080");
        let cookie = format!("other=1; sluice_play_8080={TOKEN}");
        let json = ("content-type", "application/json");
        const UNAUTHORIZED: Result<Admit, StatusCode> = Err(StatusCode::UNAUTHORIZED);
        const FORBIDDEN: Result<Admit, StatusCode> = Err(StatusCode::FORBIDDEN);
        let cases: Vec<(Parts, Result<Admit, StatusCode>)> = vec![
            (
                req(Method::GET, "/?token=abc123", &[host]),
                Ok(Admit::SetCookie(format!(
                    "sluice_play_8080={TOKEN}; Path=/; HttpOnly; SameSite=Strict"
                ))),
            ),
            (req(Method::GET, "/?token=abc124", &[host]), FORBIDDEN),
            (req(Method::GET, "/", &[host]), UNAUTHORIZED),
            (
                req(Method::GET, "/", &[host, ("cookie", &cookie)]),
                Ok(Admit::Route),
            ),
            (req(Method::GET, "/play.js", &[host]), Ok(Admit::Route)),
            (req(Method::POST, "/api/run", &[host, json]), UNAUTHORIZED),
            (
                req(
                    Method::POST,
                    "/api/run",
                    &[host, json, ("cookie", "sluice_play_8080=x")],
                ),
                UNAUTHORIZED,
            ),
            // Another port's cookie is another server's.
            (
                req(
                    Method::POST,
                    "/api/run",
                    &[host, json, ("cookie", "sluice_play_8081=abc123")],
                ),
                UNAUTHORIZED,
            ),
            (
                req(Method::POST, "/api/run", &[host, json, ("cookie", &cookie)]),
                Ok(Admit::Route),
            ),
            (
                req(
                    Method::POST,
                    "/api/run",
                    &[host, json, (TOKEN_HEADER, TOKEN)],
                ),
                Ok(Admit::Route),
            ),
            (
                req(Method::POST, "/api/run", &[host, ("cookie", &cookie)]),
                Err(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            ),
            // Rebinding: the attacker's name as Host, and as Origin with a good Host.
            (
                req(
                    Method::POST,
                    "/api/run",
                    &[("host", "evil.example:8080"), json, ("cookie", &cookie)],
                ),
                FORBIDDEN,
            ),
            (
                req(
                    Method::POST,
                    "/api/run",
                    &[
                        host,
                        json,
                        ("cookie", &cookie),
                        ("origin", "http://evil.example:8080"),
                    ],
                ),
                FORBIDDEN,
            ),
            (
                req(
                    Method::POST,
                    "/api/run",
                    &[
                        host,
                        json,
                        ("cookie", &cookie),
                        ("origin", "http://localhost:8080"),
                    ],
                ),
                Ok(Admit::Route),
            ),
            (
                req(
                    Method::GET,
                    "/api/examples",
                    &[host, ("origin", "null"), ("cookie", &cookie)],
                ),
                FORBIDDEN,
            ),
        ];
        for ((m, u, h), want) in cases {
            let got = g.check(&m, &u, &h).map_err(|r| r.status);
            assert_eq!(got, want, "{m} {u} {h:?}");
        }
    }

    #[test]
    fn tokens_are_long_and_fresh() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
