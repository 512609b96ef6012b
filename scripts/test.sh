#!/usr/bin/env bash
# The one command that checks everything, on a fresh machine or a developer's:
#   formatting, lints, unit and integration tests, and every example config's `tests:`.
# It installs what the tests need (a Rust toolchain is assumed; rustfmt and clippy are
# added if missing; the local AWS emulators come from the package registries through
# scripts/emulators.sh) and exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
cargo --version
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy

step "emulators (scripts/emulators.sh install)"
scripts/emulators.sh install

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "lint (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "build"
cargo build --workspace --locked --bins

step "unit and integration tests (cargo test)"
cargo test --workspace --locked

step "example configs (sluice test examples/)"
target/debug/sluice test examples/

step "example configs build and vet (sluice vet examples/)"
target/debug/sluice vet examples/ >/dev/null

printf '\nall checks passed\n'
