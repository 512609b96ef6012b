#!/usr/bin/env bash
# Builds the release binary and runs the benchmarks the repo carries, printing tables.
#   scripts/bench.sh [--events N] [--runs N]      the Zeek -> ECS bench (benches/zeek)
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
cargo build --release --locked --bin sluice
python3 benches/zeek/bench.py "$@"
