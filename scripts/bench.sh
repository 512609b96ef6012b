#!/usr/bin/env bash
# Builds the release binary and runs the benchmarks the repo carries, printing tables.
#   scripts/bench.sh [--events N] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin sluice
python3 benches/zeek/bench.py "$@"
