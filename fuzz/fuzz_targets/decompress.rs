//! Decompression sniffing: any bytes are detected as gzip, bzip2, Zstandard, framed Snappy or
//! none, and read (at most 1 MiB of output, so a bomb is cut short) without a panic.
#![no_main]

use std::io::{BufReader, Read};

use libfuzzer_sys::fuzz_target;
use sluice_transforms::compression::decompressing;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, r)) = decompressing(BufReader::new(data)) {
        let mut out = Vec::new();
        let _ = r.take(1 << 20).read_to_end(&mut out);
    }
});
