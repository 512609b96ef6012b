//! `format_from_zip`: unpacks a ZIP archive into one message per file.
//!
//! Substation compatibility: data only, no settings; each file of the archive that is not
//! a directory and not empty becomes a message with the file's content as its data and a
//! copy of the input's metadata, in the archive's order; an archive with no such file
//! yields no message. Stored and deflated entries are read (what ZIP writers use unless
//! told otherwise); other compression methods and encrypted entries are errors naming the
//! entry. Differences from Substation: an entry whose header claims it is empty but has
//! content is not skipped, and the decompressed size of the whole archive is capped at
//! [`MAX_DECOMPRESSED`] (1 GiB), so a small "zip bomb" is an error naming the limit
//! instead of exhausting memory. Data that is not a ZIP archive (empty data included) is an
//! error.

use std::io::{Cursor, Read};

use serde::Deserialize;
use sluice_engine::{
    Body, Build, ConfigError, Message, StatelessTransform, TransformError, async_trait,
};
use zip::ZipArchive;
use zip::result::ZipError;

pub(crate) use super::from_gzip::MAX_DECOMPRESSED;

/// Settings of `format_from_zip` (none).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {}

/// The `format_from_zip` transform.
pub(crate) struct FormatFromZip {
    limit: u64,
}

impl FormatFromZip {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let _: Settings = b.settings()?;
        Ok(FormatFromZip {
            limit: MAX_DECOMPRESSED,
        })
    }
}

fn zip_error(what: &str, e: ZipError) -> TransformError {
    let why = match e {
        ZipError::CompressionMethodNotSupported(m) => {
            format!(
                "compression method {m} is not supported (only stored and deflated entries are)"
            )
        }
        ZipError::UnsupportedArchive(s) => format!("unsupported archive: {s}"),
        ZipError::InvalidPassword => "the entry is encrypted".to_string(),
        other => other.to_string(),
    };
    TransformError::failed(format!("cannot read zip: {what}{why}"))
}

/// The contents of the non-empty files in `data`, in archive order, failing if together
/// they would exceed `limit` bytes.
pub(crate) fn unzip(data: &[u8], limit: u64) -> Result<Vec<Vec<u8>>, TransformError> {
    if data.is_empty() {
        return Err(TransformError::failed("cannot read zip: the data is empty"));
    }
    let mut archive = ZipArchive::new(Cursor::new(data)).map_err(|e| zip_error("", e))?;
    let mut files = Vec::new();
    let mut total: u64 = 0;
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| zip_error(&format!("entry {i}: "), e))?;
        let name = entry
            .name()
            .map(|n| n.into_owned())
            .unwrap_or_else(|_| format!("#{i}"));
        if entry.is_dir() {
            continue;
        }
        if entry.encrypted() {
            return Err(TransformError::failed(format!(
                "cannot read zip: entry {name:?} is encrypted"
            )));
        }
        let remaining = limit - total;
        let mut content = Vec::with_capacity(entry.size().min(remaining).min(64 << 20) as usize);
        (&mut entry)
            .take(remaining.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(|e| TransformError::failed(format!("cannot read zip: entry {name:?}: {e}")))?;
        total += content.len() as u64;
        if total > limit {
            return Err(TransformError::failed(format!(
                "cannot read zip: the decompressed files exceed the limit of {}",
                super::from_gzip::describe_limit(limit)
            )));
        }
        if !content.is_empty() {
            files.push(content);
        }
    }
    Ok(files)
}

#[async_trait]
impl StatelessTransform for FormatFromZip {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        for content in unzip(msg.data(), self.limit)? {
            out.push(msg.derive(Body::from_bytes(content)));
        }
        Ok(())
    }
}

/// What registers the `format_from_zip` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "format_from_zip",
    aliases: &[],
    library: "sub.tf.fmt.from.zip",
    summary: "one message per file of a ZIP archive",
    reach: sluice_engine::Reach::Memory,
    example: "{}",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use sluice_engine::{Pipeline, json, testing};
    use std::io::Write;
    use std::sync::Arc;
    use zip::CompressionMethod;
    use zip::write::{SimpleFileOptions, ZipWriter};

    const TYPE: &str = "format_from_zip";

    /// An archive of `(name, content, method)`; names ending in `/` are directories.
    fn archive(entries: &[(&str, &[u8], CompressionMethod)]) -> Vec<u8> {
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        for (name, content, method) in entries {
            let opts = SimpleFileOptions::default().compression_method(*method);
            if name.ends_with('/') {
                w.add_directory(*name, opts).unwrap();
            } else {
                w.start_file(*name, opts).unwrap();
                w.write_all(content).unwrap();
            }
        }
        w.finish().unwrap().into_inner()
    }

    fn run(input: Vec<u8>) -> Result<Vec<Message>, TransformError> {
        let t = testing::build(&registry(), json!({"type": TYPE})).unwrap();
        let p = Pipeline::new(vec![(Arc::from("t"), t)]);
        let mut m = Message::new(input);
        m.set_metadata(&br#"{"bucket":"b"}"#[..]);
        testing::block_on(p.apply(vec![m]))
    }

    /// A case: its name, the input archive and the files that should come out.
    type Case<'a> = (&'a str, Vec<u8>, Vec<&'a [u8]>);

    const DEFLATED: CompressionMethod = CompressionMethod::Deflated;
    const STORED: CompressionMethod = CompressionMethod::Stored;

    #[test]
    fn cases() {
        let big = vec![b'x'; 100_000];
        let cases: [Case; 6] = [
            (
                "two files, deflated",
                archive(&[
                    ("a.json", b"{\"a\":1}", DEFLATED),
                    ("b.txt", b"b", DEFLATED),
                ]),
                vec![b"{\"a\":1}", b"b"],
            ),
            (
                "stored",
                archive(&[("a", b"stored", STORED)]),
                vec![b"stored"],
            ),
            (
                "directories and empty files are skipped",
                archive(&[
                    ("dir/", b"", STORED),
                    ("dir/empty", b"", DEFLATED),
                    ("dir/full", b"full", DEFLATED),
                ]),
                vec![b"full"],
            ),
            (
                "binary content",
                archive(&[("bin", &[0, 0xff, 0x50, 0x4b], DEFLATED)]),
                vec![&[0, 0xff, 0x50, 0x4b]],
            ),
            (
                "a large file",
                archive(&[("big", &big, DEFLATED)]),
                vec![&big],
            ),
            ("no files: no message", archive(&[]), vec![]),
        ];
        for (name, input, want) in cases {
            let out = run(input).unwrap_or_else(|e| panic!("{name}: {e}"));
            let got: Vec<&[u8]> = out.iter().map(|m| &m.data()[..]).collect();
            assert_eq!(got, want, "{name}");
            for m in &out {
                assert_eq!(&m.metadata()[..], br#"{"bucket":"b"}"#, "{name}: metadata");
            }
        }
    }

    #[test]
    fn errors() {
        let good = archive(&[("a", b"hello hello hello hello", DEFLATED)]);
        let mut corrupt = good.clone();
        // The deflated bytes follow the 30-byte local header and the 1-byte name.
        for b in &mut corrupt[31..36] {
            *b ^= 0xff;
        }
        let mut bzip = archive(&[("a.bz2", b"x", STORED)]);
        // Claim compression method 12 (bzip2) in the local and central headers.
        bzip[8] = 12;
        let central = bzip
            .windows(4)
            .position(|w| w == b"PK\x01\x02")
            .expect("a central directory");
        bzip[central + 10] = 12;
        let cases: [(&str, Vec<u8>, &str); 5] = [
            ("empty", Vec::new(), "cannot read zip: the data is empty"),
            (
                "not zip",
                b"plain text, not an archive".to_vec(),
                "cannot read zip",
            ),
            (
                "truncated",
                good[..good.len() - 10].to_vec(),
                "cannot read zip",
            ),
            ("corrupt deflate", corrupt, "cannot read zip: entry \"a\""),
            (
                "unsupported method",
                bzip,
                "cannot read zip: entry \"a.bz2\": compression method not supported",
            ),
        ];
        for (name, input, want) in cases {
            let err = run(input).unwrap_err().to_string();
            assert!(err.starts_with("transform t: "), "{name}: {err}");
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn limit() {
        let zeros = vec![0u8; 10_000];
        let bomb = archive(&[("a", &zeros, DEFLATED), ("b", &zeros, DEFLATED)]);
        assert!(bomb.len() < 1_000, "deflate packs zeros tightly");
        assert_eq!(unzip(&bomb, 20_000).unwrap().len(), 2);
        let err = unzip(&bomb, 19_999).unwrap_err().to_string();
        assert!(
            err.contains("the decompressed files exceed the limit of 19999 bytes"),
            "{err}"
        );
        let err = unzip(&bomb, 5_000).unwrap_err().to_string();
        assert!(err.contains("exceed the limit"), "{err}");
    }
}
