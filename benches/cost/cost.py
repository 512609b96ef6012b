#!/usr/bin/env python3
"""What a sluice pipeline costs on AWS, per million messages and per terabyte of input.

The inputs are figures this repository measures and AWS's published prices; the output is
the tables of docs/cost.md. Nothing here is measured itself: each input names the
benchmark that measured it, and each price its source and the date it was read, so that
when either changes the tables are regenerated, not edited:

    python3 benches/cost/cost.py            # the tables, as markdown
    python3 benches/cost/cost.py --lock-w 2 --lock-r 1    # another lock cost per message
    python3 benches/cost/cost.py --check docs/cost.md     # fails when the page's tables are stale

Model (all per message, then scaled):
- Lambda: GB-seconds = CPU seconds x 1.7275 GB (Lambda gives a function one vCPU at
  1,769 MB and CPU in proportion below that, so CPU-bound work costs the same GB-seconds
  at any size up to one vCPU) + the invocation's waits on the network x its memory; the
  CPU seconds are the measured per-core rate's inverse; requests per message = 1 / batch.
- Kinesis Data Streams (provisioned): shards = the larger of bytes/s / 1 MB and
  records/s / 1,000, at the day's average rate; PUT payload units = one per record up to
  25 KB. With KPL aggregation (`enable_record_aggregation`) records are packed ~1 MB,
  and both limits are bytes.
- Firehose: $ per GB ingested, each record rounded up to 5 KB: one event per record pays
  for 5 KB; `aggregate_to_string` before the send packs them (the rounding then vanishes).
- DynamoDB (the lock): write and read units per message as measured by benches/lock
  (`--lock-w`, `--lock-r`), on-demand ($ per million request units) or provisioned
  ($ per capacity-unit hour, at a 70% utilisation target).
"""
import argparse
import contextlib
import io
import sys

# Prices: us-east-1, USD, read 2026-12-05. Sources:
# - Lambda: https://aws.amazon.com/lambda/pricing/ (x86 $0.0000166667 per GB-s, first
#   6 billion GB-s a month; Arm $0.0000133334; $0.20 per million requests), also in AWS's
#   whitepaper https://docs.aws.amazon.com/whitepapers/latest/how-aws-pricing-works/lambda.html
# - DynamoDB: https://aws.amazon.com/dynamodb/pricing/ (on-demand since 2024-11-01: $0.625
#   per million write request units, $0.125 per million read request units; provisioned
#   $0.00065 per WCU-hour, $0.00013 per RCU-hour; transactional writes 2 units per KB)
# - Kinesis Data Streams: https://aws.amazon.com/kinesis/data-streams/pricing/
#   (provisioned: $0.015 per shard-hour, $0.014 per million PUT payload units of 25 KB)
# - Data Firehose: https://aws.amazon.com/firehose/pricing/ (Direct PUT, $0.029 per GB for
#   the first 500 TB a month, each record rounded up to the next 5 KB)
PRICE = {
    "lambda_gb_s_x86": 0.0000166667,
    "lambda_gb_s_arm": 0.0000133334,
    "lambda_request": 0.20 / 1e6,
    "ddb_wru": 0.625 / 1e6,
    "ddb_rru": 0.125 / 1e6,
    "ddb_wcu_hour": 0.00065,
    "ddb_rcu_hour": 0.00013,
    "kinesis_shard_hour": 0.015,
    "kinesis_put_unit": 0.014 / 1e6,
    "firehose_gb": 0.029,
}
PROVISIONED_UTILISATION = 0.70
GB_PER_VCPU = 1769 / 1024  # Lambda's GB-seconds per CPU-second at up to one vCPU

# Workloads: bytes in and out per message, the per-core rate (each from a benchmark), where
# messages come from and go to, and how many messages share one lock key (0: no lock).
WORKLOADS = {
    # benches/zeek/bench.py (docs/performance.md): 380,000 events/s on one worker; the
    # events of gen_zeek_conn.py average 372 bytes, their ECS documents 879 (20,000 events:
    # 7,446,229 bytes in, 17,572,110 out).
    "zeek": {"label": "Zeek conn → ECS, Kinesis → Firehose, no lock", "in": 372, "out": 879,
             "rate": 380_000, "sink": "firehose", "per_lock": 0},
    # benches/lambda/bench.py (docs/performance.md): one invocation of 10,000 records of
    # 1 KB through the ten transforms of benches/lambda/config.jsonnet in 72 ms, event
    # decoding included.
    "kinesis_1k": {"label": "1 KB JSON, Kinesis → Kinesis, a lock per message", "in": 1024,
                   "out": 1024, "rate": 10_000 / 0.072, "sink": "kinesis",
                   "per_lock": 1},
    # The Zeek events again, each locked by its `uid` (exactly once into Firehose).
    "zeek_lock": {"label": "Zeek conn → ECS, Kinesis → Firehose, a lock per event", "in": 372,
                  "out": 879, "rate": 380_000, "sink": "firehose",
                  "per_lock": 1},
}

# Locks per new message and per duplicate: (write units, read units). sluice's row is
# measured by benches/lock (docs/performance.md); Substation's and Powertools' are their
# published designs: Substation's lock is one conditional PutItem (deleted only when a
# later send fails); Powertools' idempotency is a conditional put, then an update to
# COMPLETED, and a duplicate is the failed conditional put, which returns the record.
# benches/lock's capacity units (docs/performance.md, 2026-12-05): transactions 4.00 a new
# message, 2.00 a duplicate (5.90 a message when 1 in 100 is a duplicate); items 3.00 and
# 1.00 (2.98); statements 2.00 write + 1.00 read and 1.00 read (1.98 + 1.00 with 1 in 100 a
# duplicate; a debug build, 2,000 messages a phase).
LOCKS = {
    "sluice, transactions (the default)": {"new": (4.0, 0.0), "dup": (2.0, 0.0)},
    "sluice, items": {"new": (3.0, 0.0), "dup": (1.0, 0.0)},
    # One PartiQL write to take (unread once a process has seen that keys are new) and one to
    # commit; a duplicate a consistent read: benches/lock's bill, as the emulator's
    # ConsumedCapacity (kv_store_dynamodb::units_per_key_in_each_mode).
    "sluice, statements": {"new": (2.0, 0.0), "dup": (0.0, 1.0)},
    # As statements, a piece of up to 100 keys committed with one write to its epoch record:
    # the emulator's ConsumedCapacity over 1,000 keys (kv_store_dynamodb::
    # units_per_key_in_each_mode); a duplicate reads its key eventually consistent and its
    # epoch, half a unit per 100.
    "sluice, epochs": {"new": (1.01, 0.0), "dup": (0.0, 0.505)},
    "Substation (one PutItem)": {"new": (1.0, 0.0), "dup": (1.0, 0.0)},
    "Powertools idempotency": {"new": (2.0, 0.0), "dup": (1.0, 0.0)},
}
SLUICE_LOCK = "sluice, transactions (the default)"
EPOCHS_LOCK = "sluice, epochs"

def lambda_cost(w, batch, wait_s, memory_mb, arch):
    """$ per message: duration (CPU + waits) and requests."""
    cpu_s = 1.0 / w["rate"]
    gb_s = cpu_s * GB_PER_VCPU + (wait_s / batch) * memory_mb / 1024
    return gb_s * PRICE[f"lambda_gb_s_{arch}"] + PRICE["lambda_request"] / batch, gb_s


def kinesis_cost(bytes_per_msg, msgs_per_s, aggregated):
    """$ per message of one provisioned stream written at msgs_per_s, and its shards."""
    bps = bytes_per_msg * msgs_per_s
    if aggregated:
        shards = max(1, -(-bps // 1_000_000))
        put_units = bytes_per_msg / (25 * 1024)
    else:
        shards = max(1, -(-bps // 1_000_000), -(-msgs_per_s // 1000))
        put_units = max(1, -(-bytes_per_msg // (25 * 1024)))
    per_s = shards * PRICE["kinesis_shard_hour"] / 3600
    return per_s / msgs_per_s + put_units * PRICE["kinesis_put_unit"], int(shards)


def firehose_cost(bytes_per_msg, aggregated):
    billed = bytes_per_msg if aggregated else max(5 * 1024, -(-bytes_per_msg // 5120) * 5120)
    return billed / 1e9 * PRICE["firehose_gb"]


def lock_cost(units, mode):
    w, r = units
    if mode == "on-demand":
        return w * PRICE["ddb_wru"] + r * PRICE["ddb_rru"]
    # Provisioned: a unit sustains one request a second; paid by the hour at the
    # utilisation target.
    return (w * PRICE["ddb_wcu_hour"] + r * PRICE["ddb_rcu_hour"]) / 3600 / PROVISIONED_UTILISATION


def money(x):
    return f"${x:,.2f}" if x >= 0.995 else f"${x:,.3f}" if x >= 0.001 else f"${x:.5f}"


def parts(w, args, lock_units, mode):
    """$ per message, by part, at 1 TB a day, with the cheaper packing of each stream."""
    rate = 1e12 / w["in"] / 86400
    lam, gb_s = lambda_cost(w, args.batch, args.wait_ms / 1000, args.memory_mb, "x86")
    src = kinesis_cost(w["in"], rate, True)[0]
    if w["sink"] == "kinesis":
        out = kinesis_cost(w["out"], rate, True)[0]
    else:
        out = firehose_cost(w["out"], True)
    lock = lock_cost(lock_units, mode) / w["per_lock"] if w["per_lock"] else 0.0
    return {"lambda": lam, "gb_s": gb_s, "in": src, "out": out, "lock": lock}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=1000, help="Kinesis records per Lambda invocation")
    ap.add_argument("--wait-ms", type=float, default=100.0,
                    help="per invocation: the time spent waiting on sources, sends and the lock")
    ap.add_argument("--memory-mb", type=int, default=512)
    ap.add_argument("--lock-w", type=float, help="add a lock row: write units per new message")
    ap.add_argument("--lock-r", type=float, default=0.0, help="... and read units")
    ap.add_argument("--lock-dup", type=float, default=1.0, help="... and units per duplicate")
    ap.add_argument("--check", metavar="PAGE",
                    help="instead of printing, check that PAGE holds every table as printed")
    args = ap.parse_args()
    if args.check:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print_tables(args)
        page = open(args.check, encoding="utf-8").read()
        tables = [t for t in out.getvalue().split("\n\n") if t.startswith("|")]
        stale = [t.splitlines()[0] for t in tables if t.strip() not in page]
        for header in stale:
            print(f"{args.check}: this table is not as benches/cost/cost.py prints it: {header}",
                  file=sys.stderr)
        sys.exit(1 if stale else 0)
    print_tables(args)


def print_tables(args):
    locks = dict(LOCKS)
    if args.lock_w is not None:
        locks[f"sluice at {args.lock_w:g} W + {args.lock_r:g} R"] = {
            "new": (args.lock_w, args.lock_r), "dup": (args.lock_dup, 0.0)}

    print("#### The lock, per million messages\n")
    print("| lock | units a new message | on-demand | provisioned | units a duplicate | on-demand |")
    print("|---|---|---|---|---|---|")
    for name, u in locks.items():
        (w, r), (dw, dr) = u["new"], u["dup"]
        print(f"| {name} | {w:g} W + {r:g} R | {money(lock_cost(u['new'], 'on-demand') * 1e6)} "
              f"| {money(lock_cost(u['new'], 'provisioned') * 1e6)} | {dw:g} W + {dr:g} R "
              f"| {money(lock_cost(u['dup'], 'on-demand') * 1e6)} |")
    print()

    print(f"#### Per terabyte of input at 1 TB a day (Lambda: {args.memory_mb} MB x86, "
          f"Kinesis batches of {args.batch}, {args.wait_ms:g} ms of waits an invocation; "
          "Kinesis and Firehose records aggregated)\n")
    print("| workload | messages a TB | Lambda | source | sink | lock, on-demand | total "
          "| total, lock provisioned | lock `'epochs'`, on-demand | total, `'epochs'` |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in WORKLOADS.values():
        per_tb = 1e12 / w["in"]
        od = parts(w, args, locks[SLUICE_LOCK]["new"], "on-demand")
        pr = parts(w, args, locks[SLUICE_LOCK]["new"], "provisioned")
        ep = parts(w, args, locks[EPOCHS_LOCK]["new"], "on-demand")
        total = lambda p: sum(v for k, v in p.items() if k != "gb_s") * per_tb
        epochs = (f"{money(ep['lock'] * per_tb)} | **{money(total(ep))}**" if w["per_lock"]
                  else "none | as without")
        print(f"| {w['label']} | {per_tb / 1e9:.2f} billion | {money(od['lambda'] * per_tb)} "
              f"({od['gb_s'] * per_tb:,.0f} GB-s) | {money(od['in'] * per_tb)} "
              f"| {money(od['out'] * per_tb)} | {money(od['lock'] * per_tb) if w['per_lock'] else 'none'} "
              f"| **{money(total(od))}** | {money(total(pr))} | {epochs} |")
    print()

    print("#### Scale\n")
    print("| workload | TB a day | messages/s | Kinesis shards in (a record a message / aggregated) "
          "| cores of sluice | lock write units/s (default) | lock partitions (1,000 W/s each) "
          "| lock write units/s (`'epochs'`) | partitions |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in WORKLOADS.values():
        for tb in (1, 10):
            rate = tb * 1e12 / w["in"] / 86400
            shards = f"{kinesis_cost(w['in'], rate, False)[1]} / {kinesis_cost(w['in'], rate, True)[1]}"
            wps = rate * locks[SLUICE_LOCK]["new"][0] / w["per_lock"] if w["per_lock"] else 0
            lock = f"{wps:,.0f} | {-(-wps // 1000):,.0f}" if w["per_lock"] else "none | none"
            ewps = rate * locks[EPOCHS_LOCK]["new"][0] / w["per_lock"] if w["per_lock"] else 0
            lock += f" | {ewps:,.0f} | {-(-ewps // 1000):,.0f}" if w["per_lock"] else " | none | none"
            print(f"| {w['label']} | {tb} | {rate:,.0f} | {shards} | {rate / w['rate']:.2f} | {lock} |")
    print()


if __name__ == "__main__":
    main()
