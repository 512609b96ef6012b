#!/usr/bin/env bash
# The one command that checks everything, on a fresh machine or a developer's:
#   formatting (Rust and Jsonnet), lints, unit and integration tests, the exactly-once fault campaign
#   (scripts/faults.sh small), every example config's `tests:`, and a bounded fuzz run.
# It installs what the tests need (a Rust toolchain is assumed; rustfmt and clippy are
# added if missing; the local AWS emulators come from the package registries through
# scripts/emulators.sh) and exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step prints the time it starts at, so a slow step shows in the CI log.
step() { printf '\n==> %s  [%s, %ss in]\n' "$*" "$(date -u +%T)" "$SECONDS"; }

step "toolchain"
cargo --version
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy

# jsonnetfmt (Debian package `jsonnet`) is the oracle tests/cli_fmt.rs compares `sluice fmt`
# with.
if ! command -v jsonnetfmt >/dev/null; then
    step "jsonnetfmt (apt-get install jsonnet)"
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get install -y --no-install-recommends jsonnet >/dev/null \
        || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends jsonnet >/dev/null; }
fi

# chromium (Debian's) is the browser tests/cli_play.rs drives `sluice play`'s page in, with
# playwright-core (scripts/emulators.sh installs it).
if ! command -v chromium >/dev/null; then
    step "chromium (apt-get install chromium)"
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get install -y --no-install-recommends chromium >/dev/null \
        || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends chromium >/dev/null; }
fi

# cargo-fuzz (for the fuzz step) compiles from crates.io while the emulators download: the
# one is CPU, the other mostly network.
step "cargo-fuzz (scripts/fuzz.sh install, in the background until the fuzz step)"
mkdir -p target
fuzz_install_log=target/cargo-fuzz-install.log
scripts/fuzz.sh install >"$fuzz_install_log" 2>&1 &
fuzz_install=$!

step "emulators (scripts/emulators.sh install)"
scripts/emulators.sh install

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "docs/cost.md's tables as benches/cost/cost.py prints them"
python3 benches/cost/cost.py --check docs/cost.md

step "lint (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The build without the AWS SDK (the `aws` feature off) must compile, warning-free.
step "lint without AWS (cargo clippy --no-default-features)"
cargo clippy -p sluice-platform -p sluice-transforms -p sluice-cmd --no-default-features --all-targets --locked -- -D warnings
# The Lambda handlers without the SDK, as fuzz/ builds them.
cargo clippy -p sluice-lambda --no-default-features --all-targets --locked -- -D warnings

# No separate build step: `cargo test` builds the binaries the integration tests and the
# steps below run (target/debug/sluice), and a second build would compile the dependencies
# again with the binaries' feature set.
step "unit and integration tests (cargo test)"
# No test may reach for instance metadata: the AWS SDK is told so for every process.
AWS_EC2_METADATA_DISABLED=true cargo test --workspace --locked

# Whole pipelines (lock + Kinesis, Firehose, DynamoDB, files, Cloud Storage, a hop, two sends
# per message, a fan-out, recurring keys, identical records, four consumers over a
# resharded stream) under injected faults, lock-store outages, SIGKILLs and SIGTERMs, two
# workers, in-process retries, idle input, offset clocks (libfaketime, which faults.sh
# installs) and a full disk under the SQLite lock file (a tmpfs: root), on emulators of its
# own; fails on any loss, any duplicate where the sink promises none, a message without a
# key that was not dead-lettered, or a lock left pending.
step "exactly-once fault campaign (scripts/faults.sh small)"
scripts/faults.sh small

step "example configs (sluice test examples/, the AWS ones on fresh emulators)"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ddb_port=$(free_port)
moto_port=$(free_port)
moto_log=$(mktemp)
scripts/emulators.sh start dynamodb "$ddb_port" >/dev/null &
dynamodb=$!
scripts/emulators.sh start moto "$moto_port" >"$moto_log" &
moto=$!
trap 'kill "$dynamodb" "$moto" 2>/dev/null || true; rm -f "$moto_log"' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$ddb_port") 2>/dev/null && break
    sleep 0.1
done
# moto is ready once the examples' streams, delivery streams and buckets exist.
for _ in $(seq 600); do
    grep -q '^moto ready' "$moto_log" && break
    kill -0 "$moto" 2>/dev/null || { echo "moto did not start" >&2; exit 1; }
    sleep 0.1
done
AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
    AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
    AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$ddb_port" \
    AWS_ENDPOINT_URL_KINESIS="http://127.0.0.1:$moto_port" \
    AWS_ENDPOINT_URL_FIREHOSE="http://127.0.0.1:$moto_port" \
    target/debug/sluice test examples/
kill "$dynamodb" "$moto" 2>/dev/null || true

step "Lambda deployment template (cfn-lint examples/lambda/template.yaml)"
.emulators/venv/bin/cfn-lint examples/lambda/template.yaml

step "example configs formatted (sluice fmt --check examples/ config/src/)"
target/debug/sluice fmt --check examples/ config/src/

step "example configs build and vet (sluice vet examples/)"
target/debug/sluice vet examples/ >/dev/null

# Coverage-guided fuzzing of what reads untrusted input (path language, JSON, config loading,
# Go regular expressions and time layouts, decompression, KPL, the Lambda events), 25 s per
# target from the committed corpus, one target per core at a time.
step "fuzz (scripts/fuzz.sh)"
wait "$fuzz_install" || {
    cat "$fuzz_install_log" >&2
    echo "cargo-fuzz did not install (scripts/fuzz.sh install)" >&2
    exit 1
}
scripts/fuzz.sh 25

printf '\nall checks passed in %ss\n' "$SECONDS"
