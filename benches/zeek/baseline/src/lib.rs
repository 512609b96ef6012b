//! What the hand-written baselines share (benches/zeek/bench.py's `zeek-to-ecs-baseline`,
//! benches/cloudtrail/bench.py's `cloudtrail-baseline`): the loop a user would write with
//! serde_json, reading one JSON value a line on stdin, mapping it, writing one a line on
//! stdout; and the allocator.

use std::error::Error;
use std::io::{self, BufRead, BufWriter, Write};

use serde_json::Value;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Parses each line of stdin that is not blank to a `Value`, maps it with `map` and writes
/// what it returns with `to_writer`, a line each, through a `BufWriter`.
pub fn map_lines(
    mut map: impl FnMut(Value) -> Result<Value, Box<dyn Error>>,
) -> Result<(), Box<dyn Error>> {
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let event: Value = serde_json::from_str(&line)?;
        serde_json::to_writer(&mut out, &map(event)?)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
