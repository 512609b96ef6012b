//! The KPL aggregated record format, read and written in one place: the Kinesis Producer
//! Library packs many user records into one Kinesis record. The Lambda Kinesis handler
//! unpacks them ([`deaggregate`]; Firehose does it on its own, Lambda does not),
//! `send_aws_kinesis_data_stream` packs them ([`Builder`], with `enable_record_aggregation`)
//! and unpacks what it reads back from a stream to recognise its own user records.
//!
//! The format: the magic `F3 89 9A C2`, a protobuf `AggregatedRecord`
//! (`repeated string partition_key_table = 1; repeated string explicit_hash_key_table = 2;
//! repeated Record records = 3;` with `Record { uint64 partition_key_index = 1; uint64
//! explicit_hash_key_index = 2; bytes data = 3; repeated Tag tags = 4; }`), then the MD5 of
//! the protobuf bytes. As in the KPL's own deaggregators, a record without the magic, or
//! whose MD5 does not match, is not aggregated and passes as it is; one whose MD5 matches
//! but whose protobuf is malformed is an error (it is corrupt, not a plain record).

use std::collections::HashMap;

use bytes::Bytes;
use md5::{Digest, Md5};

/// The first bytes of a KPL aggregated record.
pub const MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];
/// The bytes of the MD5 that ends one.
pub const MD5_LEN: usize = 16;

/// One user record out of an aggregated record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// Its partition key.
    pub partition_key: String,
    /// Its explicit hash key, when it has one.
    pub explicit_hash_key: Option<String>,
    /// Its data.
    pub data: Bytes,
}

/// Why an aggregated record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("KPL aggregated record is malformed: {0}")]
pub struct KplError(String);

fn bad(s: impl Into<String>) -> KplError {
    KplError(s.into())
}

/// The user records in `data`, or `None` when it is not an aggregated record.
pub fn deaggregate(data: &Bytes) -> Result<Option<Vec<UserRecord>>, KplError> {
    if data.len() < MAGIC.len() + MD5_LEN || data[..MAGIC.len()] != MAGIC {
        return Ok(None);
    }
    let body = &data[MAGIC.len()..data.len() - MD5_LEN];
    let sum = &data[data.len() - MD5_LEN..];
    if Md5::digest(body).as_slice() != sum {
        return Ok(None);
    }
    let base = MAGIC.len();
    let mut keys: Vec<String> = Vec::new();
    let mut hashes: Vec<String> = Vec::new();
    // (partition key index, explicit hash key index, data range in `data`)
    let mut raw: Vec<(u64, Option<u64>, std::ops::Range<usize>)> = Vec::new();
    let mut r = Reader { buf: body, pos: 0 };
    while !r.done() {
        let (field, wire) = r.tag()?;
        match (field, wire) {
            (1, 2) => keys.push(r.string("partition_key_table")?),
            (2, 2) => hashes.push(r.string("explicit_hash_key_table")?),
            (3, 2) => {
                let range = r.len_delimited()?;
                let mut rec = Reader {
                    buf: &body[range.clone()],
                    pos: 0,
                };
                let (mut pk, mut ehk, mut payload) = (None, None, None);
                while !rec.done() {
                    let (f, w) = rec.tag()?;
                    match (f, w) {
                        (1, 0) => pk = Some(rec.varint()?),
                        (2, 0) => ehk = Some(rec.varint()?),
                        (3, 2) => {
                            let d = rec.len_delimited()?;
                            let start = base + range.start + d.start;
                            payload = Some(start..start + d.len());
                        }
                        _ => rec.skip(w)?,
                    }
                }
                let pk = pk.ok_or_else(|| bad("a record has no partition_key_index"))?;
                let payload = payload.ok_or_else(|| bad("a record has no data"))?;
                raw.push((pk, ehk, payload));
            }
            _ => r.skip(wire)?,
        }
    }
    raw.into_iter()
        .enumerate()
        .map(|(i, (pk, ehk, range))| {
            let partition_key = keys.get(pk as usize).cloned().ok_or_else(|| {
                bad(format!(
                    "record {i}: partition_key_index {pk} is out of the table"
                ))
            })?;
            let explicit_hash_key = match ehk {
                None => None,
                Some(h) => Some(hashes.get(h as usize).cloned().ok_or_else(|| {
                    bad(format!(
                        "record {i}: explicit_hash_key_index {h} is out of the table"
                    ))
                })?),
            };
            Ok(UserRecord {
                partition_key,
                explicit_hash_key,
                data: data.slice(range),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn varint(&mut self) -> Result<u64, KplError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| bad("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint longer than 10 bytes"))
    }

    fn tag(&mut self) -> Result<(u64, u8), KplError> {
        let t = self.varint()?;
        Ok((t >> 3, (t & 7) as u8))
    }

    fn len_delimited(&mut self) -> Result<std::ops::Range<usize>, KplError> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| bad("length out of range"))?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| bad("a field runs past the end"))?;
        let r = self.pos..end;
        self.pos = end;
        Ok(r)
    }

    fn string(&mut self, field: &str) -> Result<String, KplError> {
        let r = self.len_delimited()?;
        String::from_utf8(self.buf[r].to_vec()).map_err(|_| bad(format!("{field} is not UTF-8")))
    }

    fn skip(&mut self, wire: u8) -> Result<(), KplError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.len_delimited().map(|_| ()),
            5 => self.advance(4),
            w => Err(bad(format!("unsupported wire type {w}"))),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), KplError> {
        if self.pos + n > self.buf.len() {
            return Err(bad("a field runs past the end"));
        }
        self.pos += n;
        Ok(())
    }
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A length-delimited field's size: tag, length, bytes.
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// One aggregated record being filled: it knows what it would weigh with one more user
/// record, so a producer can keep it under Kinesis's 1 MiB per record.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    /// The partition key table and the index of each key in it.
    table: Vec<String>,
    index: HashMap<String, u64>,
    /// Each user record: (key index, data).
    records: Vec<(u64, Bytes)>,
    /// The protobuf's size so far.
    size: usize,
}

impl Builder {
    /// The protobuf size a `Record{partition_key_index, data}` takes.
    fn record_len(index: u64, data: usize) -> usize {
        1 + varint_len(index) + field_len(data)
    }

    /// How many user records it holds.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The size of the Kinesis record (magic, protobuf, MD5 and an outer partition key of
    /// `outer` bytes) with a user record of `key` and `data` bytes added.
    pub fn size_with(&self, key: &str, data: usize, outer: usize) -> usize {
        let (table, index) = match self.index.get(key) {
            Some(&i) => (0, i),
            None => (field_len(key.len()), self.table.len() as u64),
        };
        MAGIC.len() + self.size + table + field_len(Self::record_len(index, data)) + MD5_LEN + outer
    }

    /// Adds a user record.
    pub fn add(&mut self, key: &str, data: Bytes) {
        let index = match self.index.get(key) {
            Some(&i) => i,
            None => {
                let i = self.table.len() as u64;
                self.size += field_len(key.len());
                self.table.push(key.to_string());
                self.index.insert(key.to_string(), i);
                i
            }
        };
        self.size += field_len(Self::record_len(index, data.len()));
        self.records.push((index, data));
    }

    /// The Kinesis record to send: a lone user record's data as it is (better sent plain
    /// than aggregated), else the aggregated record ([`Builder::finish`]).
    pub fn into_record(mut self) -> Bytes {
        match self.records.as_mut_slice() {
            [(_, lone)] => std::mem::take(lone),
            _ => self.finish(),
        }
    }

    /// The aggregated record's bytes.
    pub fn finish(self) -> Bytes {
        let mut pb = Vec::with_capacity(self.size);
        for k in &self.table {
            pb.push(0x0A); // field 1, partition_key_table
            put_varint(&mut pb, k.len() as u64);
            pb.extend_from_slice(k.as_bytes());
        }
        for (index, data) in &self.records {
            pb.push(0x1A); // field 3, records
            put_varint(&mut pb, Self::record_len(*index, data.len()) as u64);
            pb.push(0x08); // Record field 1, partition_key_index
            put_varint(&mut pb, *index);
            pb.push(0x1A); // Record field 3, data
            put_varint(&mut pb, data.len() as u64);
            pb.extend_from_slice(data);
        }
        debug_assert_eq!(pb.len(), self.size);
        let mut out = Vec::with_capacity(MAGIC.len() + pb.len() + MD5_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&pb);
        out.extend_from_slice(&Md5::digest(&pb));
        Bytes::from(out)
    }
}

/// Encodes user records `(partition key, data)` as one aggregated record (tests and
/// benchmarks; checked against the `aws-kinesis-agg` encoder in tests/lambda_handlers.rs).
pub fn aggregate(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = Builder::default();
    for (key, data) in records {
        b.add(key, Bytes::copy_from_slice(data));
    }
    b.finish().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_plain_records_table() {
        let agg = Bytes::from(aggregate(&[("a", b"one"), ("b", b"two"), ("a", b"")]));
        let got = deaggregate(&agg).unwrap().unwrap();
        let want: Vec<(&str, &[u8])> = vec![("a", b"one"), ("b", b"two"), ("a", b"")];
        assert_eq!(
            got.iter()
                .map(|r| (r.partition_key.as_str(), &r.data[..]))
                .collect::<Vec<_>>(),
            want
        );
        let mut bad_sum = agg.to_vec();
        let last = bad_sum.len() - 1;
        bad_sum[last] ^= 1;
        for plain in [
            Bytes::from_static(b"{\"a\":1}"),
            Bytes::from_static(b""),
            Bytes::from_static(&MAGIC),
            Bytes::from(bad_sum),
        ] {
            assert_eq!(deaggregate(&plain).unwrap(), None, "{plain:?}");
        }
    }

    #[test]
    fn corrupt_protobuf_with_a_good_sum_is_an_error() {
        for (body, why) in [
            (&[0x1a, 0x05, 0x08][..], "runs past the end"),
            (&[0x1a, 0x02, 0x08, 0x03][..], "has no data"),
            (
                &[0x1a, 0x04, 0x08, 0x01, 0x1a, 0x00][..],
                "out of the table",
            ),
            (&[0x0f][..], "wire type 7"),
        ] {
            let mut data = MAGIC.to_vec();
            data.extend_from_slice(body);
            data.extend_from_slice(&Md5::digest(body));
            let e = deaggregate(&Bytes::from(data)).unwrap_err();
            assert!(e.to_string().contains(why), "{body:?}: {e}");
        }
    }

    #[test]
    fn varints() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn a_builder_knows_its_size_before_adding() {
        let mut b = Builder::default();
        for (key, data) in [("a", 10), ("b", 200), ("a", 0), ("c", 70_000)] {
            let want = b.size_with(key, data, 7);
            b.add(key, Bytes::from(vec![b'x'; data]));
            assert_eq!(b.clone().finish().len() + 7, want, "{key} {data}");
        }
        assert_eq!(b.len(), 4);
        let got = deaggregate(&b.finish()).unwrap().unwrap();
        let keys: Vec<&str> = got.iter().map(|r| r.partition_key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "a", "c"]);
    }
}
