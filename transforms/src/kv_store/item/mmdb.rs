//! The `mmdb` kv store: a read-only MaxMind database (GeoIP2, GeoLite2, ASN, or any file
//! in the MaxMind DB format), read with the `maxminddb` crate; a key is an IP address and
//! its value the record of the network that contains it, as JSON (maps become objects,
//! arrays arrays, numbers numbers).
//!
//! Settings as Substation's: `file` (a path or URL, required). An address in no network of
//! the database has no value; a key that is not an IP address is an error naming it (so a
//! misconfigured `object.source_key` does not pass silently), as is an IPv6 address in an
//! IPv4-only database.

use std::net::IpAddr;
use std::sync::Arc;

use maxminddb::Reader;
use serde::Deserialize;
use sluice_engine::{ConfigError, Value, async_trait};

use super::file::{Loaded, required};
use super::store::{ItemError, ItemStore};
use crate::kv_store::KvPlace;

/// Settings of the `mmdb` kv store.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The file: a local path, or an `https://`, `http://` (loopback) or `s3://` URL.
    pub file: Option<String>,
}

/// A MaxMind database.
pub struct Mmdb {
    db: Loaded<Reader<Vec<u8>>>,
}

impl Mmdb {
    /// The store for these settings, shared by every transform configured alike.
    pub fn shared(place: &KvPlace<'_, '_>, settings: &Value) -> Result<Arc<Self>, ConfigError> {
        let s: Settings = place.settings(settings)?;
        let file = required(s.file).map_err(|m| place.error("file", m))?;
        place.shared(format!("mmdb:{file}"), || {
            Ok(Mmdb {
                db: Loaded::new(file),
            })
        })
    }
}

fn parse(bytes: Vec<u8>) -> Result<Reader<Vec<u8>>, String> {
    Reader::from_source(bytes).map_err(|e| format!("not a MaxMind database: {e}"))
}

#[async_trait]
impl ItemStore for Mmdb {
    fn describe(&self) -> String {
        format!("mmdb {}", self.db.file())
    }

    async fn get(&self, key: &str) -> Result<Option<Value>, ItemError> {
        let bad = |why: String| ItemError::BadKey {
            store: self.describe(),
            key: key.to_string(),
            why,
        };
        let ip: IpAddr = key
            .trim()
            .parse()
            .map_err(|_| bad("not an IP address".into()))?;
        let db = self.db.get(parse).await.map_err(|why| ItemError::Load {
            store: "mmdb".into(),
            why,
        })?;
        let found = db.lookup(ip).map_err(|e| bad(e.to_string()))?;
        found.decode::<Value>().map_err(|e| ItemError::Load {
            store: "mmdb".into(),
            why: format!("{}: a bad record: {e}", self.db.file()),
        })
    }

    async fn close(&self) {
        self.db.forget().await;
    }
}

/// Writes a small MaxMind DB (IPv4, 24-bit records) mapping networks to records, in the
/// format of the MaxMind DB specification (version 2.0): a binary search tree over the
/// address bits, 16 zero bytes, the data section, then the metadata after its marker.
/// For the tests: sluice ships no database.
#[cfg(test)]
fn write_test_database(networks: &[(&str, Value)]) -> Vec<u8> {
    #[derive(Clone, Copy)]
    enum Rec {
        Empty,
        Node(usize),
        Data(usize),
    }
    let mut nodes: Vec<[Rec; 2]> = vec![[Rec::Empty, Rec::Empty]];
    let mut data = Vec::new();
    for (cidr, record) in networks {
        let (addr, len) = cidr.split_once('/').expect("a.b.c.d/len");
        let addr: std::net::Ipv4Addr = addr.parse().expect("an IPv4 address");
        let len: u32 = len.parse().expect("a prefix length");
        let bits = u32::from(addr);
        let offset = data.len();
        encode(record, &mut data);
        let mut node = 0;
        for depth in 0..len {
            let bit = ((bits >> (31 - depth)) & 1) as usize;
            if depth == len - 1 {
                nodes[node][bit] = Rec::Data(offset);
            } else {
                node = match nodes[node][bit] {
                    Rec::Node(n) => n,
                    _ => {
                        nodes.push([Rec::Empty, Rec::Empty]);
                        nodes[node][bit] = Rec::Node(nodes.len() - 1);
                        nodes.len() - 1
                    }
                };
            }
        }
    }
    let count = nodes.len();
    let mut out = Vec::new();
    for n in &nodes {
        for r in n {
            let v = match *r {
                Rec::Empty => count,
                Rec::Node(i) => i,
                Rec::Data(off) => count + 16 + off,
            };
            out.extend_from_slice(&(v as u32).to_be_bytes()[1..]);
        }
    }
    out.extend_from_slice(&[0; 16]);
    out.extend_from_slice(&data);
    out.extend_from_slice(b"\xAB\xCD\xEFMaxMind.com");
    let meta = sluice_engine::json!({
        "binary_format_major_version": 2,
        "binary_format_minor_version": 0,
        "build_epoch": 1_700_000_000u64,
        "database_type": "sluice-test",
        "description": {"en": "a test database"},
        "ip_version": 4,
        "languages": ["en"],
        "node_count": count,
        "record_size": 24,
    });
    encode(&meta, &mut out);
    out
}

/// Appends `v` in the MaxMind DB data format (control byte: type in the top three bits,
/// size in the low five; types above 7 in an extra byte).
#[cfg(test)]
fn encode(v: &Value, out: &mut Vec<u8>) {
    fn control(out: &mut Vec<u8>, kind: u8, size: usize) {
        assert!(size < 29, "test data too large");
        if kind <= 7 {
            out.push(kind << 5 | size as u8);
        } else {
            out.push(size as u8);
            out.push(kind - 7);
        }
    }
    match v {
        Value::String(s) => {
            control(out, 2, s.len());
            out.extend_from_slice(s.as_bytes());
        }
        Value::Number(n) if n.as_u64().is_some() => {
            let n = n.as_u64().unwrap_or(0);
            let bytes = n.to_be_bytes();
            let skip = bytes.iter().take_while(|b| **b == 0).count();
            // uint32 up to four bytes, uint64 beyond.
            control(out, if skip >= 4 { 6 } else { 9 }, 8 - skip);
            out.extend_from_slice(&bytes[skip..]);
        }
        Value::Number(n) => {
            control(out, 3, 8);
            out.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_be_bytes());
        }
        Value::Bool(b) => control(out, 14, *b as usize),
        Value::Array(a) => {
            control(out, 11, a.len());
            for e in a {
                encode(e, out);
            }
        }
        Value::Object(m) => {
            control(out, 7, m.len());
            for (k, e) in m.iter() {
                encode(&Value::from(k.as_str()), out);
                // The metadata's 16-bit fields must be uint16.
                let u16_field = [
                    "record_size",
                    "ip_version",
                    "binary_format_major_version",
                    "binary_format_minor_version",
                ];
                match e.as_u64() {
                    Some(n) if u16_field.contains(&k.as_str()) => {
                        let b = (n as u16).to_be_bytes();
                        let skip = b.iter().take_while(|x| **x == 0).count();
                        control(out, 5, 2 - skip);
                        out.extend_from_slice(&b[skip..]);
                    }
                    Some(n) if k.as_str() == "build_epoch" => {
                        let b = n.to_be_bytes();
                        let skip = b.iter().take_while(|x| **x == 0).count();
                        control(out, 9, 8 - skip);
                        out.extend_from_slice(&b[skip..]);
                    }
                    _ => encode(e, out),
                }
            }
        }
        Value::Null => panic!("the MaxMind DB format has no null"),
    }
}

/// The `mmdb` kv store's descriptor: what registers it and lists it in the reference.
pub(crate) const INFO: crate::kv_store::stores::KvStoreInfo =
    crate::kv_store::stores::KvStoreInfo {
        info: sluice_engine::TypeInfo {
            name: "mmdb",
            aliases: &[],
            library: "sub.kv_store.mmdb",
            summary: "a MaxMind database; the key is an IP address",
            reach: sluice_engine::Reach::Files,
            example: r#"{"file": "geo.mmdb"}"#,
        },
        items: Some(|p, s| Mmdb::shared(p, s).map(|s| s as Arc<dyn ItemStore>)),
        read_only: true,
        locks: None,
        file: Some("file"),
    };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_store::test_support::item_store;
    use sluice_engine::json;
    use sluice_engine::testing::block_on;

    #[test]
    fn records_by_address() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("geo.mmdb");
        let db = write_test_database(&[
            (
                "10.0.0.0/8",
                json!({"country": {"iso_code": "XA"}, "asn": 64512}),
            ),
            (
                "192.168.1.0/24",
                json!({"city": "Lab", "loc": [1.5, -2.25], "anycast": true}),
            ),
        ]);
        std::fs::write(&f, db).unwrap();
        let st = item_store(json!({"type": "mmdb", "settings": {"file": f.to_str().unwrap()}}));
        for (key, want) in [
            (
                "10.1.2.3",
                Some(json!({"country": {"iso_code": "XA"}, "asn": 64512})),
            ),
            (
                "192.168.1.200",
                Some(json!({"city": "Lab", "loc": [1.5, -2.25], "anycast": true})),
            ),
            ("192.168.2.1", None),
            ("8.8.8.8", None),
        ] {
            assert_eq!(block_on(st.get(key)).unwrap(), want, "{key}");
        }
        for (key, want) in [
            ("nope", "bad key \"nope\": not an IP address"),
            ("::1", "bad key \"::1\": "),
        ] {
            let e = block_on(st.get(key)).unwrap_err().to_string();
            assert!(e.contains(want), "{key}: {e}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("not.mmdb");
        std::fs::write(&f, "hello").unwrap();
        let st = item_store(json!({"type": "mmdb", "settings": {"file": f.to_str().unwrap()}}));
        let e = block_on(st.get("10.0.0.1")).unwrap_err().to_string();
        assert!(e.contains("not.mmdb: not a MaxMind database"), "{e}");
    }
}
