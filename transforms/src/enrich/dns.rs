//! What the DNS enrichments (`enrich_dns_domain_lookup`, `enrich_dns_ip_lookup`,
//! `enrich_dns_text_lookup`) share: their settings, the resolver (hickory-resolver on
//! tokio), and writing the answers.
//!
//! Substation compatibility (`reference/substation.md` §2.1 rows 9–11): `object.source_key`
//! and `object.target_key` (both, or neither to read and replace the whole data) and
//! `request.timeout` (default 1s, the library's). With keys, every answer is written as an
//! array; without, the data becomes the first answer. A message without the source value
//! passes through unchanged. A failed lookup, no answer included, is an error naming the
//! query.
//!
//! sluice's own setting `resolver`: the DNS server to ask, `IP` or `IP:PORT` (UDP, then TCP
//! for truncated answers). Without it the system's configuration (`/etc/resolv.conf`) is
//! used, as Go's resolver does for Substation. Answers are cached for their TTL.

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfigGroup, ResolverConfig, ResolverOpts,
};
use hickory_resolver::name_server::TokioConnectionProvider;
use serde::Deserialize;
use sluice_engine::settings::{GoDuration, ObjectSettings};
use sluice_engine::{Build, ConfigError, Message, TransformError, Value};

use crate::common::Io;

/// The longest a lookup may take when `request.timeout` is not set.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// `request`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RequestSettings {
    /// The longest one query may take.
    pub timeout: Option<GoDuration>,
}

/// Settings of the DNS enrichments.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// `source_key` (the name or address) and `target_key` (the answers).
    pub object: ObjectSettings,
    /// `timeout`.
    pub request: RequestSettings,
    /// The DNS server (`IP` or `IP:PORT`); the system's when unset.
    pub resolver: Option<String>,
}

/// A configured lookup: where it reads and writes, and the resolver (made on first use).
pub(crate) struct Lookup {
    io: Io,
    server: Option<SocketAddr>,
    timeout: Duration,
    resolver: OnceLock<Result<TokioResolver, String>>,
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("io", &self.io)
            .field("server", &self.server)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Lookup {
    /// Builds it from the transform's settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let io = Io::new(b, &s.object)?;
        let server = match s.resolver.as_deref().filter(|r| !r.is_empty()) {
            None => None,
            Some(r) => Some(parse_server(r).ok_or_else(|| {
                b.field_error(
                    "resolver",
                    format!("{r:?} is not a DNS server address (IP or IP:PORT)"),
                )
            })?),
        };
        let timeout = s.request.timeout.map(|d| d.0).unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            return Err(b.field_error("request.timeout", "must be more than 0"));
        }
        Ok(Lookup {
            io,
            server,
            timeout,
            resolver: OnceLock::new(),
        })
    }

    /// The resolver, made on first use.
    pub(crate) fn resolver(&self) -> Result<&TokioResolver, TransformError> {
        self.resolver
            .get_or_init(|| {
                let mut builder = match self.server {
                    Some(addr) => {
                        let group =
                            NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
                        TokioResolver::builder_with_config(
                            ResolverConfig::from_parts(None, vec![], group),
                            TokioConnectionProvider::default(),
                        )
                    }
                    None => TokioResolver::builder_tokio().map_err(|e| {
                        format!("reading the system's DNS configuration failed: {e}")
                    })?,
                };
                let opts: &mut ResolverOpts = builder.options_mut();
                opts.timeout = self.timeout;
                opts.attempts = 2;
                // Every address, as Go's LookupHost (hickory's default asks AAAA only
                // when there is no A record).
                opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
                Ok(builder.build())
            })
            .as_ref()
            .map_err(|e| TransformError::failed(e.clone()))
    }

    /// The query: the source value's text, or the data; `None` passes the message through.
    pub(crate) fn query(&self, msg: &Message) -> Option<String> {
        self.io.read_text(msg).map(|t| t.trim().to_string())
    }

    /// Writes `answers` (not empty): all of them as an array at the target key, or the
    /// first as the data.
    pub(crate) fn write(
        &self,
        msg: &mut Message,
        answers: Vec<String>,
    ) -> Result<(), TransformError> {
        match &self.io {
            Io::Object { .. } => self.io.write(
                msg,
                Value::Array(answers.into_iter().map(Value::from).collect()),
            ),
            Io::Data => {
                let first = answers.into_iter().next().unwrap_or_default();
                self.io.write(msg, Value::String(first.into()))
            }
        }
    }
}

/// `IP` (port 53) or `IP:PORT` (`[v6]:PORT` for IPv6).
fn parse_server(s: &str) -> Option<SocketAddr> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
}

/// The error of a failed lookup of `kind` for `query`.
pub(crate) fn lookup_error(kind: &str, query: &str, e: impl std::fmt::Display) -> TransformError {
    TransformError::failed(format!("{kind} lookup of {query:?} failed: {e}"))
}

/// A DNS server on a loopback UDP port for the DNS enrichments' tests, built with
/// hickory-proto: it answers A/AAAA for `host.test.`, PTR for `1.2.3.4`, TXT for
/// `txt.test.`, and NXDOMAIN for anything else.
#[cfg(test)]
pub(crate) mod test_server {
    use hickory_proto::op::{Message, MessageType, ResponseCode};
    use hickory_proto::rr::rdata::{A, AAAA, PTR, TXT};
    use hickory_proto::rr::{Name, RData, Record, RecordType};
    use std::net::UdpSocket;
    use std::str::FromStr;

    /// Starts the server; its address (`127.0.0.1:PORT`).
    pub(crate) fn start() -> String {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = socket.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(req) = Message::from_vec(&buf[..n]) else {
                    continue;
                };
                let _ = socket.send_to(&answer(&req).to_vec().unwrap(), peer);
            }
        });
        addr
    }

    fn answer(req: &Message) -> Message {
        let mut resp = Message::new();
        resp.set_id(req.id())
            .set_message_type(MessageType::Response)
            .set_op_code(req.op_code())
            .set_recursion_desired(req.recursion_desired())
            .set_recursion_available(true)
            .set_authoritative(true);
        let mut found = false;
        for q in req.queries() {
            resp.add_query(q.clone());
            let name = q.name().to_ascii().to_ascii_lowercase();
            let rdata: Vec<RData> = match (name.as_str(), q.query_type()) {
                ("host.test.", RecordType::A) => vec![
                    RData::A(A::new(192, 0, 2, 10)),
                    RData::A(A::new(192, 0, 2, 11)),
                ],
                ("host.test.", RecordType::AAAA) => {
                    vec![RData::AAAA(AAAA::from_str("2001:db8::10").unwrap())]
                }
                ("v6only.test.", RecordType::AAAA) => {
                    vec![RData::AAAA(AAAA::from_str("2001:db8::6").unwrap())]
                }
                ("4.3.2.1.in-addr.arpa.", RecordType::PTR) => {
                    vec![RData::PTR(PTR(Name::from_str("named.test.").unwrap()))]
                }
                ("txt.test.", RecordType::TXT) => vec![
                    RData::TXT(TXT::new(vec!["v=spf1 -all".into()])),
                    RData::TXT(TXT::new(vec!["part one ".into(), "part two".into()])),
                ],
                // A name that exists without records of the asked type.
                ("empty.test.", _) | ("host.test.", _) | ("v6only.test.", _) => vec![],
                _ => continue,
            };
            found = true;
            for r in rdata {
                resp.add_answer(Record::from_rdata(q.name().clone(), 60, r));
            }
        }
        if !found {
            resp.set_response_code(ResponseCode::NXDomain);
        }
        resp
    }
}
