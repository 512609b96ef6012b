#!/usr/bin/env python3
"""The exactly-once fault-injection campaign: whole pipelines through `sluice run` against the
local emulators while faults are injected, then every sink read back and every message counted.

    campaign.py --size small|large [--sluice target/debug/sluice] [--out DIR]
                [--pipelines kinesis,firehose,dynamodb,file] [--mixes ...] [--messages N]
                [--markdown FILE] [--seed N]

scripts/faults.sh is the documented entry point; docs/exactly-once.md ("The fault-injection
campaign") explains the model. In short, per pipeline and fault mix:

- Workload: N messages with unique ids, about 1% of them delivered twice (half of those a
  few positions later, within ~100 ms, half far later in the run), cut into batches the way
  a Kinesis + Lambda source hands them over. A batch is a `sluice run` over a file; it is
  done when the process exits 0. A failed or killed run is redelivered whole (the
  un-checkpointed batch again); a few finished batches are redelivered anyway (a retry after
  a lost acknowledgement).
- Faults: proxy.py in front of dynoxide (the lock store, and the DynamoDB sink) and of moto
  (Kinesis, Firehose) injects throttling, 5xx, timeouts and partial record failures before
  forwarding, and 5xx and timeouts after forwarding (ambiguous outcomes); runs are SIGKILLed
  at random points with a short lease so takeovers happen; two workers run over overlapping
  input at the same time.
- Read back: GetRecords (Kinesis), the Firehose bucket (S3), the DynamoDB sink's applied
  transactions (the proxy's log: a put by key leaves no trace of a second write in the
  table) checked against a Scan, and the files; plus the final lock table.
- Verdict per message id: delivered once, more than once, or lost. Every extra copy must be
  attributed: to a crash (the copy came from a run that was killed and never committed the
  key: the window between the sink's acceptance and the lock's commit), to an ambiguous sink
  outcome (a fault injected after forwarding a call that carried the id), or to a lease
  taken over from a live process (the lock's own warning names the key). The run fails on
  any loss, any duplicate in the transactional DynamoDB sink, any unattributed duplicate, a
  lock left pending, or a batch that never succeeds.

Everything a run did is kept under --out: configs, batches, each process's stderr, the proxy
logs, results.json.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REGION, ACCOUNT = "us-east-1", "123456789012"
AFTER_FAULTS = ("error_after", "timeout_after")

# Fault rates per call. The lock store sees one PutItem per message and a few transactions
# per batch; a sink sees one call per up to 500 records, hence the higher sink rates.
LOCK_FAULTS = {
    "acquire": {"throttle": 0.01, "error_before": 0.004, "error_after": 0.004,
                "timeout_before": 0.00005, "timeout_after": 0.00005},
    "commit": {"throttle": 0.03, "error_before": 0.02, "error_after": 0.02,
               "timeout_before": 0.003, "timeout_after": 0.003},
    "release": {"throttle": 0.05, "error_before": 0.03, "error_after": 0.03,
                "timeout_after": 0.01},
}
SINK_FAULTS = {
    "sink": {"throttle": 0.04, "error_before": 0.02, "error_after": 0.03,
             "timeout_before": 0.005, "timeout_after": 0.005, "partial": 0.08,
             "outage": 0.05},
}

# Fault mixes: what is injected, whether runs are killed, and how many workers.
MIXES = {
    "sink": {"faults": SINK_FAULTS, "kill": 0.0, "workers": 1},
    "lock": {"faults": LOCK_FAULTS, "kill": 0.0, "workers": 1},
    "crash": {"faults": {}, "kill": 0.4, "workers": 1},
    "all": {"faults": {**SINK_FAULTS, **LOCK_FAULTS}, "kill": 0.4, "workers": 2},
    # The negative control: the same pipeline without the lock, under crashes and
    # redeliveries. It must break the invariant (unattributed duplicates): if it does not,
    # the harness cannot see what it claims to measure, and the campaign fails.
    "nolock": {"faults": {}, "kill": 0.4, "workers": 1, "control": True},
}

SIZES = {
    # CI: a few thousand messages over all pipelines, dozens of crashes, under 3 minutes.
    "small": {"messages": 1000, "batch": 50, "mixes": ["all"], "redeliver": 0.05,
              "control": "file"},
    # docs/exactly-once.md's table: >= 100,000 messages and >= 200 crashes.
    "large": {"messages": 25000, "batch": 250, "mixes": ["sink", "lock", "crash", "all"],
              "control": "file",
              "redeliver": 0.03},
}

PIPELINES = ["kinesis", "firehose", "dynamodb", "file"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start (exit {proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on port {port} within {timeout} s")


class Emulators:
    """dynoxide and moto on free loopback ports, stopped at exit."""

    def __init__(self, out):
        self.procs = []
        emu = ROOT / ".emulators"
        dynoxide = emu / "node_modules/@dynoxide/linux-x64/dynoxide"
        moto = emu / "venv/bin/moto_server"
        for b in (dynoxide, moto):
            if not b.exists():
                sys.exit(f"{b} is missing: run scripts/emulators.sh install")
        self.ddb_port, self.moto_port = free_port(), free_port()
        self._start([str(dynoxide), "--host", "127.0.0.1", "--port", str(self.ddb_port)],
                    self.ddb_port, "dynoxide", out / "dynoxide.log")
        self._start([str(moto), "-H", "127.0.0.1", "-p", str(self.moto_port)],
                    self.moto_port, "moto", out / "moto.log")
        self.ddb = f"http://127.0.0.1:{self.ddb_port}"
        self.moto = f"http://127.0.0.1:{self.moto_port}"

    def _start(self, cmd, port, what, log):
        p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        wait_port(port, p, what)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def client(service, endpoint):
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 10, "mode": "standard"}))


LIVE_PROXIES = []


class Proxy:
    """proxy.py in a process of its own (the GIL would slow the driver and it)."""

    def __init__(self, upstream, faults, seed, workdir, name):
        self.log = workdir / f"proxy-{name}.jsonl"
        fpath = workdir / f"faults-{name}.json"
        fpath.write_text(json.dumps({**faults, "seed": seed, "hold_s": 5.2}))
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "proxy.py"), "--upstream", upstream,
             "--faults", str(fpath), "--log", str(self.log)],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening"):
            sys.exit(f"proxy {name} did not start: {line!r}")
        self.url = "http://" + line.split()[1]
        LIVE_PROXIES.append(self)

    def stop(self):
        if self in LIVE_PROXIES:
            LIVE_PROXIES.remove(self)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def entries(self):
        out, summary = [], {}
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                e = json.loads(line)
                if "summary" in e:
                    summary = e["summary"]
                else:
                    out.append(e)
        return out, summary


# ---------------------------------------------------------------------------- workload

def workload(n, batch, seed, tag):
    """The deliveries (message dicts) cut into batches, and the set of ids.

    About 1% of the ids are delivered twice: half a few positions later (near, well within
    100 ms at the rates these runs reach), half far later in the run (minutes later in a
    large run)."""
    rng = random.Random(seed)
    msgs = [{"id": f"{tag}-{i:07d}", "user": f"u{rng.randrange(50)}", "seq": i,
             "pad": "x" * rng.randrange(20, 200)} for i in range(n)]
    deliveries = list(msgs)
    dups = rng.sample(range(n), max(2, n // 100))
    # Insert from the back so earlier positions stay valid.
    plan = []
    for k, i in enumerate(dups):
        if k % 2 == 0:
            at = min(len(deliveries), i + 1 + rng.randrange(5))
        else:
            at = min(len(deliveries), i + n // 3 + rng.randrange(max(1, n // 3)))
        plan.append((at, i))
    for at, i in sorted(plan, reverse=True):
        deliveries.insert(at, dict(msgs[i]))
    batches = [deliveries[i:i + batch] for i in range(0, len(deliveries), batch)]
    return batches, {m["id"] for m in msgs}, len(dups)


# ---------------------------------------------------------------------------- pipelines

def lock_store(p, res):
    if p == "file":
        return f"sub.kv_store.sqlite({{ file: '{res['dir']}/locks.sqlite' }})"
    return ("sub.kv_store.aws.dynamodb({ aws: { arn: 'arn:aws:dynamodb:%s:%s:table/%s' }, "
            "attributes: { partition_key: 'PK', ttl: 'ttl' } })" % (REGION, ACCOUNT, res["locks"]))


def sink(p, res):
    if p == "kinesis":
        return ("sub.tf.send.aws.kinesis_data_stream({ aws: { arn: 'arn:aws:kinesis:%s:%s:stream/%s' }, "
                "object: { partition_key: 'user' } })" % (REGION, ACCOUNT, res["stream"]))
    if p == "firehose":
        return ("sub.tf.send.aws.data_firehose({ aws: { arn: 'arn:aws:firehose:%s:%s:deliverystream/%s' }, "
                "aux_tforms: [sub.tf.str.append({ suffix: '\\n' })] })" % (REGION, ACCOUNT, res["delivery"]))
    if p == "dynamodb":
        return ("sub.tf.obj.copy({ obj: { src: 'id', trg: 'event_id' } }),\n"
                "        sub.tf.send.aws.dynamodb.put({ aws: { arn: 'arn:aws:dynamodb:%s:%s:table/%s' }, "
                "transactional: true })" % (REGION, ACCOUNT, res["events"]))
    return ("sub.tf.send.file({ file_path: { prefix: '%s/out/' + run, uuid: true, suffix: '.jsonl' }, "
            "separator: '\\n' })" % res["dir"])


def config(p, res, lease, lock=True):
    if not lock:
        return f"""// Generated by tests/faults/campaign.py: the {p} sink without the lock (control).
local sub = std.extVar('sub');
local run = std.extVar('run');
{{
  transforms: [
    sub.tf.obj.insert({{ obj: {{ trg: 'run' }}, value: run }}),
    {sink(p, res)},
  ],
}}
"""
    return f"""// Generated by tests/faults/campaign.py: lock + {p} sink.
local sub = std.extVar('sub');
local run = std.extVar('run');
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: {lock_store(p, res)},
      prefix: 'fi',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},
      duplicates: 'drop',
      lease: '{lease}',
      pending_wait: '20s',
      transforms: [
        // Which process delivered this copy: attributes duplicates exactly.
        sub.tf.obj.insert({{ obj: {{ trg: 'run' }}, value: run }}),
        {sink(p, res)},
      ],
    }}),
  ],
}}
"""


def create_resources(p, tag, emu, workdir):
    res = {"dir": str(workdir), "locks": f"locks-{tag}"}
    if p != "file":
        ddb = client("dynamodb", emu.ddb)
        ddb.create_table(TableName=res["locks"], BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}])
    if p == "dynamodb":
        res["events"] = f"events-{tag}"
        client("dynamodb", emu.ddb).create_table(
            TableName=res["events"], BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "event_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "event_id", "KeyType": "HASH"}])
    if p == "kinesis":
        res["stream"] = f"out-{tag}"
        k = client("kinesis", emu.moto)
        k.create_stream(StreamName=res["stream"], ShardCount=2)
        for _ in range(100):
            s = k.describe_stream_summary(StreamName=res["stream"])
            if s["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
                break
            time.sleep(0.1)
    if p == "firehose":
        res["delivery"] = res["bucket"] = f"fh-{tag}"
        client("s3", emu.moto).create_bucket(Bucket=res["bucket"])
        client("firehose", emu.moto).create_delivery_stream(
            DeliveryStreamName=res["delivery"], DeliveryStreamType="DirectPut",
            ExtendedS3DestinationConfiguration={
                "RoleARN": f"arn:aws:iam::{ACCOUNT}:role/firehose",
                "BucketARN": "arn:aws:s3:::" + res["bucket"],
                "CompressionFormat": "UNCOMPRESSED"})
    return res


# ---------------------------------------------------------------------------- read back

def copies_of(p, res, emu, sink_log):
    """Every delivered copy in the sink: a list of (id, run)."""
    out = []
    if p == "kinesis":
        k = client("kinesis", emu.moto)
        for shard in k.list_shards(StreamName=res["stream"])["Shards"]:
            it = k.get_shard_iterator(StreamName=res["stream"], ShardId=shard["ShardId"],
                                      ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            while it:
                r = k.get_records(ShardIterator=it, Limit=10000)
                for rec in r["Records"]:
                    m = json.loads(rec["Data"])
                    out.append((m["id"], m.get("run")))
                if not r["Records"]:
                    break
                it = r.get("NextShardIterator")
    elif p == "firehose":
        s3 = client("s3", emu.moto)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=res["bucket"]):
            for o in page.get("Contents", []):
                body = s3.get_object(Bucket=res["bucket"], Key=o["Key"])["Body"].read()
                for line in body.decode().splitlines():
                    if line.strip():
                        m = json.loads(line)
                        out.append((m["id"], m.get("run")))
    elif p == "dynamodb":
        # Applied transactions: a second put of the same key would overwrite the item.
        for e in sink_log:
            if e.get("class") == "sink" and e.get("applied") and not e.get("replay"):
                out.extend((i, e.get("app")) for i in e.get("ids", []))
        ddb = client("dynamodb", emu.ddb)
        in_table = set()
        for page in ddb.get_paginator("scan").paginate(TableName=res["events"]):
            in_table.update(i["event_id"]["S"] for i in page["Items"])
        logged = {i for i, _ in out}
        if in_table != logged:
            raise AssertionError(
                f"the table and the proxy's applied writes disagree: {len(in_table - logged)} "
                f"items not logged, {len(logged - in_table)} logged ids not in the table")
    else:
        for f in sorted((Path(res["dir"]) / "out").rglob("*.jsonl")):
            for line in f.read_text().splitlines():
                if line.strip():
                    m = json.loads(line)
                    out.append((m["id"], m.get("run")))
    return out


def final_locks(p, res, emu):
    """{key: (status, owner)} of the lock table at the end."""
    locks = {}
    if p == "file":
        db = Path(res["dir"]) / "locks.sqlite"
        if not db.exists():  # the control runs without the lock
            return locks
        c = sqlite3.connect(db)
        for key, owner, committed in c.execute("SELECT key, owner, committed FROM sluice_locks"):
            locks[key] = ("committed" if committed else "pending", owner)
        c.close()
        return locks
    ddb = client("dynamodb", emu.ddb)
    for page in ddb.get_paginator("scan").paginate(TableName=res["locks"]):
        for i in page["Items"]:
            locks[i["PK"]["S"]] = (i.get("lock_status", {}).get("S"), i.get("lock_owner", {}).get("S"))
    return locks


# ---------------------------------------------------------------------------- runs

class Runner:
    """Drives one worker's batches through `sluice run`, killing and redelivering."""

    def __init__(self, ctx, worker, batches):
        self.ctx, self.worker, self.batches = ctx, worker, batches

    def run(self):
        try:
            self._run()
        except Exception as e:  # a broken harness must fail the run, not hide in a thread
            self.ctx.fail(f"worker {self.worker}: {type(e).__name__}: {e}")

    def _run(self):
        ctx = self.ctx
        for b, path in self.batches:
            attempt = 0
            redelivered = False
            while True:
                attempt += 1
                if attempt > ctx.max_attempts:
                    ctx.fail(f"worker {self.worker} batch {b}: no success in {ctx.max_attempts} attempts")
                    return
                r = ctx.attempt(self.worker, b, attempt, path)
                if r["outcome"] != "ok":
                    continue
                if not redelivered and ctx.rng_draw() < ctx.redeliver:
                    redelivered = True  # the source did not get the acknowledgement
                    with ctx.lock:
                        ctx.redelivered_ok += 1
                    continue
                break


class Context:
    def __init__(self, args, p, mix, tag, workdir, env, lease):
        self.args, self.p, self.mix, self.tag, self.workdir = args, p, mix, tag, workdir
        self.env, self.lease = env, lease
        self.kill = MIXES[mix]["kill"]
        self.redeliver = SIZES[args.size]["redeliver"]
        self.max_attempts = 60
        self.rng = random.Random(f"{args.seed}/{p}/{mix}")  # str seeds are stable
        self.lock = threading.Lock()
        self.runs = []
        self.durations = []
        self.errors = []
        self.counter = 0
        self.redelivered_ok = 0

    def rng_draw(self):
        with self.lock:
            return self.rng.random()

    def fail(self, why):
        with self.lock:
            self.errors.append(why)

    def attempt(self, worker, b, attempt, path):
        with self.lock:
            self.counter += 1
            run_id = f"r{self.counter:05d}w{worker}b{b}a{attempt}"
            typical = statistics.median(self.durations[-50:]) if self.durations else 1.0
            kill_at = self.rng.uniform(0.002, typical) if self.rng.random() < self.kill else None
        err = self.workdir / "stderr" / f"{run_id}.txt"
        env = dict(self.env, AWS_SDK_UA_APP_ID=run_id)
        start = time.time()
        with open(path) as stdin, open(err, "w") as stderr:
            proc = subprocess.Popen(
                [self.args.sluice, "run", "-c", str(self.workdir / "config.jsonnet"),
                 "--ext-str", f"run={run_id}"],
                stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=self.workdir)
            killed = hung = False
            try:
                proc.wait(timeout=kill_at if kill_at is not None else 300)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed, hung = kill_at is not None, kill_at is None
        if hung:
            self.fail(f"{run_id} did not finish within 300 s")
        end = time.time()
        code = proc.returncode
        outcome = "killed" if killed else ("ok" if code == 0 else "failed")
        r = {"run": run_id, "pid": proc.pid, "worker": worker, "batch": b, "attempt": attempt,
             "start": start, "end": end, "outcome": outcome, "code": code}
        with self.lock:
            self.runs.append(r)
            if outcome == "ok":
                self.durations.append(end - start)
        return r


def lease_takeovers(workdir, run_id):
    """Keys this run's lock reported as taken over by another owner before it committed."""
    text = (workdir / "stderr" / f"{run_id}.txt").read_text(errors="replace")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours, should a build still add them
    keys = []
    for line in text.splitlines():
        if "taken over after its lease ran out" in line and "key=" in line:
            keys.append(line.split("key=", 1)[1].split()[0].strip('"'))
    return keys


def analyse(ctx, res, emu, ids, proxies):
    p, workdir = ctx.p, ctx.workdir
    sink_log, fault_counts = [], Counter()
    for px in proxies:
        entries, summary = px.entries()
        sink_log.extend(entries)
        for k, v in summary.items():
            if not k.endswith(":None"):
                fault_counts[k] += v
    copies = copies_of(p, res, emu, [e for e in sink_log if e.get("class") == "sink"])
    locks = final_locks(p, res, emu)
    runs = {r["run"]: r for r in ctx.runs}
    killed = {r["run"] for r in ctx.runs if r["outcome"] == "killed"}
    by_pid = defaultdict(list)
    for r in ctx.runs:
        by_pid[r["pid"]].append(r["run"])
    # After-forwarding faults on sink calls, per (id, run).
    ambiguous = Counter()
    for e in sink_log:
        if e.get("class") == "sink" and e.get("fault") in AFTER_FAULTS and e.get("applied"):
            for i in e.get("ids", []):
                ambiguous[(i, e.get("app"))] += 1  # app None: a caller without app/ in its UA
    takeovers = set()
    for run_id in runs:
        for key in lease_takeovers(workdir, run_id):
            takeovers.add((key, run_id))

    per_id = defaultdict(list)
    for i, run in copies:
        per_id[i].append(run)
    stray = set(per_id) - ids
    dup = Counter()
    unexplained = []
    for i in ids:
        runs_of = per_id.get(i, [])
        if len(runs_of) <= 1:
            continue
        key = f"fi:{i}"
        status, owner = locks.get(key, (None, None))
        committer = None
        if owner:
            pid = int(owner.split("/")[1])
            candidates = [r for r in by_pid.get(pid, []) if r in runs_of]
            committer = candidates[-1] if candidates else None
        if committer is None:
            committer = runs_of[-1]
        n = Counter(runs_of)
        for run, count in n.items():
            extra = count - 1 if run == committer else count
            # The first copy from a run that is not the committer.
            if run != committer:
                if run in killed:
                    dup["crash"] += 1
                    extra -= 1
                elif (key, run) in takeovers:
                    dup["lease"] += 1
                    extra -= 1
            # The rest: each needs an ambiguous sink outcome that carried the id.
            amb = ambiguous[(i, run)] + ambiguous[(i, None)]
            explained = min(extra, amb)
            dup["ambiguous"] += explained
            if extra > explained:
                dup["unattributed"] += extra - explained
                unexplained.append({"id": i, "copies": runs_of, "committer": committer,
                                    "killed": sorted(set(runs_of) & killed)})
    lost = sorted(ids - set(per_id))
    # Records the emulator acknowledged (the proxy saw a success for them) but does not hold:
    # a defect of the emulator, reported apart from sluice's losses.
    acknowledged = set()
    for e in sink_log:
        if e.get("class") == "sink" and e.get("applied") and not e.get("replay"):
            acknowledged.update(set(e.get("ids", [])) - set(e.get("refused", [])))
    dropped = sorted(acknowledged - set(per_id))
    pending = sorted(k for k, (s, _) in locks.items() if s != "committed")
    outcomes = Counter(r["outcome"] for r in ctx.runs)
    row = {
        "pipeline": p, "mix": ctx.mix, "messages": len(ids),
        "deliveries": ctx.deliveries, "copies": len(copies),
        "once": sum(1 for i in ids if len(per_id.get(i, [])) == 1),
        "duplicates": sum(dup.values()), "dup_crash": dup["crash"],
        "dup_ambiguous": dup["ambiguous"], "dup_lease": dup["lease"],
        "dup_unattributed": dup["unattributed"], "lost": len(lost),
        "runs": len(ctx.runs), "crashes": outcomes["killed"], "failed_runs": outcomes["failed"],
        "redelivered_ok": ctx.redelivered_ok,
        "faults": sum(fault_counts.values()), "fault_counts": dict(fault_counts),
        "pending_locks": len(pending), "workers": MIXES[ctx.mix]["workers"],
        "elapsed_s": round(ctx.elapsed, 1), "errors": list(ctx.errors),
    }
    problems = list(ctx.errors)
    if dropped:
        problems.append(f"the emulator acknowledged {len(dropped)} records it does not hold "
                        f"(an emulator defect, not a loss by sluice), e.g. {dropped[:5]}")
    if lost:
        problems.append(f"{len(lost)} messages lost, e.g. {lost[:5]}")
    if p == "dynamodb" and row["duplicates"]:
        problems.append(f"{row['duplicates']} duplicates in the transactional DynamoDB sink")
    if dup["unattributed"]:
        problems.append(f"{dup['unattributed']} unattributed duplicates, e.g. {unexplained[:3]}")
    if pending:
        problems.append(f"{len(pending)} locks left pending, e.g. {pending[:5]}")
    if stray:
        problems.append(f"{len(stray)} ids in the sink that were never sent")
    row["problems"] = problems
    (workdir / "unexplained.json").write_text(json.dumps(unexplained, indent=1))
    return row


def run_one(args, emu, p, mix, seed):
    tag = f"{p[:2]}{mix[:2]}{seed % 100000:05d}"
    workdir = Path(args.out) / f"{p}-{mix}"
    if workdir.exists():
        shutil.rmtree(workdir)
    (workdir / "stderr").mkdir(parents=True)
    (workdir / "batches").mkdir()
    size = SIZES[args.size]
    n = args.messages or size["messages"]
    spec = MIXES[mix]
    lease = "1s" if spec["kill"] else "30s"
    res = create_resources(p, tag, emu, workdir)
    proxies = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION=REGION,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    env.pop("SLUICE_LOG", None)  # the default: warnings (the lock's takeover warning)
    if p != "file":
        ddb = Proxy(emu.ddb, {k: v for k, v in spec["faults"].items()
                              if k != "sink" or p == "dynamodb"}, seed, workdir, "dynamodb")
        proxies.append(ddb)
        env["AWS_ENDPOINT_URL_DYNAMODB"] = ddb.url
    if p in ("kinesis", "firehose"):
        mp = Proxy(emu.moto, {k: v for k, v in spec["faults"].items() if k == "sink"},
                   seed + 1, workdir, "moto")
        proxies.append(mp)
        env["AWS_ENDPOINT_URL_KINESIS"] = env["AWS_ENDPOINT_URL_FIREHOSE"] = mp.url
    (workdir / "config.jsonnet").write_text(config(p, res, lease, not spec.get("control")))
    batches, ids, dups = workload(n, size["batch"], seed, tag)
    paths = []
    for b, batch in enumerate(batches):
        path = workdir / "batches" / f"b{b:05d}.jsonl"
        path.write_text("".join(json.dumps(m) + "\n" for m in batch))
        paths.append((b, path))
    ctx = Context(args, p, mix, tag, workdir, env, lease)
    # Two workers: each takes 60% of the batches, the middle 20% in both; the second goes
    # backwards, so they reach the shared batches at about the same time and cross there.
    if spec["workers"] == 2:
        cut_a, cut_b = int(len(paths) * 0.6), int(len(paths) * 0.4)
        plans = [paths[:cut_a], list(reversed(paths[cut_b:]))]
    else:
        plans = [paths]
    ctx.deliveries = sum(len(batches[b]) for plan in plans for b, _ in plan)
    start = time.time()
    threads = [threading.Thread(target=Runner(ctx, w, plan).run) for w, plan in enumerate(plans)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx.elapsed = time.time() - start
    for px in proxies:
        px.stop()
    row = analyse(ctx, res, emu, ids, proxies)
    row["dup_deliveries_in_input"] = dups
    (workdir / "runs.json").write_text(json.dumps(ctx.runs, indent=0))
    return row


COLUMNS = [("pipeline", "pipeline"), ("mix", "faults"), ("workers", "workers"),
           ("messages", "messages"), ("deliveries", "deliveries"), ("copies", "in sink"),
           ("duplicates", "duplicates"), ("dup_crash", "crash window"),
           ("dup_ambiguous", "ambiguous"), ("dup_lease", "lease expired"),
           ("dup_unattributed", "unattributed"), ("lost", "losses"), ("runs", "runs"),
           ("crashes", "crashes"), ("failed_runs", "failed runs"),
           ("redelivered_ok", "redelivered ok"), ("faults", "faults injected"),
           ("elapsed_s", "elapsed s")]


def table(rows):
    head = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in COLUMNS) + "|"
    lines = [head, sep]
    for r in rows:
        cells = [str(r[k]) for k, _ in COLUMNS]
        if r.get("control"):
            cells[1] = "none, no lock (control)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--sluice", default=str(ROOT / "target/debug/sluice"))
    ap.add_argument("--out", default=str(ROOT / "target/faults"))
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    ap.add_argument("--mixes", default=None, help="comma-separated: " + ",".join(MIXES))
    ap.add_argument("--messages", type=int, default=None)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    ap.add_argument("--no-control", action="store_true",
                    help="skip the negative control (a pipeline without the lock)")
    args = ap.parse_args()
    args.sluice = str(Path(args.sluice).resolve())
    args.out = str(Path(args.out).resolve())
    if not Path(args.sluice).exists():
        sys.exit(f"{args.sluice} does not exist: cargo build --bin sluice first")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mixes = (args.mixes or ",".join(SIZES[args.size]["mixes"])).split(",")
    pipelines = args.pipelines.split(",")
    for m in mixes:
        if m not in MIXES:
            sys.exit(f"unknown mix {m!r}: one of {', '.join(MIXES)}")
    for p in pipelines:
        if p not in PIPELINES:
            sys.exit(f"unknown pipeline {p!r}: one of {', '.join(PIPELINES)}")
    print(f"fault campaign: size {args.size}, seed {args.seed}, sluice {args.sluice}, out {out}",
          flush=True)
    # Stopped from outside: clean up (the finally below) instead of leaving emulators.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    emu = Emulators(out)
    rows = []
    started = time.time()
    try:
        for p in pipelines:
            for m in mixes:
                row = run_one(args, emu, p, m, args.seed + len(rows))
                rows.append(row)
                status = "ok" if not row["problems"] else "FAILED: " + "; ".join(row["problems"])
                print(f"{p:9} {m:6} messages {row['messages']} copies {row['copies']} "
                      f"dups {row['duplicates']} (crash {row['dup_crash']}, ambiguous "
                      f"{row['dup_ambiguous']}, lease {row['dup_lease']}, unattributed "
                      f"{row['dup_unattributed']}) lost {row['lost']} crashes {row['crashes']} "
                      f"retries {row['failed_runs']} faults {row['faults']} "
                      f"{row['elapsed_s']} s: {status}", flush=True)
        control = SIZES[args.size].get("control")
        if control and not args.no_control:
            row = run_one(args, emu, control, "nolock", args.seed + len(rows))
            row["control"] = True
            rows.append(row)
            status = ("ok: the harness saw the duplicates"
                      if row["dup_unattributed"] and not row["errors"]
                      else "FAILED: the control without the lock showed no unattributed duplicate")
            print(f"control   {control} without the lock: {row['duplicates']} duplicates, "
                  f"{row['dup_unattributed']} unattributed, {row['crashes']} crashes: {status}",
                  flush=True)
    finally:
        for px in list(LIVE_PROXIES):
            px.stop()
        emu.stop()
    total = round(time.time() - started, 1)
    md = table(rows)
    print("\n" + md)
    print(f"\ntotal: {sum(r['messages'] for r in rows)} messages, "
          f"{sum(r['crashes'] for r in rows)} crashes, {total} s")
    (out / "results.json").write_text(json.dumps({"seed": args.seed, "size": args.size,
                                                  "sluice": args.sluice, "rows": rows,
                                                  "elapsed_s": total}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(md + "\n")
    def broken(r):
        if r.get("control"):  # it must show duplicates the lock would have prevented
            return not (r["dup_unattributed"] > 0 and not r["errors"])
        return bool(r["problems"])

    failed = [r for r in rows if broken(r)]
    if failed:
        print(f"\n{len(failed)} run(s) broke the invariant; details in {out}/*/", file=sys.stderr)
        return 1
    print("invariant held: no losses, no duplicates in the transactional sink, "
          "every duplicate attributed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
