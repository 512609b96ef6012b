//! Media-type sniffing, as Substation's `internal/media` does it: a few compression magic
//! numbers first, then the WHATWG MIME Sniffing rules as Go's `http.DetectContentType`
//! implements them. `format_mime` compares against this, and the CLI and the Lambda S3
//! handler use it to decide between line splitting, decompression and one binary message.
//!
//! The compression checks come first because Go's sniffer knows none of bzip2, zstd and
//! snappy, and because a gzip header can occasionally look like an embedded-OpenType font
//! to it. The names are Substation's: note `application/x-zstd` (Substation's decompressor
//! looks for `application/zstd`, a **\[bug\]** that users of this function should not copy)
//! and `application/x-gzip`. Parquet files (`PAR1`) are not recognised, by Substation nor
//! here: they sniff as `application/octet-stream`. JSON is not a sniffed type either: JSON
//! text is `text/plain; charset=utf-8`, as in Go.
//!
//! Only the first 512 bytes are examined. Empty input is `text/plain; charset=utf-8` and
//! anything unrecognised that contains binary control bytes is `application/octet-stream`.

/// `bzip2` magic (`BZh`).
pub(crate) const BZIP2: &str = "application/x-bzip2";
/// `gzip` magic with the deflate method.
pub(crate) const GZIP: &str = "application/x-gzip";
/// `zstd` frame magic.
pub(crate) const ZSTD: &str = "application/x-zstd";
/// Snappy framing-format stream identifier.
pub(crate) const SNAPPY: &str = "application/x-snappy-framed";
/// Text that is neither HTML nor XML (including JSON).
pub(crate) const TEXT: &str = "text/plain; charset=utf-8";
/// Anything not recognised.
pub(crate) const OCTET_STREAM: &str = "application/octet-stream";

/// How many leading bytes are examined.
const SNIFF_LEN: usize = 512;

/// The media type of `data`.
pub(crate) fn sniff(data: &[u8]) -> &'static str {
    if data.starts_with(b"BZh") {
        return BZIP2;
    }
    if data.starts_with(b"\x1f\x8b\x08") {
        return GZIP;
    }
    if data.starts_with(b"\x28\xb5\x2f\xfd") {
        return ZSTD;
    }
    if data.starts_with(b"\xff\x06\x00\x00sNaPpY") {
        return SNAPPY;
    }
    detect_content_type(data)
}

/// One rule of the WHATWG table, in the order Go checks them.
enum Sig {
    /// An HTML tag (ASCII letters case-insensitive) after leading whitespace, followed by
    /// a space or `>`.
    Html(&'static [u8]),
    /// `data[i] & mask[i] == pat[i]` for every i, optionally after leading whitespace.
    Masked {
        mask: &'static [u8],
        pat: &'static [u8],
        skip_ws: bool,
        ct: &'static str,
    },
    /// A plain prefix.
    Exact(&'static [u8], &'static str),
    /// An ISO base media file whose `ftyp` box names an `mp4` brand.
    Mp4,
    /// No binary control bytes after leading whitespace.
    Text,
}

const fn masked(mask: &'static [u8], pat: &'static [u8], ct: &'static str) -> Sig {
    Sig::Masked {
        mask,
        pat,
        skip_ws: false,
        ct,
    }
}

const SIGS: &[Sig] = &[
    Sig::Html(b"<!DOCTYPE HTML"),
    Sig::Html(b"<HTML"),
    Sig::Html(b"<HEAD"),
    Sig::Html(b"<SCRIPT"),
    Sig::Html(b"<IFRAME"),
    Sig::Html(b"<H1"),
    Sig::Html(b"<DIV"),
    Sig::Html(b"<FONT"),
    Sig::Html(b"<TABLE"),
    Sig::Html(b"<A"),
    Sig::Html(b"<STYLE"),
    Sig::Html(b"<TITLE"),
    Sig::Html(b"<B"),
    Sig::Html(b"<BODY"),
    Sig::Html(b"<BR"),
    Sig::Html(b"<P"),
    Sig::Html(b"<!--"),
    Sig::Masked {
        mask: b"\xff\xff\xff\xff\xff",
        pat: b"<?xml",
        skip_ws: true,
        ct: "text/xml; charset=utf-8",
    },
    Sig::Exact(b"%PDF-", "application/pdf"),
    Sig::Exact(b"%!PS-Adobe-", "application/postscript"),
    // Byte order marks.
    masked(
        b"\xff\xff\x00\x00",
        b"\xfe\xff\x00\x00",
        "text/plain; charset=utf-16be",
    ),
    masked(
        b"\xff\xff\x00\x00",
        b"\xff\xfe\x00\x00",
        "text/plain; charset=utf-16le",
    ),
    masked(b"\xff\xff\xff\x00", b"\xef\xbb\xbf\x00", TEXT),
    // Images.
    Sig::Exact(b"\x00\x00\x01\x00", "image/x-icon"),
    Sig::Exact(b"\x00\x00\x02\x00", "image/x-icon"),
    Sig::Exact(b"BM", "image/bmp"),
    Sig::Exact(b"GIF87a", "image/gif"),
    Sig::Exact(b"GIF89a", "image/gif"),
    masked(
        b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff",
        b"RIFF\x00\x00\x00\x00WEBPVP",
        "image/webp",
    ),
    Sig::Exact(b"\x89PNG\x0d\x0a\x1a\x0a", "image/png"),
    Sig::Exact(b"\xff\xd8\xff", "image/jpeg"),
    // Audio and video.
    masked(b"\xff\xff\xff\xff", b".snd", "audio/basic"),
    masked(
        b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff",
        b"FORM\x00\x00\x00\x00AIFF",
        "audio/aiff",
    ),
    masked(b"\xff\xff\xff", b"ID3", "audio/mpeg"),
    masked(b"\xff\xff\xff\xff\xff", b"OggS\x00", "application/ogg"),
    masked(
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
        b"MThd\x00\x00\x00\x06",
        "audio/midi",
    ),
    masked(
        b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff",
        b"RIFF\x00\x00\x00\x00AVI ",
        "video/avi",
    ),
    masked(
        b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff",
        b"RIFF\x00\x00\x00\x00WAVE",
        "audio/wave",
    ),
    Sig::Mp4,
    Sig::Exact(b"\x1a\x45\xdf\xa3", "video/webm"),
    // Fonts: embedded OpenType is 34 arbitrary bytes, then "LP".
    masked(
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff",
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00LP",
        "application/vnd.ms-fontobject",
    ),
    Sig::Exact(b"\x00\x01\x00\x00", "font/ttf"),
    Sig::Exact(b"OTTO", "font/otf"),
    Sig::Exact(b"ttcf", "font/collection"),
    Sig::Exact(b"wOFF", "font/woff"),
    Sig::Exact(b"wOF2", "font/woff2"),
    // Archives.
    Sig::Exact(b"\x1f\x8b\x08", GZIP),
    Sig::Exact(b"PK\x03\x04", "application/zip"),
    Sig::Exact(b"Rar!\x1a\x07\x00", "application/x-rar-compressed"),
    Sig::Exact(b"Rar!\x1a\x07\x01\x00", "application/x-rar-compressed"),
    Sig::Exact(b"\x00asm", "application/wasm"),
    Sig::Text,
];

/// WHATWG whitespace as Go's sniffer counts it.
fn is_ws(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// Go's `http.DetectContentType`.
pub(crate) fn detect_content_type(data: &[u8]) -> &'static str {
    let data = &data[..data.len().min(SNIFF_LEN)];
    let first_non_ws = data.iter().position(|&b| !is_ws(b)).unwrap_or(data.len());
    SIGS.iter()
        .find_map(|s| s.matches(data, first_non_ws))
        .unwrap_or(OCTET_STREAM)
}

impl Sig {
    fn matches(&self, data: &[u8], first_non_ws: usize) -> Option<&'static str> {
        match self {
            Sig::Html(tag) => {
                let d = &data[first_non_ws..];
                if d.len() < tag.len() + 1 {
                    return None;
                }
                let same = tag.iter().zip(d).all(|(&t, &b)| {
                    let b = if t.is_ascii_uppercase() { b & 0xdf } else { b };
                    t == b
                });
                (same && matches!(d[tag.len()], b' ' | b'>')).then_some("text/html; charset=utf-8")
            }
            Sig::Masked {
                mask,
                pat,
                skip_ws,
                ct,
            } => {
                let d = if *skip_ws {
                    &data[first_non_ws..]
                } else {
                    data
                };
                if d.len() < pat.len() {
                    return None;
                }
                pat.iter()
                    .zip(mask.iter())
                    .zip(d)
                    .all(|((&p, &m), &b)| b & m == p)
                    .then_some(ct)
            }
            Sig::Exact(prefix, ct) => data.starts_with(prefix).then_some(ct),
            Sig::Mp4 => {
                if data.len() < 12 {
                    return None;
                }
                let box_size = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
                if data.len() < box_size || !box_size.is_multiple_of(4) || &data[4..8] != b"ftyp" {
                    return None;
                }
                // The brands are 4-byte words from offset 8; the word at 12 is the version.
                (8..box_size)
                    .step_by(4)
                    .filter(|&st| st != 12)
                    .any(|st| &data[st..st + 3] == b"mp4")
                    .then_some("video/mp4")
            }
            Sig::Text => data[first_non_ws..]
                .iter()
                .all(|&b| {
                    !(b <= 0x08
                        || b == 0x0b
                        || (0x0e..=0x1a).contains(&b)
                        || (0x1c..=0x1f).contains(&b))
                })
                .then_some(TEXT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let mut mp4 = vec![0, 0, 0, 0x18];
        mp4.extend_from_slice(b"ftypisom\x00\x00\x02\x00isommp41");
        mp4.extend_from_slice(&[0; 8]);
        let mut eot = vec![0u8; 34];
        eot.extend_from_slice(b"LPxx");
        let cases: &[(&str, &[u8], &str)] = &[
            ("empty", b"", TEXT),
            ("json is text", br#"{"a":1}"#, TEXT),
            ("plain text", b"hello world\n", TEXT),
            ("utf-8 text", "h\u{e9}llo".as_bytes(), TEXT),
            ("binary control bytes", b"ab\x00cd", OCTET_STREAM),
            ("escape is text", b"\x1b[0m", TEXT),
            ("html", b"  <html><body>", "text/html; charset=utf-8"),
            (
                "html lowercase doctype",
                b"<!doctype html>",
                "text/html; charset=utf-8",
            ),
            ("html needs a terminator", b"<htmlx", TEXT),
            ("html comment", b"<!-- x -->", "text/html; charset=utf-8"),
            (
                "xml",
                b"\n<?xml version=\"1.0\"?>",
                "text/xml; charset=utf-8",
            ),
            ("xml is case-sensitive", b"<?XML version", TEXT),
            ("pdf", b"%PDF-1.7\n", "application/pdf"),
            ("postscript", b"%!PS-Adobe-3.0", "application/postscript"),
            (
                "utf-16be bom",
                b"\xfe\xff\x00a",
                "text/plain; charset=utf-16be",
            ),
            (
                "utf-16le bom",
                b"\xff\xfea\x00",
                "text/plain; charset=utf-16le",
            ),
            ("utf-8 bom", b"\xef\xbb\xbfabc", TEXT),
            ("png", b"\x89PNG\r\n\x1a\n\x00\x00", "image/png"),
            ("jpeg", b"\xff\xd8\xff\xe0", "image/jpeg"),
            ("gif", b"GIF89a\x01\x00", "image/gif"),
            ("bmp", b"BM\x00\x00", "image/bmp"),
            ("ico", b"\x00\x00\x01\x00\x01", "image/x-icon"),
            ("webp", b"RIFF\x10\x00\x00\x00WEBPVP8 ", "image/webp"),
            ("wave", b"RIFF\x10\x00\x00\x00WAVEfmt ", "audio/wave"),
            ("avi", b"RIFF\x10\x00\x00\x00AVI LIST", "video/avi"),
            ("mp3", b"ID3\x03\x00", "audio/mpeg"),
            ("ogg", b"OggS\x00\x02", "application/ogg"),
            ("midi", b"MThd\x00\x00\x00\x06\x00\x01", "audio/midi"),
            ("mp4", &mp4, "video/mp4"),
            ("webm", b"\x1a\x45\xdf\xa3\x01", "video/webm"),
            ("eot", &eot, "application/vnd.ms-fontobject"),
            ("ttf", b"\x00\x01\x00\x00\x00", "font/ttf"),
            ("woff2", b"wOF2\x00", "font/woff2"),
            ("gzip", b"\x1f\x8b\x08\x00\x00", GZIP),
            (
                "gzip other method is binary",
                b"\x1f\x8b\x07\x00",
                OCTET_STREAM,
            ),
            ("bzip2", b"BZh91AY&SY", BZIP2),
            ("zstd", b"\x28\xb5\x2f\xfd\x04\x00", ZSTD),
            ("snappy framed", b"\xff\x06\x00\x00sNaPpY\x00", SNAPPY),
            ("zip", b"PK\x03\x04\x14\x00", "application/zip"),
            (
                "rar",
                b"Rar!\x1a\x07\x00\xcf",
                "application/x-rar-compressed",
            ),
            ("wasm", b"\x00asm\x01\x00\x00\x00", "application/wasm"),
            (
                "parquet is not sniffed",
                b"PAR1\x15\x04\x15\x00",
                OCTET_STREAM,
            ),
        ];
        for (name, data, want) in cases {
            assert_eq!(sniff(data), *want, "{name}");
        }
    }

    #[test]
    fn only_the_first_512_bytes_count() {
        let mut d = vec![b'a'; 512];
        d.push(0);
        assert_eq!(sniff(&d), TEXT);
        d.truncate(511);
        d.push(0);
        assert_eq!(sniff(&d), OCTET_STREAM);
    }
}
