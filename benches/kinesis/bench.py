#!/usr/bin/env python3
"""The Kinesis send benchmark: `send_aws_kinesis_data_stream` to moto's Kinesis on loopback,
at the default batch settings, one `sluice run` process, with and without the lock.

Run with moto's Python (.emulators/venv/bin/python: boto3 comes with moto), from the
repository root; scripts/bench.sh kinesis builds the release binary and runs it.

One moto server serves the whole invocation; each run puts into a fresh stream (4 shards)
and reads it back (GetRecords on every shard) to check that every record arrived once. The
calls are counted by the lock benchmark's proxy (benches/lock/delay_proxy.py, with no added
delay unless --delay-ms), one in front of moto and, for the lock, one in front of a fresh
dynoxide per run. The helpers that start and stop them are benches/lock/bench.py's.

Configurations (rows), interleaved run by run so they see the same machine:
  send_stdout     the baseline: the same input through `send_stdout` to a file, no network
  kinesis         send_aws_kinesis_data_stream with its defaults (library batch count 1000,
                  capped at 500 records per PutRecords; 1,000,000 bytes), random partition
                  keys, through the counting proxy
  kinesis/direct  the same without the proxy: the proxy's own cost
  kinesis+lock    meta_kv_store_lock over DynamoDB (dynoxide; default concurrency, a fresh
                  prefix) around the same send: one PutItem per record, the commit in
                  TransactWriteItems of up to 100 once the records were accepted

Printed: per configuration the median records/s (wall time of the whole process: start,
config, reading, sending, the final commit), the range over the runs, PutRecords calls per
record and records per call, DynamoDB calls per record, the CPU per record of sluice and of
moto, and how many cores the whole machine kept busy on average (2.00 on this 2-core machine
means everything else competed too); then the send/baseline ratios.

Usage:
  benches/kinesis/bench.py [--records 20000] [--runs 3] [--delay-ms 0]
                           [--sluice target-bench/release/sluice] [--moto PATH]
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "benches", "lock"))
import bench as lock  # noqa: E402  (the lock bench's process, proxy and DynamoDB helpers)

try:
    import boto3
except ImportError:
    sys.exit("kinesis bench: boto3 is missing: run me with .emulators/venv/bin/python "
             "(scripts/bench.sh kinesis does)")

MOTO = os.path.join(ROOT, ".emulators", "venv", "bin", "moto_server")
REGION = lock.REGION
ACCOUNT = "123456789012"
SHARDS = 4
PUT_RECORDS = "Kinesis_20131202.PutRecords"
DYNAMODB = "DynamoDB_20120810."


def die(msg):
    sys.exit(f"kinesis bench: {msg}")


def start_moto(path):
    port = lock.free_port()
    proc = subprocess.Popen(
        [path, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lock.CHILDREN.append(proc)
    lock.wait_listening(port, proc, "moto", timeout=30)
    return proc, port


def kinesis_client(port):
    return boto3.client("kinesis", endpoint_url=f"http://127.0.0.1:{port}", region_name=REGION,
                        aws_access_key_id="test", aws_secret_access_key="test")


def create_stream(client, name):
    client.create_stream(StreamName=name, ShardCount=SHARDS)
    for _ in range(100):
        summary = client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        if summary["StreamStatus"] == "ACTIVE":
            return
        time.sleep(0.05)
    die(f"stream {name} not ACTIVE")


def stream_ids(client, name):
    """The `id` of every record on every shard of stream `name`."""
    ids = []
    for shard in client.list_shards(StreamName=name)["Shards"]:
        it = client.get_shard_iterator(StreamName=name, ShardId=shard["ShardId"],
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            got = client.get_records(ShardIterator=it, Limit=10000)
            if not got["Records"]:
                break
            ids.extend(json.loads(r["Data"])["id"] for r in got["Records"])
            it = got.get("NextShardIterator")
    return ids


def write_config(path, row, stream, prefix):
    send = f"sub.tf.send.aws.kinesis_data_stream({{ aws: {{ arn: '{stream}' }} }})"
    if row == "send_stdout":
        inner = "sub.tf.send.stdout()"
    elif row == "kinesis+lock":
        inner = f"""sub.tf.meta.kv_store.lock({{
      kv_store: sub.kv_store.aws.dynamodb({{
        aws: {{ arn: '{lock.TABLE}' }},
        attributes: {{ partition_key: 'PK', ttl: 'ttl' }},
      }}),
      prefix: '{prefix}',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      transforms: [{send}],
    }})"""
    else:
        inner = send
    with open(path, "w") as f:
        f.write(f"""// Generated by benches/kinesis/bench.py ({row}).
local sub = std.extVar('sub');
{{
  transforms: [
    {inner},
    sub.tf.util.drop(),
  ],
}}
""")


class Run:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def run_one(args, tmp, row, moto_proc, moto_port, client):
    n = args.records
    stream = f"sluice-bench-{row.replace('/', '-').replace('+', '-')}-{uuid.uuid4().hex[:8]}"
    arn = f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/{stream}"
    proxies = []  # (name, process, counts file)
    env = dict(os.environ)
    for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        env.pop(k, None)
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION=REGION,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    dynoxide = None
    if row != "send_stdout":
        create_stream(client, stream)
        port = moto_port
        if row != "kinesis/direct":
            counts = os.path.join(tmp, "kinesis-counts.json")
            proc, port = lock.start_proxy(moto_port, args.delay_ms, counts)
            proxies.append(("kinesis", proc, counts))
        env["AWS_ENDPOINT_URL_KINESIS"] = f"http://127.0.0.1:{port}"
    if row == "kinesis+lock":
        dynoxide, db_port = lock.start_dynoxide(args.dynoxide)
        lock.create_table(db_port)
        counts = os.path.join(tmp, "dynamodb-counts.json")
        proc, port = lock.start_proxy(db_port, args.delay_ms, counts)
        proxies.append(("dynamodb", proc, counts))
        env["AWS_ENDPOINT_URL_DYNAMODB"] = f"http://127.0.0.1:{port}"

    config = os.path.join(tmp, "config.jsonnet")
    write_config(config, row, arn, f"bench-{uuid.uuid4().hex[:10]}")
    inp = os.path.join(tmp, f"input-{n}.jsonl")
    if not os.path.exists(inp):
        lock.write_input(inp, n)
    out = os.path.join(tmp, "out.jsonl")
    moto_cpu0 = lock.cpu_s(moto_proc.pid)
    busy0 = lock.busy_s()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    timeout = 60 + n / 100
    with open(inp, "rb") as fin, open(out, "wb") as fout:
        start = time.monotonic()
        proc = subprocess.Popen([args.sluice, "run", "--config", config], stdin=fin, stdout=fout,
                                stderr=subprocess.PIPE, env=env)
        lock.CHILDREN.append(proc)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            lock.stop(proc, signal.SIGKILL)
            die(f"{row}: sluice did not finish {n} records in {timeout:.0f} s")
        wall = time.monotonic() - start
        lock.CHILDREN.remove(proc)
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    moto_cpu = lock.cpu_s(moto_proc.pid) - moto_cpu0
    busy = lock.busy_s() - busy0
    if proc.returncode != 0:
        die(f"{row}: sluice exited {proc.returncode}:\n{err.decode(errors='replace')[-4000:]}")

    calls = {}
    for name, proxy, counts_path in proxies:
        calls[name] = lock.stop_proxy(proxy, counts_path)["targets"]
    if dynoxide:
        lock.stop(dynoxide)

    if row == "send_stdout":
        with open(out, "rb") as f:
            got = [json.loads(line)["id"] for line in f]
    else:
        if os.path.getsize(out):
            die(f"{row}: sluice wrote to stdout")
        got = stream_ids(client, stream)
        client.delete_stream(StreamName=stream)  # moto keeps every record in memory
    if sorted(got) != [f"evt-{i:08d}" for i in range(n)]:
        die(f"{row}: expected each of {n} records once, got {len(got)} ({len(set(got))} distinct)")
    kinesis = calls.get("kinesis", {})
    dynamo = calls.get("dynamodb", {})
    if row == "kinesis+lock" and dynamo.get(DYNAMODB + "PutItem", 0) != n:
        print(f"warning: {row}: {dynamo.get(DYNAMODB + 'PutItem', 0)} PutItem calls for {n} records",
              file=sys.stderr)
    return Run(wall=wall, cpu=cpu, moto_cpu=moto_cpu, busy=busy,
               puts=kinesis.get(PUT_RECORDS) if "kinesis" in calls else None,
               other=sum(v for k, v in kinesis.items() if k != PUT_RECORDS) if "kinesis" in calls else None,
               dynamo=sum(dynamo.values()) if "dynamodb" in calls else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20_000, help="per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=0.0, help="added by the proxies in each direction")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target-bench", "release", "sluice"))
    ap.add_argument("--moto", default=MOTO)
    ap.add_argument("--dynoxide", default=lock.DYNOXIDE)
    args = ap.parse_args()
    for what, path, how in (("sluice binary", args.sluice, "scripts/bench.sh kinesis builds it"),
                            ("moto", args.moto, "scripts/emulators.sh install"),
                            ("dynoxide", args.dynoxide, "scripts/emulators.sh install")):
        if not os.access(path, os.X_OK):
            die(f"no {what} at {path} ({how})")
    if args.runs < 1 or args.records < 1:
        die("--runs and --records must be at least 1")

    rows = ["send_stdout", "kinesis", "kinesis/direct", "kinesis+lock"]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    results = {row: [] for row in rows}
    with tempfile.TemporaryDirectory(prefix="sluice-kinesis-bench-") as tmp:
        try:
            moto_proc, moto_port = start_moto(args.moto)
            client = kinesis_client(moto_port)
            for r in range(args.runs):
                for row in rows:  # interleaved: every row sees the same machine
                    run = run_one(args, tmp, row, moto_proc, moto_port, client)
                    results[row].append(run)
                    print(f"  run {r + 1}/{args.runs} {row:<15} {args.records:>7} records {run.wall:7.3f} s "
                          f"{args.records / run.wall:>9,.0f} records/s", file=sys.stderr, flush=True)
        finally:
            for proc in list(lock.CHILDREN):
                lock.stop(proc, signal.SIGKILL if proc.args[0] == args.sluice else signal.SIGTERM)

    n = args.records
    med = statistics.median
    print()
    print(f"send_aws_kinesis_data_stream to moto's Kinesis ({SHARDS} shards, loopback), default batch settings, "
          f"one process, {n} records of ~100 bytes, median of {args.runs} runs"
          + (f", +{args.delay_ms:g} ms each way" if args.delay_ms else ""))
    print(f"{'configuration':<15} {'records/s':>9} {'min-max':>15} {'PutRecords/rec':>14} {'recs/call':>9} "
          f"{'DynamoDB/rec':>12} {'sluice us/rec':>13} {'moto us/rec':>11} {'busy cores':>10}")
    medians = {}
    for row in rows:
        runs = results[row]
        rates = sorted(n / x.wall for x in runs)
        medians[row] = med(rates)
        puts = [x.puts for x in runs if x.puts is not None]
        calls = f"{med(p / n for p in puts):>14.4f} {med(n / p for p in puts if p):>9.0f}" if puts else f"{'-':>14} {'-':>9}"
        dynamo = [x.dynamo for x in runs if x.dynamo is not None]
        dyn = f"{med(d / n for d in dynamo):>12.3f}" if dynamo else f"{'-':>12}"
        moto = f"{med(x.moto_cpu for x in runs) / n * 1e6:>11.0f}" if row != "send_stdout" else f"{'-':>11}"
        print(f"{row:<15} {medians[row]:>9,.0f} {f'{rates[0]:,.0f}-{rates[-1]:,.0f}':>15} {calls} {dyn} "
              f"{med(x.cpu for x in runs) / n * 1e6:>13.1f} {moto} {med(x.busy / x.wall for x in runs):>10.2f}")
    others = [x.other for row in rows for x in results[row] if x.other]
    if others:
        print(f"(the proxies also saw {max(others)} other Kinesis calls in a run)")
    base = medians["send_stdout"]
    print("against send_stdout: " + ", ".join(f"{row} {medians[row] / base:.3f}x" for row in rows[1:]))
    print(f"kinesis+lock / kinesis: {medians['kinesis+lock'] / medians['kinesis']:.2f}x records/s")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
