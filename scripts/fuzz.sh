#!/usr/bin/env bash
# Fuzzes every target in fuzz/ for a bounded time: coverage-guided (libFuzzer, through
# cargo-fuzz from crates.io), on the machine's stable toolchain.
#
#   scripts/fuzz.sh            every target, 25 s each (what CI runs: about 3 minutes)
#   scripts/fuzz.sh 600        every target, 10 minutes each
#   scripts/fuzz.sh 600 json   one target
#
# Each target starts from its corpus in fuzz/corpus/<target> (kept in the repository). A crash, an out-of-memory or a timeout fails the run and
# leaves its input in fuzz/artifacts/<target>/: make it a unit test next to the code it
# broke, and add the input to the corpus. docs/contributing.md#fuzzing has the details.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-25}
shift || true

CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi
# cargo-fuzz asks for nightly only for the sanitizers; without one (-s none) the stable
# compiler does, once told it may accept cargo-fuzz's flags.
export RUSTC_BOOTSTRAP=1
fuzz=(cargo fuzz)
opts=(-s none --dev)

"${fuzz[@]}" build "${opts[@]}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <("${fuzz[@]}" list)
fi
# New inputs a run finds go to fuzz/target/corpus/<target> (not kept); the committed corpus
# is read, never written. FUZZ_FLAGS adds libFuzzer flags (e.g. -jobs=2).
for t in "${targets[@]}"; do
    found="target/corpus/$t"
    mkdir -p "$found" "corpus/$t"
    log="target/fuzz-$t.log"
    echo "==> fuzz $t (${seconds}s)"
    status=0
    # shellcheck disable=SC2086
    "${fuzz[@]}" run "${opts[@]}" "$t" "$found" "corpus/$t" -- \
        -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 ${FUZZ_FLAGS:-} >"$log" 2>&1 || status=$?
    grep -E '^stat::(number_of_executed_units|new_units_added)' "$log" || true
    if [ "$status" -ne 0 ]; then
        grep -E 'ERROR|SUMMARY|panicked|Test unit written|Running: ' "$log" | head -20 >&2 || true
        echo "fuzz target $t failed (exit $status): the input is in fuzz/artifacts/$t/, the log in fuzz/$log" >&2
        exit 1
    fi
done
