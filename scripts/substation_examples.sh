#!/usr/bin/env bash
# Runs Substation's own example configs through sluice, as a Substation user would.
#
#   SUBSTATION_DIR=path/to/brexhq/substation scripts/substation_examples.sh
#
# For every examples/**/config.jsonnet of a Substation checkout (v2 layout):
#   1. compiles it with the reference Jsonnet tool (Debian's `jsonnet`) and Substation's own
#      library, and with `sluice build --stdout`, and compares the JSON (key order aside);
#   2. runs `sluice test` from a scratch copy of the example's directory.
# Prints a line per example and the counts. Examples that need the network or cloud
# accounts (their names are in ONLINE below) are counted apart. Not part of CI: the
# examples are Substation's, not ours, and are not kept in this repository.
set -uo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-$PWD/target/debug/sluice}
SUB=${SUBSTATION_DIR:?set SUBSTATION_DIR to a checkout of brexhq/substation}
LIB=$SUB/substation.libsonnet
ONLINE='enrich/(http_secret|urlscan|mmdb)$|send/(aws_|datadog|gcp_|splunk|sumologic)'
# Fails half the time by design, in Substation too (a utility.random condition decides
# whether it errors; its stdout.txt shows the crash).
RANDOM_RE='meta/crash_program$'
for tool in jsonnet jq "$SLUICE"; do
    command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 2; }
done
[ -f "$LIB" ] || { echo "no substation.libsonnet in $SUB" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0 same=0 differ=0 both_fail=0 pass=0 fail=0 online_fail=0 random_fail=0 notests=0
while IFS= read -r cfg; do
    dir=$(dirname "$cfg")
    rel=${dir#"$SUB"/}
    n=$((n + 1))
    a=$(cd "$dir" && jsonnet --ext-code-file sub="$LIB" config.jsonnet 2>/dev/null | jq -S -c .)
    b=$(cd "$dir" && "$SLUICE" build --stdout config.jsonnet 2>/dev/null | jq -S -c .)
    if [ -z "$a" ] && [ -z "$b" ]; then json="fails in both"; both_fail=$((both_fail + 1))
    elif [ "$a" = "$b" ]; then json=same; same=$((same + 1))
    else json=DIFFERENT; differ=$((differ + 1)); fi

    rm -rf "$work/ex" && cp -r "$dir" "$work/ex"
    out=$(cd "$work/ex" && timeout 120 "$SLUICE" test config.jsonnet 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q '\[no tests\]' <<<"$out"; then test=no-tests; notests=$((notests + 1))
    elif [ $rc -eq 0 ]; then test=PASS; pass=$((pass + 1))
    elif grep -Eq "$ONLINE" <<<"$rel"; then test="fail (needs the network)"; online_fail=$((online_fail + 1))
    elif grep -Eq "$RANDOM_RE" <<<"$rel"; then test="fail (random by design)"; random_fail=$((random_fail + 1))
    else test=FAIL; fail=$((fail + 1)); fi
    printf '%-50s json: %-14s test: %s\n' "$rel" "$json" "$test"
done < <(find "$SUB/examples" -name config.jsonnet | sort)
echo "---"
echo "$n examples: JSON same $same, different $differ, fails in both $both_fail"
echo "sluice test: pass $pass, fail $fail, need the network $online_fail, random by design $random_fail, no tests $notests"
[ "$differ" -eq 0 ] && [ "$fail" -eq 0 ]
