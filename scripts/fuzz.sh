#!/usr/bin/env bash
# Fuzzes every target in fuzz/ for a bounded time: coverage-guided (libFuzzer, through
# cargo-fuzz from crates.io), on the machine's stable toolchain.
#
#   scripts/fuzz.sh            every target, 25 s each (what CI runs: about 2 minutes)
#   scripts/fuzz.sh 600        every target, 10 minutes each
#   scripts/fuzz.sh 600 json   one target
#   scripts/fuzz.sh install    only installs cargo-fuzz (the test command does this early,
#                              in the background, while it installs the emulators)
#
# Each target starts from its corpus in fuzz/corpus/<target> (kept in the repository).
# FUZZ_JOBS targets (one per core unless set) run at once: a libFuzzer run is one process
# on one core, so each target still has a core for all its seconds. A crash, an
# out-of-memory or a timeout fails the run and leaves its input in fuzz/artifacts/<target>/:
# make it a unit test next to the code it broke, and add the input to the corpus.
# docs/contributing.md#fuzzing has the details.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi
if [ "${1:-}" = install ]; then
    exit 0
fi
seconds=${1:-25}
shift || true
jobs=${FUZZ_JOBS:-$(nproc)}
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: FUZZ_JOBS must be a whole number of targets at a time, at least 1 (it is '$jobs')" >&2
    exit 2
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

# Fuzzes one target into its log; its exit status is the run's. New inputs a run finds go
# to fuzz/target/corpus/<target> (not kept); the committed corpus is read, never written.
# FUZZ_FLAGS adds libFuzzer flags (e.g. -jobs=2).
fuzz_one() {
    local t=$1 found="target/corpus/$1"
    mkdir -p "$found" "corpus/$t"
    # shellcheck disable=SC2086
    "${fuzz[@]}" run "${opts[@]}" "$t" "$found" "corpus/$t" -- \
        -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 ${FUZZ_FLAGS:-} >"target/fuzz-$t.log" 2>&1
}

# Prints what the run of target $1 (exit status $2) found; fails on a failed run.
report() {
    local t=$1 status=$2 log="target/fuzz-$1.log"
    echo "==> fuzz $t (${seconds}s)"
    grep -E '^stat::(number_of_executed_units|new_units_added)' "$log" || true
    if [ "$status" -ne 0 ]; then
        grep -E 'ERROR|SUMMARY|panicked|Test unit written|Running: ' "$log" | head -20 >&2 || true
        echo "fuzz target $t failed (exit $status): the input is in fuzz/artifacts/$t/, the log in fuzz/$log" >&2
        return 1
    fi
}

# Runs the targets `jobs` at a time; each group is reported (in order) once all of it has
# run, and the first failure fails the run after its group.
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
    group=("${targets[@]:i:jobs}")
    pids=()
    for t in "${group[@]}"; do
        fuzz_one "$t" &
        pids+=($!)
    done
    failed=0
    for k in "${!group[@]}"; do
        status=0
        wait "${pids[$k]}" || status=$?
        report "${group[$k]}" "$status" || failed=1
    done
    [ "$failed" -eq 0 ] || exit 1
done
