"""The capacity-units table of benches/lock/bench.py (its module docstring describes the
phases): each `lock_acquire` mode's phases over one emulator, through billing proxies.
"""
import os
import shlex
import signal
import statistics
import subprocess
import time
import uuid

import billing  # beside this file
from harness import (CHILDREN, TABLE, Dynamo, Run, check_output, create_table, die, input_file, proxy_counts,
                     sluice_env, start_dynoxide, start_proxy, stop, stop_proxy, write_config, write_input)

# --- capacity units per message, by phase ----------------------------------------------

# The lease of the owner that dies in the takeover phase: short, so that the takeover can
# follow soon; long enough that its renewals (every third of it, of every key it holds) do
# not slow its taking of them much on a busy machine.
OWNER_LEASE = "20s"
# The taker's clock_skew, the default for its lease (the default 1m): another owner's lease
# blocks it until the lease's end plus this.
TAKER_SKEW_S = 10.0
PHASES = ("new", "duplicate", "mixed", "takeover")
# In the mixed phase, one message in this many is a duplicate.
MIXED_EVERY = 100
MODES = ("transactions", "items", "statements", "epochs")
# Statuses of a key left pending: `epoch` is pending in an epoch ('epochs'), which only its
# epoch record (`#epoch:OWNER:N`, billing.EPOCH_MARK) says is committed or aborted.
PENDING_STATUSES = ("pending", "epoch")


def phase_run(args, tmp, db_port, label, config, inp, n, marked):
    """One `sluice run` over the emulator through a billing proxy: its wall time and counts.
    `marked` messages must come out through the inner transform, and all `n` out."""
    counts_path = os.path.join(tmp, "phase-counts.json")
    proxy, port = start_proxy(db_port, args.delay_ms, counts_path, bill=True)
    out = os.path.join(tmp, "phase-out.jsonl")
    cmd = [args.sluice, "run", "--config", config, *shlex.split(args.run_args)]
    timeout = 60 + n / 20
    with open(inp, "rb") as fin, open(out, "wb") as fout:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE, env=sluice_env(port))
        CHILDREN.append(proc)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc, signal.SIGKILL)
            die(f"{label}: sluice did not finish {n} messages in {timeout:.0f} s")
        wall = time.monotonic() - start
        CHILDREN.remove(proc)
    if proc.returncode != 0:
        die(f"{label}: sluice exited {proc.returncode}:\n{err.decode(errors='replace')[-4000:]}")
    check_output(label, out, n, marked)
    return Run(wall=wall, counts=stop_proxy(proxy, counts_path))


def kill_owner(args, tmp, db_port, label, config, inp, n):
    """Runs an owner that takes the `n` keys and holds them pending (a config with `hold`,
    and the whole input in one batch), and kills it with SIGKILL once the proxy has seen
    every key taken: what a crash leaves. Its counts and how long it lived."""
    counts_path = os.path.join(tmp, "owner-counts.json")
    proxy, port = start_proxy(db_port, args.delay_ms, counts_path, bill=True)
    out = os.path.join(tmp, "owner-out.jsonl")
    batch = ["--batch-messages", str(n), "--batch-bytes", str(256 * n + (1 << 20)),
             "--read-ahead-bytes", str(512 * n + (8 << 20))]
    cmd = [args.sluice, "run", "--config", config, *batch, *shlex.split(args.run_args)]
    with open(inp, "rb") as fin, open(out, "wb") as fout:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL, env=sluice_env(port))
        CHILDREN.append(proc)
        deadline = start + 60 + n / 20
        while True:
            if proc.poll() is not None:
                die(f"{label}: the owner exited ({proc.returncode}) before it took its {n} keys")
            if proxy_counts(proxy, counts_path).get("acquired_keys", 0) >= n:
                break
            if time.monotonic() > deadline:
                stop(proc, signal.SIGKILL)
                die(f"{label}: the owner did not take its {n} keys in {deadline - start:.0f} s")
            time.sleep(0.25)
        stop(proc, signal.SIGKILL)
        lived = time.monotonic() - start
    if os.path.getsize(out):
        die(f"{label}: the owner delivered messages before it was killed (its keys were to stay pending)")
    return Run(wall=lived, counts=stop_proxy(proxy, counts_path))


def wait_for_leases(db_port, prefix, n, label):
    """Waits until the `n` pending keys under `prefix` can be taken over: the latest lease's
    end plus the taker's skew (read from the table directly, not through a proxy). A key
    pending in an epoch ('epochs') counts when its epoch record (if any) committed or
    aborted neither its slot."""
    db = Dynamo(db_port)
    req = {"TableName": TABLE, "ProjectionExpression": "PK, lock_status, lock_lease_until, lock_owner, lock_epoch, "
           "lock_slot, lock_committed, lock_aborted"}
    keys, epochs = [], {}
    while True:
        status, data = db.call("Scan", req)
        if status != 200:
            die(f"{label}: Scan: HTTP {status}: {data}")
        for item in data.get("Items", []):
            pk = item.get("PK", {}).get("S", "")
            if billing.EPOCH_MARK in pk:
                epochs[pk] = item
            elif pk.startswith(prefix + ":") and item.get("lock_status", {}).get("S") in PENDING_STATUSES:
                keys.append(item)
        if "LastEvaluatedKey" not in data:
            break
        req["ExclusiveStartKey"] = data["LastEvaluatedKey"]
    db.close()
    pending, latest_ms = 0, 0
    for item in keys:
        lease = int(item.get("lock_lease_until", {}).get("N", "0"))
        if item["lock_status"]["S"] == "epoch":
            # An epoch's record is written by its first commit (or a taker's abort): none
            # for the killed owner's epochs, unless it committed part of them.
            record = epoch_record(epochs, item) or {}
            slot = item.get("lock_slot", {}).get("N")
            if any(slot in record.get(s, {}).get("NS", []) for s in ("lock_committed", "lock_aborted")):
                continue
        pending += 1
        latest_ms = max(latest_ms, lease)
    if pending != n:
        die(f"{label}: {pending} keys left pending by the killed owner, not {n}")
    time.sleep(max(0.0, latest_ms / 1000 + TAKER_SKEW_S + 1.0 - time.time()))


def epoch_record(epochs, item):
    """The epoch record ({PK: item}) of a key pending in an epoch: `lock_epoch` names it whole,
    or its number under the key's owner (`#epoch:OWNER:N`, with or without a prefix)."""
    epoch = item.get("lock_epoch", {})
    epoch = str(epoch.get("S", epoch.get("N", "")))
    if epoch in epochs:
        return epochs[epoch]
    name = f"{billing.EPOCH_MARK}{item.get('lock_owner', {}).get('S', '')}:{epoch}"
    return next((r for pk, r in epochs.items() if pk.endswith(name)), None)


def run_phases(args, tmp, acquire):
    """The phases of one acquisition mode over one emulator: `new` (fresh keys), `duplicate`
    (the same keys again, all committed), `mixed` (fresh keys but one in MIXED_EVERY, which
    is committed), `takeover` (fresh keys an owner took and died holding, taken once their
    leases ended); and `owner`, the dead owner's own run."""
    n = args.units_messages
    dynoxide, db_port = start_dynoxide(args.dynoxide)
    create_table(db_port)
    inp = input_file(tmp, n)
    config = os.path.join(tmp, "phase.jsonnet")
    out = {}
    write_config(config, f"units-{acquire}-{uuid.uuid4().hex[:10]}", None, acquire)
    out["new"] = phase_run(args, tmp, db_port, f"new/{acquire}", config, inp, n, n)
    out["duplicate"] = phase_run(args, tmp, db_port, f"duplicate/{acquire}", config, inp, n, 0)
    mixed = os.path.join(tmp, f"input-{n}-mixed.jsonl")
    if not os.path.exists(mixed):
        write_input(mixed, n, MIXED_EVERY)
    fresh = n - len(range(0, n, MIXED_EVERY))
    out["mixed"] = phase_run(args, tmp, db_port, f"mixed/{acquire}", config, mixed, n, fresh)
    prefix = f"takeover-{acquire}-{uuid.uuid4().hex[:10]}"
    write_config(config, prefix, None, acquire, lease=OWNER_LEASE, hold=True)
    out["owner"] = kill_owner(args, tmp, db_port, f"takeover/{acquire}", config, inp, n)
    wait_for_leases(db_port, prefix, n, f"takeover/{acquire}")
    write_config(config, prefix, None, acquire)
    out["takeover"] = phase_run(args, tmp, db_port, f"takeover/{acquire}", config, inp, n, n)
    stop(dynoxide)
    return out


def print_units(args, units):
    n = args.units_messages
    med = statistics.median
    print()
    print(f"DynamoDB capacity units per message, billed as DynamoDB bills them: {n:,} messages a phase, "
          f"+{args.delay_ms:g} ms each way, median of {len(units[MODES[0]])} runs")
    print(f"{'phase':<10} {'lock_acquire':<13} {'msgs/s':>7} {'write/msg':>9} {'read/msg':>8} {'calls/msg':>9}  "
          "units per message, by call (write, +read)")
    for mode in MODES:
        for phase in PHASES:
            runs = [u[phase] for u in units[mode]]
            rate = med(n / x.wall for x in runs)
            write = med(x.counts["bill"]["write"] / n for x in runs)
            read = med(x.counts["bill"]["read"] / n for x in runs)
            calls = med(sum(v for k, v in x.counts["targets"].items() if "/" not in k) / n for x in runs)
            unbilled = sorted(billing.unbilled_of([x.counts["bill"] for x in runs]).items())
            nothing = "; billed nothing: " + ", ".join(f"{v} {k}" for k, v in unbilled) if unbilled else ""
            print(f"{phase:<10} {mode:<13} {rate:>7,.0f} {write:>9.3f} {read:>8.3f} {calls:>9.4f}  "
                  f"{billing.where_units_went([x.counts['bill'] for x in runs], n)}{nothing}")
    owners = ", ".join(
        f"{mode} {med(u['owner'].counts['bill']['write'] / n for u in units[mode]):.2f} write/msg over "
        f"{med(u['owner'].wall for u in units[mode]):.1f} s" for mode in MODES)
    print(f"(takeover: the keys of an owner killed (SIGKILL) holding them, lease {OWNER_LEASE}, taken once their "
          f"leases ended; the owner itself spent {owners}: its takes and renewals)")
    every = [x.counts["bill"] for mode in MODES for u in units[mode] for x in u.values()]
    print(billing.sources(every))

