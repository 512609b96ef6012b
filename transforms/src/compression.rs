//! Compressed input, recognised by its first bytes: gzip, bzip2, Zstandard and framed
//! Snappy, the formats Substation's media sniffing knows (it recognises Zstandard but then
//! reads it as text, a defect; here it is decompressed). `sluice run` reads stdin and files
//! through it, and the Lambda S3 handlers read objects through it.
//!
//! Concatenated streams (several gzip members, bzip2 streams or Zstandard frames, as `cat`
//! of two compressed files makes) are read to the end. A stream that ends early is an
//! error naming its format.

use std::io::{self, BufRead, Read};

/// A compression format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// gzip (RFC 1952).
    Gzip,
    /// bzip2.
    Bzip2,
    /// Zstandard (RFC 8878).
    Zstd,
    /// Snappy's framing format (not raw Snappy blocks, which have no magic bytes).
    Snappy,
}

/// The first bytes of a framed Snappy stream: its stream identifier chunk.
const SNAPPY_MAGIC: &[u8] = b"\xff\x06\x00\x00sNaPpY";

impl Codec {
    /// The format whose magic bytes `head` starts with.
    pub fn detect(head: &[u8]) -> Option<Codec> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Codec::Gzip)
        } else if head.starts_with(b"BZh") {
            Some(Codec::Bzip2)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Codec::Zstd)
        } else if head.starts_with(SNAPPY_MAGIC) {
            Some(Codec::Snappy)
        } else {
            None
        }
    }

    /// Its name in errors.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Bzip2 => "bzip2",
            Codec::Zstd => "zstd",
            Codec::Snappy => "snappy",
        }
    }

    /// A reader of `r` decompressed.
    pub fn reader<'a, R: BufRead + 'a>(self, r: R) -> io::Result<Box<dyn Read + 'a>> {
        let inner: Box<dyn Read + 'a> = match self {
            Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
            Codec::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(r)),
            Codec::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(r)?),
            Codec::Snappy => Box::new(snap::read::FrameDecoder::new(r)),
        };
        Ok(Box::new(Named { inner, codec: self }))
    }
}

/// `r`, decompressed when its first bytes name a format, and that format.
pub fn decompressing<'a, R: BufRead + 'a>(
    mut r: R,
) -> io::Result<(Option<Codec>, Box<dyn Read + 'a>)> {
    let codec = Codec::detect(r.fill_buf()?);
    Ok(match codec {
        Some(c) => (codec, c.reader(r)?),
        None => (None, Box::new(r)),
    })
}

/// A decompressing reader whose errors name the format (a truncated stream is otherwise
/// just "unexpected end of file").
struct Named<'a> {
    inner: Box<dyn Read + 'a>,
    codec: Codec,
}

impl Read for Named<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            let what = if e.kind() == io::ErrorKind::UnexpectedEof {
                "truncated stream (unexpected end of file)".to_string()
            } else {
                e.to_string()
            };
            io::Error::new(e.kind(), format!("{}: {what}", self.codec.name()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn compress(codec: Codec, data: &[u8]) -> Vec<u8> {
        match codec {
            Codec::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Codec::Bzip2 => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Codec::Zstd => zstd::stream::encode_all(data, 1).unwrap(),
            Codec::Snappy => {
                let mut e = snap::write::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.into_inner().unwrap()
            }
        }
    }

    fn read_all(input: &[u8]) -> (Option<Codec>, io::Result<Vec<u8>>) {
        let (codec, mut r) = decompressing(input).unwrap();
        let mut out = Vec::new();
        let res = r.read_to_end(&mut out).map(|_| out);
        (codec, res)
    }

    #[test]
    fn each_format_is_recognised_and_read_whole_table() {
        let text = b"{\"a\":1}\n{\"b\":2}\n".repeat(100);
        for codec in [Codec::Gzip, Codec::Bzip2, Codec::Zstd, Codec::Snappy] {
            let packed = compress(codec, &text);
            let (got, out) = read_all(&packed);
            assert_eq!(got, Some(codec));
            assert_eq!(out.unwrap(), text, "{codec:?}");
            // Two streams back to back (`cat a.gz b.gz`) are read to the end.
            let twice = [packed.clone(), packed.clone()].concat();
            let out = read_all(&twice).1.unwrap();
            assert_eq!(out.len(), 2 * text.len(), "{codec:?} concatenated");
            // A stream cut short is an error naming the format.
            let cut = &packed[..packed.len() - 8];
            let err = read_all(cut).1.unwrap_err().to_string();
            assert!(err.starts_with(codec.name()), "{codec:?}: {err}");
        }
    }

    #[test]
    fn anything_else_passes_as_it_is() {
        for plain in [
            &b"plain text\n"[..],
            b"",
            b"BZ",
            b"\x1f",
            b"\xff\x06\x00\x00sNa",
        ] {
            let (codec, out) = read_all(plain);
            assert_eq!(codec, None, "{plain:?}");
            assert_eq!(out.unwrap(), plain);
        }
    }
}
