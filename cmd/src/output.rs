//! Printing config warnings and errors the same way in every command.

use sluice_engine::ConfigWarning;

/// Prints build warnings (unknown settings keys, deprecated names) to stderr.
pub fn warnings(file: &std::path::Path, warnings: &[ConfigWarning]) {
    for w in warnings {
        eprintln!("warning: {}: {w}", file.display());
    }
}
