//! Printing config warnings and errors the same way in every command.

use sluice_engine::ConfigWarning;

/// Prints build warnings (unknown settings keys, deprecated names) to stderr.
pub(crate) fn warnings(file: &std::path::Path, warnings: &[ConfigWarning]) {
    for w in warnings {
        eprintln!("warning: {}: {w}", file.display());
    }
}

/// Writes a line to stdout, returning an error (not panicking, as `println!` does) when
/// stdout is closed, e.g. `sluice build --stdout x.jsonnet | head -1`.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, $($arg)*).map_err(|e| anyhow::anyhow!("writing to stdout: {e}"))
    }};
}
