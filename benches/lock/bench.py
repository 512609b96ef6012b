#!/usr/bin/env python3
"""The meta_kv_store_lock benchmark: locks in DynamoDB (the dynoxide emulator) behind an
added network delay, at the default concurrency and at concurrency 1, in the same run.

Each run starts dynoxide on a free loopback port, creates the lock table (on-demand,
partition key PK of type S), and runs `sluice run CONFIG < input` over messages with unique
ids, the pipeline being a lock (`object.source_key: 'id'`, `ttl_offset: '1h'`, a fresh
`prefix` per run) around one `object_insert`, then `send_stdout`. Locks are taken in
TransactWriteItems of up to 100 conditional updates (the store's default, `lock_acquire:
'transactions'`; builds before it, and `--items`, make one conditional write per key, an
UpdateItem, or a PutItem before the lock redesign; `--statements` writes keys in PartiQL
BatchExecuteStatements of up to 25, reading up to 100 with one BatchGetItem first while the
process finds that keys exist (a fresh process reads its first ones); `--epochs`
likewise, but writes them pending in an epoch: all these writes count in the acquisition
column, the reads in `other`) and committed in calls of up to 100 keys (TransactWriteItems)
or 25 (BatchExecuteStatement), or with `--epochs` a batch's keys by one UpdateItem of their
epoch record, as messages are delivered (the commit column; a taker's UpdateItem that aborts
a slot of another owner's epoch counts in `other`). Each run goes through a fresh delay proxy (delay_proxy.py: DELAY_MS added in
each direction, so 2 x DELAY_MS per round trip), which counts the DynamoDB calls by operation
and traces when each was made.

Configurations (rows), interleaved run by run so they see the same machine:
  default/DELAY   the lock's default concurrency (32 calls in flight; not set in the config)
  serial/DELAY    `concurrency: 1`; fewer messages (--serial-messages), because one call
                  at a time over a ~6 ms round trip runs ~160 messages/s
  default/0ms     through the proxy with no delay: with default/direct, the proxy's cost
  default/direct  no proxy: the emulator's and sluice's own ceiling on this machine
  stub/DELAY      the proxy answers every call itself (`200 {}`; a BatchGetItem with no
                  item, a BatchExecuteStatement with a success per statement) after 2 x
                  DELAY: a DynamoDB that costs no CPU here, so sluice's own ceiling at that
                  delay
  base-*/DELAY    --baseline BIN adds the default and stub rows run with another build
                  (e.g. the previous commit's), and their ratios
  items/DELAY     --items adds the default and stub rows with `lock_acquire: 'items'` (one
                  UpdateItem per key instead of transactions of up to 100), and their ratios
  statements/DELAY  --statements adds the default and stub rows with `lock_acquire:
                  'statements'` (a consistent BatchGetItem per 100 keys, then PartiQL
                  statements of up to 25), and their ratios
  epochs/DELAY    --epochs adds the default and stub rows with `lock_acquire: 'epochs'` (as
                  statements, but the keys written pending in an epoch, and a batch
                  committed by one UpdateItem of its epoch record `#epoch:OWNER:N`), and
                  their ratios (and against the statements rows, with --statements)
  cN/DELAY        --concurrency N adds rows with `concurrency: N` (and stub-cN/DELAY, the
                  same against the stub), for investigation

Capacity units are billed as DynamoDB bills them, a hybrid (billing.py has the rules and
AWS's words): a call that succeeded is billed what the emulator's `ConsumedCapacity` says,
because dynoxide 1.2.1 returns it when asked (`"ReturnConsumedCapacity": "TOTAL"`, which
the proxy adds to each data-plane request) and its figures follow AWS's rules (checked: the
larger of the old and new item per KB for puts and updates, at least 1; 2 per item per KB for
transactional writes; reads per 4 KB, halved when eventually consistent); the ledger's own
estimate of each such call is compared with it and the differences counted. A call that
failed is billed from its request and answer, per kind of call, because DynamoDB returns no
`ConsumedCapacity` for a failed conditional write or a cancelled transaction although it
bills both: a failed conditional write the size of the item (at least 1 unit), a cancelled
TransactWriteItems 2 units per item per KB for all its items. dynoxide does not check the
SigV4 signature, so the proxy may change the body the bench's sluice signed.

The capacity-units table (after the configurations; --units-only runs it alone, --no-units
leaves it out) has four phases for each `lock_acquire` (`transactions`, the default,
`items`, `statements` and `epochs`; units.py runs them), each one `sluice run` over
--units-messages messages through its own billing proxy (delay_proxy.py --bill) at +DELAY, with one emulator per acquisition mode and run
(--units-runs of them, 1 by default, beside the first runs of the configurations). Only these
runs are billed: billing costs the proxy ~50 us of CPU per call, which the configurations'
messages/s are kept free of (so the phases' messages/s run a little below them).
  new         ids no run has used (a fresh prefix)
  duplicate   the same ids again in a second `sluice run`: every key is committed
  mixed       ids of which one in 100 is one of those (a duplicate), the rest fresh: what a
              duplicate costs among new messages (with transactions, it cancels the
              transaction of up to 100 keys it is in, which is billed in full; with
              statements and epochs, which write keys unread once a process has seen
              that they are new, its INSERT is refused, billed, and its key read back)
  takeover    fresh ids taken by an owner that dies holding them: a `sluice run` whose lock
              (lease 20s) is followed by a one-hour `utility_delay`, the input in one batch,
              killed with SIGKILL once the proxy has seen every key taken (before anything
              is sent, so every key is left pending, not given back); then, once the
              latest lease ended plus the taker's clock skew (10 s, the default), a second
              `sluice run` with the default settings takes them over (with epochs, it
              reads the dead owner's epoch records and aborts the keys' slots first).
              Its units are the row's; the dead owner's own (its takes and renewals)
              are printed below.
Each phase's row: messages/s (that run's wall time), write and read units per message,
calls per message, and the units per message by kind of call (take, commit, read; with
epochs also the epoch records' reads, commits and aborts) and outcome.

Printed: per configuration the median messages/s (wall time of the whole process: start,
config, reading, locking, the final commit; start-up is ~10 ms), the range over the runs,
DynamoDB calls per message by operation, the default/serial ratio; then where the time
went (the commit phase, from the first TransactWriteItems, committing BatchExecuteStatement or
epoch commit to the exit) and the CPU per message of sluice, the emulator and the proxy, and how busy the rest of the machine was.
Each run checks that sluice exited 0 and every message came out with the inner
transform's field (in the duplicate phase: every message, none with it); through the proxy
it warns unless one acquisition was made per message.

Usage (from the repository root; scripts/bench.sh lock builds and runs it):
  benches/lock/bench.py [--messages 20000] [--serial-messages 2000] [--runs 3]
                        [--delay-ms 2.5] [--concurrency 64,128] [--run-args '--workers 1']
                        [--sluice target-bench/release/sluice] [--baseline OTHER_SLUICE]
                        [--dynoxide PATH] [--units-messages N] [--units-runs 1]
                        [--items] [--statements] [--epochs] [--units-only | --no-units]
"""
import argparse
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from harness import (CHILDREN, DYNOXIDE, ROOT, Run, busy_s, check_output, cpu_s, create_table, die, input_file,
                     probe_rtt, sluice_env, start_dynoxide, start_proxy, stop, stop_proxy, write_config)
from units import MODES, PHASES, print_units, run_phases  # beside this file

# An acquisition is an UpdateItem (a PutItem in builds before the lock redesign), a
# transaction or statements that take keys (delay_proxy.py labels them), but not an
# UpdateItem of an epoch record ('epochs': EPOCH_UPDATES, labelled too), which commits a
# batch (`UpdateItem/commit`) or aborts a slot.
ACQUIRE_OPS = ("UpdateItem", "PutItem", "TransactWriteItems/acquire", "BatchExecuteStatement/acquire")
EPOCH_UPDATES = ("UpdateItem/commit", "UpdateItem/abort", "UpdateItem/epoch")
COMMIT_OPS = ("TransactWriteItems", "BatchExecuteStatement/commit", "UpdateItem/commit")
# Counted in the acquisition and commit columns (a TransactWriteItems/acquire is also a
# TransactWriteItems; a labelled call is also counted under its operation). The rest, other
# (labelled calls are not counted twice there; an epoch record's UpdateItem that does not
# commit is).
OPS = ACQUIRE_OPS + COMMIT_OPS + ("BatchExecuteStatement",)


def run_one(args, tmp, label, messages, concurrency, delay, stub=False, sluice=None, acquire=None):
    """A fresh emulator (none for the stub) and proxy (none when delay is None), one sluice
    run, its measurements."""
    dynoxide, db_port = (None, None) if stub else start_dynoxide(args.dynoxide)
    if dynoxide:
        create_table(db_port)
    proxy = None
    port = db_port
    counts_path = os.path.join(tmp, "counts.json")
    trace_path = os.path.join(tmp, "trace.txt")
    if delay is not None:
        proxy, port = start_proxy("stub" if stub else db_port, delay, counts_path, trace_path)

    prefix = f"{label.replace('/', '-')}-{uuid.uuid4().hex[:10]}"
    config = os.path.join(tmp, "config.jsonnet")
    write_config(config, prefix, concurrency, acquire)
    inp = input_file(tmp, messages)
    out = os.path.join(tmp, "out.jsonl")
    env = sluice_env(port)
    timeout = 60 + messages / 20  # far above the slowest expected run (~150 msgs/s serial)
    cmd = [sluice or args.sluice, "run", "--config", config, *shlex.split(args.run_args)]
    db_cpu0 = cpu_s(dynoxide.pid) if dynoxide else 0.0
    px_cpu0 = cpu_s(proxy.pid) if proxy else 0.0
    busy0 = busy_s()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(inp, "rb") as fin, open(out, "wb") as fout:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE, env=env)
        CHILDREN.append(proc)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc, signal.SIGKILL)
            die(f"{label}: sluice did not finish {messages} messages in {timeout:.0f} s")
        end = time.monotonic()
        CHILDREN.remove(proc)
    # Only sluice was reaped in between (the emulator and the proxy are still running).
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    sluice_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    busy = busy_s() - busy0
    db_cpu = (cpu_s(dynoxide.pid) - db_cpu0) if dynoxide else 0.0
    px_cpu = (cpu_s(proxy.pid) - px_cpu0) if proxy else 0.0
    if proc.returncode != 0:
        die(f"{label}: sluice exited {proc.returncode}:\n{err.decode(errors='replace')[-4000:]}")
    check_output(label, out, messages, messages)

    counts = None
    commit_s = None
    if proxy:
        counts = stop_proxy(proxy, counts_path)
        taken = sum(counts["targets"].get("DynamoDB_20120810." + op, 0) for op in ("UpdateItem", "PutItem"))
        taken -= sum(counts["targets"].get("DynamoDB_20120810." + op, 0) for op in EPOCH_UPDATES)
        taken += counts.get("acquire_keys", 0)
        if taken != messages:
            print(f"warning: {label}: {taken} keys asked for, for {messages} messages", file=sys.stderr)
        with open(trace_path) as f:
            twi = [float(t) for t, target in (line.split() for line in f)
                   if target.endswith((".TransactWriteItems", ".BatchExecuteStatement/commit", ".UpdateItem/commit"))]
        if twi:
            commit_s = end - min(twi)
    if dynoxide:
        stop(dynoxide)
    return Run(wall=end - start, counts=counts, commit_s=commit_s, cpu=sluice_cpu, db_cpu=db_cpu, px_cpu=px_cpu,
               busy=busy)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000, help="per run at the default concurrency")
    ap.add_argument("--serial-messages", type=int, default=2_000, help="per run at concurrency 1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=2.5, help="added by the proxy in each direction")
    ap.add_argument("--concurrency", default="", help="extra rows: comma-separated lock concurrencies")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target-bench", "release", "sluice"))
    ap.add_argument("--baseline", default="",
                    help="another sluice build: adds its default and stub rows (base-default/DELAY, "
                         "base-stub/DELAY), run interleaved with the others, and the ratios against them")
    ap.add_argument("--dynoxide", default=DYNOXIDE)
    ap.add_argument("--items", action="store_true",
                    help="adds rows whose store takes locks one UpdateItem at a time (lock_acquire: 'items'; "
                         "items/DELAY and stub-items/DELAY) beside the default, transactions")
    ap.add_argument("--statements", action="store_true",
                    help="adds rows whose store takes locks with a BatchGetItem and PartiQL statements "
                         "(lock_acquire: 'statements'; statements/DELAY and stub-statements/DELAY) beside the default")
    ap.add_argument("--epochs", action="store_true",
                    help="adds rows whose store takes locks with a BatchGetItem and PartiQL statements in an epoch "
                         "and commits each batch with one UpdateItem (lock_acquire: 'epochs'; epochs/DELAY and "
                         "stub-epochs/DELAY) beside the default")
    ap.add_argument("--run-args", default="", help="extra arguments of every `sluice run`, e.g. '--workers 1'")
    ap.add_argument("--units-messages", type=int, default=0,
                    help="messages per phase of the capacity-units table (default: --messages)")
    ap.add_argument("--units-runs", type=int, default=1,
                    help="runs of the capacity-units phases, interleaved with the first runs of the configurations "
                         "(the units do not vary from run to run; their messages/s do)")
    ap.add_argument("--units-only", action="store_true",
                    help="only the capacity-units table (its phases, every acquisition mode), not the configurations")
    ap.add_argument("--no-units", dest="units", action="store_false",
                    help="only the configurations, not the capacity-units table")
    args = ap.parse_args()
    args.units_messages = args.units_messages or args.messages
    if not os.access(args.sluice, os.X_OK):
        die(f"no sluice binary at {args.sluice} (scripts/bench.sh lock builds it)")
    if args.baseline and not os.access(args.baseline, os.X_OK):
        die(f"no baseline sluice binary at {args.baseline}")
    if not os.access(args.dynoxide, os.X_OK):
        die(f"no dynoxide at {args.dynoxide} (scripts/emulators.sh install)")
    if min(args.runs, args.messages, args.serial_messages, args.units_messages, args.units_runs) < 1:
        die("--runs, --messages, --serial-messages, --units-messages and --units-runs must be at least 1")
    if args.units_only:
        args.runs = args.units_runs
    if args.units_only and not args.units:
        die("--units-only and --no-units leave nothing to run")

    d = f"{args.delay_ms:g}ms"
    # (label, concurrency or None for the default, messages, delay ms or None for no proxy, stub,
    #  binary or None for --sluice)
    configs = [
        (f"default/{d}", None, args.messages, args.delay_ms, False),
        (f"serial/{d}", 1, args.serial_messages, args.delay_ms, False),
        ("default/0ms", None, args.messages, 0.0, False),
        ("default/direct", None, args.messages, None, False),
        (f"stub/{d}", None, args.messages, args.delay_ms, True),
    ]
    configs = [c + (None, None) for c in configs]
    if args.items:
        configs.append((f"items/{d}", None, args.messages, args.delay_ms, False, None, "items"))
        configs.append((f"stub-items/{d}", None, args.messages, args.delay_ms, True, None, "items"))
    if args.statements:
        configs.append((f"statements/{d}", None, args.messages, args.delay_ms, False, None, "statements"))
        configs.append((f"stub-statements/{d}", None, args.messages, args.delay_ms, True, None, "statements"))
    if args.epochs:
        configs.append((f"epochs/{d}", None, args.messages, args.delay_ms, False, None, "epochs"))
        configs.append((f"stub-epochs/{d}", None, args.messages, args.delay_ms, True, None, "epochs"))
    if args.baseline:
        configs.append((f"base-default/{d}", None, args.messages, args.delay_ms, False, args.baseline, None))
        configs.append((f"base-stub/{d}", None, args.messages, args.delay_ms, True, args.baseline, None))
    for c in filter(None, (x.strip() for x in args.concurrency.split(","))):
        configs.append((f"c{int(c)}/{d}", int(c), args.messages, args.delay_ms, False, None, None))
        configs.append((f"stub-c{int(c)}/{d}", int(c), args.messages, args.delay_ms, True, None, None))
    if args.units_only:
        configs = []

    # Ctrl-C and SIGTERM end the bench through the clean-up below (SIGINT explicitly: a shell
    # that starts a job in the background ignores it in the job).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    results = {c[0]: [] for c in configs}
    units = {mode: [] for mode in MODES}
    probes = {}
    with tempfile.TemporaryDirectory(prefix="sluice-lock-bench-") as tmp:
        try:
            if configs:
                dynoxide, db_port = start_dynoxide(args.dynoxide)
                create_table(db_port)
                probes["direct"] = probe_rtt(db_port)
                for delay in (0.0, args.delay_ms):
                    counts_path = os.path.join(tmp, "probe-counts.json")
                    proxy, port = start_proxy(db_port, delay, counts_path)
                    probes[f"+{delay:g} ms"] = probe_rtt(port)
                    stop_proxy(proxy, counts_path)
                stop(dynoxide)
            for r in range(args.runs):
                for label, conc, n, delay, stub, binary, acquire in configs:  # interleaved: same machine
                    run = run_one(args, tmp, label, n, conc, delay, stub, binary, acquire)
                    results[label].append(run)
                    print(f"  run {r + 1}/{args.runs} {label:<21} {n:>7} msgs {run.wall:7.3f} s "
                          f"{n / run.wall:>9,.0f} msgs/s", file=sys.stderr, flush=True)
                for mode in MODES if args.units and r < args.units_runs else ():
                    phases = run_phases(args, tmp, mode)
                    units[mode].append(phases)
                    n = args.units_messages
                    print(f"  run {r + 1}/{args.runs} units/{mode}: " + ", ".join(
                        f"{p} {phases[p].counts['bill']['write'] / n:.2f} write/msg {n / phases[p].wall:,.0f} msgs/s"
                        for p in PHASES), file=sys.stderr, flush=True)
        finally:  # inside the temporary directory: the proxies write their counts there
            for proc in list(CHILDREN):
                stop(proc, signal.SIGKILL if proc.args[0] in (args.sluice, args.baseline) else signal.SIGTERM)

    if configs:
        print_rows(args, configs, results, probes)
    if args.units:
        print_units(args, units)


def print_rows(args, configs, results, probes):
    d = f"{args.delay_ms:g}ms"
    med = statistics.median
    print()
    print(f"meta_kv_store_lock over DynamoDB (dynoxide on loopback), +{args.delay_ms:g} ms each way by the proxy, "
          f"median of {args.runs} runs" + (f", sluice run {args.run_args}" if args.run_args else ""))
    print("sequential PutItem round trip, p50 (Python client): " + ", ".join(f"{k} {v:.2f} ms" for k, v in probes.items()))
    print(f"{'configuration':<21} {'concurrency':>12} {'messages':>8} {'msgs/s':>7} {'min-max':>13} "
          f"{'acquire/msg':>11} {'commit/msg':>10} {'other/msg':>9} {'conns':>5}")
    medians = {}
    for label, conc, n, delay, stub, _, _ in configs:
        runs = results[label]
        rates = sorted(n / x.wall for x in runs)
        medians[label] = med(rates)
        counted = [x.counts for x in runs if x.counts]
        if counted:
            def per_msg(*ops):
                return med(sum(c["targets"].get("DynamoDB_20120810." + op, 0) for op in ops) / n
                           for c in counted)
            other = med(sum(v for k, v in c["targets"].items() if k.rsplit(".", 1)[-1] not in OPS and "/" not in k)
                        / n for c in counted) + per_msg("UpdateItem/abort", "UpdateItem/epoch")
            conns = med(c["connections"] for c in counted)
            commits = per_msg(*COMMIT_OPS) - per_msg("TransactWriteItems/acquire")
            acquires = per_msg(*ACQUIRE_OPS) - per_msg(*EPOCH_UPDATES)
            calls = f"{acquires:>11.3f} {commits:>10.4f} {other:>9.4f} {conns:>5.0f}"
        else:
            calls = f"{'-':>11} {'-':>10} {'-':>9} {'-':>5}"
        shown = "32 (default)" if conc is None else str(conc)
        print(f"{label:<21} {shown:>12} {n:>8} {medians[label]:>7,.0f} "
              f"{f'{rates[0]:,.0f}-{rates[-1]:,.0f}':>13} {calls}")
    ratio = medians[f"default/{d}"] / medians[f"serial/{d}"]
    print(f"default/serial at +{args.delay_ms:g} ms: {ratio:.1f}x messages/s")
    if args.items:
        for row, items in (("default", "items"), ("stub", "stub-items")):
            print(f"{row}/{d} (transactions) against {items}/{d} (one UpdateItem per key): "
                  f"{medians[f'{row}/{d}'] / medians[f'{items}/{d}']:.2f}x messages/s")
    if args.statements:
        for row, stmts in (("default", "statements"), ("stub", "stub-statements")):
            print(f"{row}/{d} (transactions) against {stmts}/{d} (statements, read first only while keys exist): "
                  f"{medians[f'{row}/{d}'] / medians[f'{stmts}/{d}']:.2f}x messages/s")
    if args.epochs:
        for row, epochs in (("default", "epochs"), ("stub", "stub-epochs")):
            print(f"{row}/{d} (transactions) against {epochs}/{d} (statements in an epoch, read first only while keys exist, one "
                  f"UpdateItem per batch's commit): {medians[f'{row}/{d}'] / medians[f'{epochs}/{d}']:.2f}x messages/s")
        if args.statements:
            for row in ("", "stub-"):
                print(f"{row}statements/{d} against {row}epochs/{d}: "
                      f"{medians[f'{row}statements/{d}'] / medians[f'{row}epochs/{d}']:.2f}x messages/s")
    if args.baseline:
        for row in ("default", "stub"):
            print(f"{row}/{d} against the baseline build ({args.baseline}): "
                  f"{medians[f'{row}/{d}'] / medians[f'base-{row}/{d}']:.2f}x messages/s")
    print()
    print("where the time and the CPU went (medians; commit = from the first TransactWriteItems, committing")
    print("BatchExecuteStatement or epoch commit (UpdateItem) to the exit;")
    print("CPU per message of each process; other = the rest of the machine, in cores busy on average)")
    print(f"{'configuration':<21} {'wall s':>7} {'commit s':>8} {'sluice us':>9} {'dynoxide us':>11} "
          f"{'proxy us':>8} {'other cores':>11}")
    for label, conc, n, delay, stub, _, _ in configs:
        runs = results[label]
        commits = [x.commit_s for x in runs if x.commit_s is not None]
        commit = f"{med(commits):>8.3f}" if commits else f"{'-':>8}"
        proxy = f"{med(x.px_cpu for x in runs) / n * 1e6:>8.0f}" if delay is not None else f"{'-':>8}"
        others = med(max(0.0, x.busy - x.cpu - x.db_cpu - x.px_cpu) / x.wall for x in runs)
        db = f"{'-':>11}" if stub else f"{med(x.db_cpu for x in runs) / n * 1e6:>11.0f}"
        print(f"{label:<21} {med(x.wall for x in runs):>7.3f} {commit} {med(x.cpu for x in runs) / n * 1e6:>9.0f} "
              f"{db} {proxy} {others:>11.2f}")
    print("(commit = TransactWriteItems, and BatchExecuteStatements and epoch UpdateItems that commit. "
          f"The serial rows use {args.serial_messages} messages, the others {args.messages}: one call at a time runs ~1/30 as fast, "
          "and the rate per message does not depend on the count beyond ~10 ms of process start-up. "
          "Each run has a fresh emulator.)")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
