#!/usr/bin/env bash
# The exactly-once fault-injection campaign (tests/faults/, docs/fault-campaign.md).
#
#   scripts/faults.sh small    CI's configuration: every pipeline under every fault at once
#                              (`all`) or the mix that reaches its class, each other mix
#                              (clean, sink, lock, outage, crash, retry, idle, clock,
#                              clock_past, fulldisk) on a few pipelines, two cells with the
#                              lock in lock_acquire 'statements' (all_stmt, lock_stmt) and
#                              two in 'epochs' (all_epoch, lock_epoch), then the control; a
#                              few thousand messages, under 4 minutes with a debug build
#   scripts/faults.sh large    the documented run: every mix on every pipeline it applies to,
#                              again with the DynamoDB lock in 'statements' (MIX_stmt) and in
#                              'epochs' (MIX_epoch),
#                              >= 150,000 messages through the lock and >= 400 crashes
#                              (SIGKILL and SIGTERM); its table goes in docs/exactly-once.md
#   scripts/faults.sh small|large [campaign.py options...]
#                              e.g. --pipelines kinesis,hop --mixes crash,outage --messages 5000 --seed 7
#
# It starts its own emulators (dynoxide, moto, the Cloud Storage emulator and kinesalite from
# scripts/emulators.sh install) and fault-injecting proxies on free loopback ports, drives
# target/debug/sluice (SLUICE_BIN to use another build; `cargo build --bin sluice` makes
# it), prints a table per pipeline and fault mix, keeps everything the runs did under
# target/faults/ (FAULTS_OUT to change), and exits non-zero when a message was lost, a sink
# that promises exactly-once got a duplicate, a message without a key was not
# dead-lettered, or a lock was left pending. The clock mixes preload Debian's libfaketime
# (installed here with apt-get when missing); the `fulldisk` mix mounts a tmpfs, which needs
# root (without root its cells fail; FAULTS_WAIVE_FULLDISK=1 runs without them, saying so).
set -euo pipefail
cd "$(dirname "$0")/.."

size="${1:-}"
case "$size" in
    small | large) shift ;;
    *)
        sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac

python=.emulators/venv/bin/python
[[ -x "$python" && -x .emulators/kinesalite/node_modules/.bin/kinesalite ]] || scripts/emulators.sh install
# libfaketime (Debian's package) offsets the clock of the clock mixes' processes.
have_faketime=
for lib in "${FAKETIME_LIB:-}" /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1; do
    [[ -n "$lib" && -e "$lib" ]] && have_faketime=1
done
if [[ -z "$have_faketime" ]]; then
    sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "faults.sh: installing libfaketime (apt-get install libfaketime)"
    $sudo apt-get install -y --no-install-recommends libfaketime >/dev/null \
        || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends libfaketime >/dev/null; } \
        || echo "faults.sh: libfaketime could not be installed: the clock cells will fail" >&2
fi
sluice="${SLUICE_BIN:-target/debug/sluice}"
[[ -x "$sluice" ]] || { echo "faults.sh: $sluice is missing: cargo build --bin sluice" >&2; exit 1; }

# The proxy's and the verdict's own tests first: a proxy that injected the wrong thing, or a
# verdict that counted the wrong thing, would void the counts.
"$python" tests/faults/test_proxy.py -q
"$python" tests/faults/test_campaign.py -q

exec "$python" tests/faults/campaign.py --size "$size" --sluice "$sluice" \
    --out "${FAULTS_OUT:-target/faults/$size}" "$@"
