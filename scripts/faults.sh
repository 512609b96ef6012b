#!/usr/bin/env bash
# The exactly-once fault-injection campaign (tests/faults/, docs/exactly-once.md).
#
#   scripts/faults.sh small    CI's configuration: every pipeline (kinesis, kinesis_after,
#                              firehose, dynamodb, file, file_after, hop) under every fault
#                              at once (`all`), each other mix (clean, sink, lock, outage,
#                              crash, retry, idle) on a few pipelines, then the control; a few
#                              thousand messages, under 3 minutes with a debug build
#   scripts/faults.sh large    the documented run: every mix on every pipeline, >= 100,000
#                              messages through the lock and >= 300 crashes; its table goes
#                              in docs/exactly-once.md
#   scripts/faults.sh small|large [campaign.py options...]
#                              e.g. --pipelines kinesis,hop --mixes crash,outage --messages 5000 --seed 7
#
# It starts its own emulators (dynoxide and moto from scripts/emulators.sh install) and
# fault-injecting proxies on free loopback ports, drives target/debug/sluice (SLUICE_BIN to
# use another build; `cargo build --bin sluice` makes it), prints a table per pipeline and
# fault mix, keeps everything the runs did under target/faults/ (FAULTS_OUT to change), and
# exits non-zero when a message was lost, a sink that promises exactly-once got a duplicate,
# a message without a key was not dead-lettered, or a lock was left pending.
set -euo pipefail
cd "$(dirname "$0")/.."

size="${1:-}"
case "$size" in
    small | large) shift ;;
    *)
        sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac

python=.emulators/venv/bin/python
[[ -x "$python" ]] || scripts/emulators.sh install
sluice="${SLUICE_BIN:-target/debug/sluice}"
[[ -x "$sluice" ]] || { echo "faults.sh: $sluice is missing: cargo build --bin sluice" >&2; exit 1; }

# The proxy's own tests first: a proxy that injected the wrong thing would void the counts.
"$python" tests/faults/test_proxy.py -q

exec "$python" tests/faults/campaign.py --size "$size" --sluice "$sluice" \
    --out "${FAULTS_OUT:-target/faults/$size}" "$@"
