#!/usr/bin/env python3
"""The exactly-once fault-injection campaign: whole pipelines through `sluice run` against the
local emulators while faults are injected, then every sink read back and every message counted.

    campaign.py --size small|large [--sluice target/debug/sluice] [--out DIR]
                [--pipelines kinesis,kinesis_after,firehose,dynamodb,file,file_after,gcs,hop]
                [--mixes clean,sink,lock,outage,crash,retry,idle,all] [--messages N]
                [--markdown FILE] [--seed N] [--no-control]

scripts/faults.sh is the documented entry point; docs/exactly-once.md ("The fault-injection
campaign") explains the model. In short, per pipeline and fault mix (a "cell"):

- Workload: N messages with unique ids (`uid`), keyed by `id` for the lock: most ids are the
  uid; four are typed (`1`, `"1"`, `true`, `"true"`, four distinct keys) and, when the binary
  reports undelivered lines, three have no key (`""`, `null`, missing). About 1% are
  delivered twice (a few positions later, or far later in the run). The deliveries are cut
  into batches as a Kinesis event source mapping (ESM) hands them to Lambda; a batch is a
  `sluice run` over a file, done when the process exits 0.
- Source model: a killed run is redelivered from where the batch stood (nothing was
  checkpointed); a failed run is redelivered from its first undelivered line
  (`sluice run --undelivered FILE`, the ESM's batchItemFailures); after K failed attempts
  whose first undelivered line is the same record, that record goes to a dead-letter list
  (the ESM's on-failure destination) and the batch goes on after it; a few finished
  batches are redelivered anyway (a lost acknowledgement).
- Faults: proxy.py in front of dynoxide (the lock store, and the DynamoDB sink), of moto
  (Kinesis, Firehose) and of the Cloud Storage emulator (send_gcp_storage) injects throttling, 5xx, timeouts and partial record failures before
  forwarding, 5xx and timeouts after forwarding (ambiguous outcomes), and outage windows
  (every lock-store call of a class fails for 1-8 s, from every process); runs are SIGKILLed
  at random points; two workers run over overlapping input; in-process retries
  (`meta_retry` around the lock); a second worker gets a batch while the first holds it
  alive on idle input.
- Read back: GetRecords (Kinesis), the Firehose bucket (S3), the DynamoDB sink's applied
  transactions (the proxy's log) checked against a Scan, the Cloud Storage bucket's objects,
  and the files; the lock table.
- Verdict per message: delivered once, more than once, lost, or rejected (no key: it must
  end in the dead-letter list). See docs/exactly-once.md for what fails a cell.

Everything a cell did is kept under --out/PIPELINE-MIX/: configs, batches, each process's
stderr and undelivered report, the proxy logs, runs.json, dead-letter.json, unexplained.json;
--out/results.json holds every row.
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
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
REGION, ACCOUNT = "us-east-1", "123456789012"
AFTER_FAULTS = ("error_after", "timeout_after")
PREFIX = "fi"

# Fault rates per call. The lock store sees one acquisition per message and a few
# transactions per batch; a sink sees one call per up to 500 records, hence the higher sink
# rates. Renewals never time out here: a renewal held past the lease would let another
# worker take over a live process's keys, which only a lease longer than the stall cures
# (the `outage` mix, with its long lease, covers the renewals).
LOCK_FAULTS = {
    "acquire": {"throttle": 0.01, "error_before": 0.004, "error_after": 0.004,
                "timeout_before": 0.00005, "timeout_after": 0.00005},
    "commit": {"throttle": 0.03, "error_before": 0.02, "error_after": 0.02,
               "timeout_before": 0.003, "timeout_after": 0.003},
    "renew": {"throttle": 0.03, "error_before": 0.02, "error_after": 0.02},
    "abandon": {"throttle": 0.03, "error_before": 0.02, "error_after": 0.02,
                "timeout_after": 0.005},
    "release": {"throttle": 0.05, "error_before": 0.03, "error_after": 0.03,
                "timeout_after": 0.01},
}
SINK_FAULTS = {
    "sink": {"throttle": 0.04, "error_before": 0.02, "error_after": 0.03,
             "timeout_before": 0.005, "timeout_after": 0.005, "partial": 0.08,
             "outage": 0.05},
    # Reading a stream back (before a record is sent again) fails too: it must never be
    # taken for "not there".
    "read": {"throttle": 0.03, "error_before": 0.02, "error_after": 0.01,
             "timeout_before": 0.003},
}
# Lock-store outage windows: every call of a class, from every process, fails for 1-8 s.
# Acquire, commit and release (a short lease survives them: renewals still go through).
STORE_WINDOWS = {"classes": ["acquire", "commit", "release"], "first_s": [0.3, 2.0],
                 "gap_s": [2.0, 10.0], "length_s": [1.0, 8.0]}
# Every class, and the whole store at once ("*"); the lease (12 s) outlasts the longest.
ALL_STORE_WINDOWS = {"classes": ["acquire", "commit", "release", "renew", "abandon", "*"],
                     "first_s": [0.3, 2.0], "gap_s": [2.0, 10.0], "length_s": [1.0, 8.0]}

# Fault mixes: what is injected, whether runs are killed, how many workers, the lock's lease.
MIXES = {
    # No faults: the lock-store calls per message (acquisitions, commits) are counted.
    "clean": {"faults": {}, "kill": 0.0, "workers": 1, "lease": "30s", "redeliver": False},
    "sink": {"faults": SINK_FAULTS, "kill": 0.0, "workers": 1, "lease": "30s"},
    "lock": {"faults": LOCK_FAULTS, "kill": 0.0, "workers": 1, "lease": "30s"},
    "outage": {"faults": {"windows": ALL_STORE_WINDOWS}, "kill": 0.0, "workers": 2,
               "lease": "12s"},
    "crash": {"faults": {}, "kill": 0.4, "workers": 1, "lease": "1s"},
    # The lock inside meta_retry: failures are retried in the same process.
    # (Without the per-process sink outages: every in-process retry of such a run fails
    # again, which only costs time.)
    "retry": {"faults": {"sink": {k: v for k, v in SINK_FAULTS["sink"].items() if k != "outage"},
                         "read": SINK_FAULTS["read"], **LOCK_FAULTS, "windows": STORE_WINDOWS},
              "kill": 0.2, "workers": 2, "lease": "3s", "retry": True},
    # A second live worker on idle input: worker A holds a batch with its input open and
    # idle for longer than the lease, worker B gets the same batch meanwhile.
    "idle": {"faults": {}, "kill": 0.0, "workers": 1, "lease": "2s", "idle": True},
    "all": {"faults": {**SINK_FAULTS, **LOCK_FAULTS, "windows": STORE_WINDOWS}, "kill": 0.4,
            "workers": 2, "lease": "3s"},
    # The negative control: the file pipeline without the lock, under crashes and
    # redeliveries. It must break the invariant (unattributed duplicates): if it does not,
    # the harness cannot see what it claims to measure, and the campaign fails.
    "nolock": {"faults": {}, "kill": 0.4, "workers": 1, "lease": "1s", "control": True},
}
MIX_ORDER = ["clean", "sink", "lock", "outage", "crash", "retry", "idle", "all"]

PIPELINES = ["kinesis", "kinesis_after", "firehose", "dynamodb", "file", "file_after", "gcs",
             "hop"]
# Pipelines where any duplicate fails the cell (Firehose cannot be read back: only its
# crash-window duplicates are bounded, to one call's worth per run).
STRICT = {"kinesis", "kinesis_after", "dynamodb", "file", "file_after", "gcs", "hop"}
# Pipelines whose lock store is DynamoDB (behind the proxy): store faults reach them.
DYNAMODB_LOCK = {"kinesis", "kinesis_after", "firehose", "dynamodb", "file_after", "gcs", "hop"}

SIZES = {
    # CI (a step of scripts/test.sh): every pipeline under `all`, every other mix on a few
    # pipelines, then the control; a few hundred messages per cell, under 3 minutes.
    "small": {"messages": 100, "batch": 20, "redeliver": 0.05, "idle_batches": 1,
              "cells": [("kinesis", "all"), ("kinesis", "outage"), ("kinesis", "clean"),
                        ("kinesis_after", "all"), ("kinesis_after", "idle"),
                        ("kinesis_after", "retry"),
                        ("firehose", "all"), ("firehose", "crash"), ("firehose", "sink"),
                        ("dynamodb", "all"), ("dynamodb", "retry"), ("dynamodb", "lock"),
                        ("file", "all"), ("file", "idle"), ("file", "crash"),
                        ("file_after", "all"), ("file_after", "outage"),
                        ("gcs", "all"), ("gcs", "crash"),
                        ("hop", "all"), ("hop", "clean")],
              "control": "file"},
    # docs/exactly-once.md's table: every mix on every pipeline, >= 100,000 messages through
    # the lock and >= 300 crashes.
    "large": {"messages": 3000, "batch": 100, "redeliver": 0.03, "idle_batches": 0.2,
              "mixes": MIX_ORDER, "control": "file"},
}
DEAD_LETTER_AFTER = 3  # failed attempts of the same record before it is dead-lettered
MAX_ATTEMPTS = 60      # attempts of one batch before the cell fails
RUN_TIMEOUT = 300      # seconds: a run that takes longer is a hang


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
    """dynoxide, moto and the Cloud Storage emulator on free loopback ports, stopped at
    exit."""

    def __init__(self, out):
        self.procs = []
        emu = ROOT / ".emulators"
        dynoxide = emu / "node_modules/@dynoxide/linux-x64/dynoxide"
        moto = emu / "venv/bin/moto_server"
        gcs = emu / "venv/bin/gcp-storage-emulator"
        for b in (dynoxide, moto, gcs):
            if not b.exists():
                sys.exit(f"{b} is missing: run scripts/emulators.sh install")
        self.ddb_port, self.moto_port, self.gcs_port = free_port(), free_port(), free_port()
        self._start([str(dynoxide), "--host", "127.0.0.1", "--port", str(self.ddb_port)],
                    self.ddb_port, "dynoxide", out / "dynoxide.log")
        self._start([str(moto), "-H", "127.0.0.1", "-p", str(self.moto_port)],
                    self.moto_port, "moto", out / "moto.log")
        self._start([str(gcs), "start", "--in-memory", "--host", "127.0.0.1",
                     "--port", str(self.gcs_port)],
                    self.gcs_port, "the Cloud Storage emulator", out / "gcs.log")
        self.ddb = f"http://127.0.0.1:{self.ddb_port}"
        self.moto = f"http://127.0.0.1:{self.moto_port}"
        self.gcs = f"http://127.0.0.1:{self.gcs_port}"

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
        self.proc.stdout.close()

    def read(self):
        """(call entries, summary counts, outage windows) from the log."""
        out, summary, windows = [], {}, []
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                e = json.loads(line)
                if "summary" in e:
                    summary = e["summary"]
                elif "windows" in e:
                    windows = e["windows"]
                else:
                    out.append(e)
        return out, summary, windows


# ---------------------------------------------------------------------------- workload

def key_text(v):
    """The lock's key text of an `id` value (transforms/src/meta/kv_store_lock/keys.rs):
    a string as it is (`#` doubled in front), any other value `#` and its JSON text;
    None for no key (missing, null, empty)."""
    if v is None or v == "":
        return None
    if isinstance(v, str):
        return "#" + v if v.startswith("#") else v
    return "#" + json.dumps(v, separators=(",", ":"))


MISSING = object()


def workload(n, batch, seed, tag, bad_keys):
    """The deliveries (message dicts) cut into batches; the valid uids, {uid: id}, the uids
    without a key, and the number of duplicate deliveries.

    Every message has a unique `uid` (what the sinks are counted by) and an `id` (the
    lock's key): the uid itself, except four typed ids (1, "1", true, "true": four distinct
    keys, each delivered once) and, with `bad_keys`, three messages without a usable key
    ("", null, missing), which the lock must reject and the source dead-letter.
    About 1% of the messages are delivered twice: half a few positions later (well within
    100 ms at these rates), half far later in the run."""
    rng = random.Random(seed)
    msgs = [{"uid": f"{tag}-{i:07d}", "id": f"{tag}-{i:07d}", "user": f"u{rng.randrange(50)}",
             "seq": i, "pad": "x" * rng.randrange(20, 200)} for i in range(n)]
    special = rng.sample(range(n), 7 if bad_keys else 4)
    for i, v in zip(special, [1, "1", True, "true", "", None, MISSING]):
        if v is MISSING:
            del msgs[i]["id"]
        else:
            msgs[i]["id"] = v
    bad = {msgs[i]["uid"] for i in special[4:]}
    deliveries = list(msgs)
    dups = rng.sample(range(n), max(2, n // 100))
    plan = []
    for k, i in enumerate(dups):
        if k % 2 == 0:
            at = min(len(deliveries), i + 1 + rng.randrange(5))
        else:
            at = min(len(deliveries), i + n // 3 + rng.randrange(max(1, n // 3)))
        plan.append((at, i))
    for at, i in sorted(plan, reverse=True):  # from the back: earlier positions stay valid
        deliveries.insert(at, dict(msgs[i]))
    batches = [deliveries[i:i + batch] for i in range(0, len(deliveries), batch)]
    valid = {m["uid"] for m in msgs} - bad
    id_of = {m["uid"]: m.get("id") for m in msgs}
    return batches, valid, id_of, bad, len(dups)


# ---------------------------------------------------------------------------- pipelines

def ddb_store(table):
    return ("sub.kv_store.aws.dynamodb({ aws: { arn: 'arn:aws:dynamodb:%s:%s:table/%s' }, "
            "attributes: { partition_key: 'PK', ttl: 'ttl' } })" % (REGION, ACCOUNT, table))


def batch_settings(spec):
    # Idle input: the sinks flush on their timer, so the lock's keeper must commit without a
    # ctrl message (the path where a second worker used to send it again).
    return " batch: { count: 1000, size: 1000000, duration: '1s' }," if spec.get("idle") else ""


def kinesis_send(stream, spec, key="user"):
    return ("sub.tf.send.aws.kinesis_data_stream({ aws: { arn: 'arn:aws:kinesis:%s:%s:stream/%s' },"
            "%s object: { partition_key: '%s' } })" % (REGION, ACCOUNT, stream,
                                                       batch_settings(spec), key))


def file_send(directory, spec):
    # No run id in the path: a batch sent again under the lock may replace its own file.
    return ("sub.tf.send.file({%s file_path: { prefix: '%s/', uuid: true, suffix: '.jsonl' }, "
            "separator: '\\n' })" % (batch_settings(spec), directory))


def gcs_send(bucket, spec):
    # JSON lines, one object per batch, named after the batch's lock keys under the lock.
    return ("sub.tf.send.gcp.storage({ gcp: { resource: 'projects/_/buckets/%s' },%s "
            "file_path: { prefix: 'out', uuid: true, suffix: '.jsonl' }, separator: '\\n' })"
            % (bucket, batch_settings(spec)))


def gcs_call(endpoint, method, path, body=None):
    """One JSON API call to the Cloud Storage emulator: (status, body bytes)."""
    req = urllib.request.Request(endpoint + path, data=body, method=method,
                                 headers={"Content-Type": "application/json"} if body else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def stamp(field="run"):
    # Which process delivered this copy: attributes duplicates exactly.
    return f"sub.tf.obj.insert({{ obj: {{ trg: '{field}' }}, value: run }})"


def lock(store, inner, spec, key="id"):
    return f"""sub.tf.meta.kv_store.lock({{
      kv_store: {store},
      prefix: '{PREFIX}',
      ttl_offset: '1h',
      object: {{ source_key: '{key}' }},
      duplicates: 'drop',
      lease: '{spec["lease"]}',
      pending_wait: '20s',
      transforms: [
        {(',' + chr(10) + '        ').join(inner)},
      ],
    }})"""


def config_text(what, transforms, spec):
    if spec.get("retry"):
        # In-process retries: a failure anywhere in the list is retried by this process
        # (the path where a failed release used to leave keys held by our own owner).
        body = ",\n    ".join(transforms)
        transforms = [f"""sub.tf.meta.retry({{
      retry: {{ count: 2, delay: '200ms' }},
      transforms: [
    {body},
      ],
    }})"""]
    return f"""// Generated by tests/faults/campaign.py: {what}.
local sub = std.extVar('sub');
local run = std.extVar('run');
{{
  transforms: [
    {(',' + chr(10) + '    ').join(transforms)},
  ],
}}
"""


def configs(p, res, spec):
    """{stage: Jsonnet text}: one stage ("run"), or the hop's producer and consumer."""
    control = spec.get("control")
    if p == "hop":
        # The producer has no lock: what it sends carries the message's own key (`hop_id`,
        # the id it read), and the consumer's lock is keyed on it.
        producer = [stamp("prun"), "sub.tf.obj.copy({ obj: { src: 'id', trg: 'hop_id' } })",
                    kinesis_send(res["mid"], spec)]
        consumer = [lock(ddb_store(res["locks"]), [stamp(), file_send(res["out"], spec)], spec,
                         key="hop_id")]
        return {"producer": config_text("hop producer (no lock) -> Kinesis", producer, spec),
                "consumer": config_text("hop consumer: lock on hop_id + file", consumer, spec)}
    inner = [stamp()]
    if p == "kinesis" or p == "kinesis_after":
        send = kinesis_send(res["stream"], spec)
        # No run stamp in the records: a record read back is recognised by its data, the
        # same on every attempt (the proxy's log names the process that put each copy).
        inner = ["sub.tf.obj.insert({ obj: { trg: 'locked' }, value: true })"]
    elif p == "firehose":
        send = ("sub.tf.send.aws.data_firehose({ aws: { arn: 'arn:aws:firehose:%s:%s:deliverystream/%s' },"
                "%s aux_tforms: [sub.tf.str.append({ suffix: '\\n' })] })"
                % (REGION, ACCOUNT, res["delivery"], batch_settings(spec)))
    elif p == "gcs":
        send = gcs_send(res["bucket"], spec)
    elif p == "dynamodb":
        send = ("sub.tf.obj.copy({ obj: { src: 'uid', trg: 'event_id' } }),\n        "
                "sub.tf.send.aws.dynamodb.put({ aws: { arn: 'arn:aws:dynamodb:%s:%s:table/%s' },"
                "%s transactional: true })" % (REGION, ACCOUNT, res["events"], batch_settings(spec)))
    else:
        send = file_send(res["out"], spec)
    if control:
        return {"run": config_text(f"the {p} sink without the lock (control)", inner + [send], spec)}
    store = (f"sub.kv_store.sqlite({{ file: '{res['dir']}/locks.sqlite' }})" if p == "file"
             else ddb_store(res["locks"]))
    if p.endswith("_after"):
        # Substation's consumer pattern: a trivial list inside the lock, the send after it.
        transforms = [lock(store, inner, spec), send]
        return {"run": config_text(f"lock, then the {p[:-6]} sink after it", transforms, spec)}
    return {"run": config_text(f"lock + {p} sink", [lock(store, inner + [send], spec)], spec)}


def wait_stream(k, name):
    for _ in range(100):
        s = k.describe_stream_summary(StreamName=name)
        if s["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            return
        time.sleep(0.1)


def create_resources(p, tag, emu, workdir, control):
    res = {"dir": str(workdir), "locks": f"locks-{tag}", "out": str(workdir / "out")}
    ddb = client("dynamodb", emu.ddb)
    if p in DYNAMODB_LOCK and not control:
        ddb.create_table(TableName=res["locks"], BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}])
    if p == "dynamodb":
        res["events"] = f"events-{tag}"
        ddb.create_table(
            TableName=res["events"], BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "event_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "event_id", "KeyType": "HASH"}])
    if p in ("kinesis", "kinesis_after", "hop"):
        k = client("kinesis", emu.moto)
        name = f"mid-{tag}" if p == "hop" else f"out-{tag}"
        res["mid" if p == "hop" else "stream"] = name
        k.create_stream(StreamName=name, ShardCount=2)
        wait_stream(k, name)
    if p == "gcs":
        res["bucket"] = f"gcs-{tag}".lower().replace("_", "-")
        status, body = gcs_call(emu.gcs, "POST", "/storage/v1/b?project=test",
                                json.dumps({"name": res["bucket"]}).encode())
        if status != 200:
            sys.exit(f"creating bucket {res['bucket']}: HTTP {status} {body[:200]!r}")
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

def uid_of(m):
    return str(m.get("uid", m.get("id")))


def stream_records(emu, stream, seqs=False):
    """{shard id: [record data dicts, in order]} of a Kinesis stream, from TRIM_HORIZON;
    with `seqs`, [(data dict, sequence number)]."""
    k = client("kinesis", emu.moto)
    out = {}
    for shard in k.list_shards(StreamName=stream)["Shards"]:
        recs = out[shard["ShardId"]] = []
        it = k.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            r = k.get_records(ShardIterator=it, Limit=10000)
            recs.extend((json.loads(rec["Data"]), rec["SequenceNumber"]) if seqs
                        else json.loads(rec["Data"]) for rec in r["Records"])
            if not r["Records"]:
                break
            it = r.get("NextShardIterator")
    return out


def file_copies(directory):
    out = []
    for f in sorted(Path(directory).rglob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                out.append((uid_of(m), m.get("run")))
    return out


def copies_of(p, res, emu, sink_log):
    """Every delivered copy in the (final) sink: a list of (uid, run)."""
    out = []
    if p in ("kinesis", "kinesis_after"):
        # Which process put each copy: the proxy logged the sequence numbers of its calls
        # (the records carry no run stamp: the send recognises a record it reads back by
        # its data, which must be the same on every attempt).
        caller = {}
        for e in sink_log:
            for seq in e.get("seqs") or []:
                if seq:
                    caller[seq] = e.get("app")
        for recs in stream_records(emu, res["stream"], seqs=True).values():
            out.extend((uid_of(m), caller.get(seq, m.get("run"))) for m, seq in recs)
    elif p == "firehose":
        s3 = client("s3", emu.moto)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=res["bucket"]):
            for o in page.get("Contents", []):
                body = s3.get_object(Bucket=res["bucket"], Key=o["Key"])["Body"].read()
                for line in body.decode().splitlines():
                    if line.strip():
                        m = json.loads(line)
                        out.append((uid_of(m), m.get("run")))
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
    elif p == "gcs":
        status, body = gcs_call(emu.gcs, "GET", f"/storage/v1/b/{res['bucket']}/o")
        if status != 200:
            raise AssertionError(f"listing bucket {res['bucket']}: HTTP {status}")
        for item in json.loads(body).get("items", []):
            name = urllib.parse.quote(item["name"], safe="")
            status, data = gcs_call(emu.gcs, "GET", f"/storage/v1/b/{res['bucket']}/o/{name}?alt=media")
            if status != 200:
                raise AssertionError(f"reading {item['name']}: HTTP {status}")
            for line in data.decode().splitlines():
                if line.strip():
                    m = json.loads(line)
                    out.append((uid_of(m), m.get("run")))
    else:
        out = file_copies(res["out"])
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
    if p not in DYNAMODB_LOCK:
        return locks
    ddb = client("dynamodb", emu.ddb)
    try:
        for page in ddb.get_paginator("scan").paginate(TableName=res["locks"]):
            for i in page["Items"]:
                locks[i["PK"]["S"]] = (i.get("lock_status", {}).get("S"),
                                       i.get("lock_owner", {}).get("S"))
    except ddb.exceptions.ResourceNotFoundException:  # the control has no lock table
        pass
    return locks


# ---------------------------------------------------------------------------- runs

class Stage:
    """One `sluice run` configuration of a cell and the batches it is given."""

    def __init__(self, name, config, lock):
        self.name, self.config, self.lock = name, config, lock
        self.durations = []


class Context:
    def __init__(self, args, p, mix, workdir, env, bad):
        self.args, self.p, self.mix, self.workdir, self.env = args, p, mix, workdir, env
        self.spec = MIXES[mix]
        self.kill = self.spec["kill"]
        self.redeliver = SIZES[args.size]["redeliver"] if self.spec.get("redeliver", True) else 0
        self.rng = random.Random(f"{args.seed}/{p}/{mix}")  # str seeds are stable
        self.lock = threading.Lock()
        self.runs, self.errors, self.dead_letter = [], [], []
        self.bad = bad
        self.counter = 0
        self.redelivered_ok = 0
        self.inputs = {}

    def rng_draw(self):
        with self.lock:
            return self.rng.random()

    def fail(self, why):
        with self.lock:
            self.errors.append(why)

    def input_file(self, stage, b, lines, start):
        """The file holding batch `b` from line `start` on (what this attempt is handed)."""
        name = f"{stage.name}-b{b:05d}" + (f"-from{start}" if start else "") + ".jsonl"
        path = self.workdir / "batches" / name
        with self.lock:
            if name not in self.inputs:
                path.write_text("".join(lines[start:]))
                self.inputs[name] = path
        return path

    def spawn(self, stage, worker, b, attempt, lines, start, hold_open=False):
        """Starts one `sluice run` over batch `b` from line `start`."""
        with self.lock:
            self.counter += 1
            run_id = f"r{self.counter:05d}{stage.name[0]}{worker}b{b}a{attempt}"
            recent = stage.durations[-50:]
            typical = statistics.median(recent) if recent else 1.0
            kill_at = (self.rng.uniform(0.002, typical)
                       if not hold_open and self.rng.random() < self.kill else None)
        err = self.workdir / "stderr" / f"{run_id}.txt"
        undelivered = self.workdir / "undelivered" / f"{run_id}.txt"
        cmd = [self.args.sluice, "run", "-c", str(stage.config), "--ext-str", f"run={run_id}"]
        if self.args.undelivered:
            cmd += ["--undelivered", str(undelivered)]
        env = dict(self.env, AWS_SDK_UA_APP_ID=run_id)
        if hold_open:
            stdin = subprocess.PIPE
        else:
            stdin = open(self.input_file(stage, b, lines, start))
        stderr = open(err, "w")
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr,
                                env=env, cwd=self.workdir)
        if hold_open:
            proc.stdin.write("".join(lines[start:]).encode())
            proc.stdin.flush()
        else:
            stdin.close()
        stderr.close()
        return {"proc": proc, "run": run_id, "stage": stage.name, "worker": worker, "batch": b,
                "attempt": attempt, "start_line": start, "lines": len(lines) - start,
                "keyed": sum(1 for line in lines[start:] if key_text(json.loads(line).get("id"))),
                "kill_at": kill_at, "start": time.time(), "undelivered_path": undelivered,
                "idle_holder": hold_open}

    def finish(self, h, stage):
        """Waits for a run (killing it at its kill time) and records its outcome."""
        proc = h.pop("proc")
        killed = hung = False
        try:
            proc.wait(timeout=h["kill_at"] if h["kill_at"] is not None else RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed, hung = h["kill_at"] is not None, h["kill_at"] is None
        if hung:
            self.fail(f"{h['run']} did not finish within {RUN_TIMEOUT} s")
        h["end"] = time.time()
        h["pid"], h["code"] = proc.pid, proc.returncode
        h["outcome"] = "killed" if killed else ("ok" if proc.returncode == 0 else "failed")
        path = h.pop("undelivered_path")
        h["undelivered"] = None
        if self.args.undelivered and h["outcome"] == "failed" and path.exists():
            h["undelivered"] = undelivered_lines(path)
        with self.lock:
            self.runs.append(h)
            if h["outcome"] == "ok":
                stage.durations.append(h["end"] - h["start"])
        return h

    def attempt(self, stage, worker, b, attempt, lines, start):
        return self.finish(self.spawn(stage, worker, b, attempt, lines, start), stage)


def undelivered_lines(path):
    """The 1-based line numbers of a run's `--undelivered` report (`SOURCE:LINE<tab>why`)."""
    out = []
    for line in path.read_text().splitlines():
        place = line.split("\t", 1)[0]
        try:
            out.append(int(place.rsplit(":", 1)[1]))
        except (IndexError, ValueError):
            continue
    return sorted(set(out))


class Runner:
    """Drives one worker's batches through `sluice run` as a Kinesis event source mapping
    would: killed runs again from where the batch stood, failed runs again from their first
    undelivered line, a record that is the first undelivered K times dead-lettered, some
    finished batches redelivered anyway."""

    def __init__(self, ctx, stage, worker, batches, idle=()):
        self.ctx, self.stage, self.worker, self.batches = ctx, stage, worker, batches
        self.idle = set(idle)

    def run(self):
        try:
            for b, lines in self.batches:
                if b in self.idle:
                    self.idle_episode(b, lines)
                else:
                    self.deliver(self.worker, b, lines)
        except Exception as e:  # a broken harness must fail the cell, not hide in a thread
            import traceback
            traceback.print_exc()
            self.ctx.fail(f"{self.stage.name} worker {self.worker}: {type(e).__name__}: {e}")

    def idle_episode(self, b, lines):
        """Worker A takes the batch and keeps its input open and idle for longer than the
        lease (alive, its sink flushed by its timer); worker B gets the same batch meanwhile
        and must find every message a duplicate. Then A's input closes."""
        ctx, stage = self.ctx, self.stage
        a = ctx.spawn(stage, self.worker, b, 1, lines, 0, hold_open=True)
        time.sleep(parse_seconds(ctx.spec["lease"]) + 1.5)
        if a["proc"].poll() is not None:
            ctx.fail(f"{a['run']}: the idle worker exited before its input closed")
        rb = ctx.attempt(stage, self.worker + 1, b, 1, lines, 0)
        a["proc"].stdin.close()
        ra = ctx.finish(a, stage)
        self.deliver(self.worker, b, lines, first=ra)
        self.deliver(self.worker + 1, b, lines, first=rb)

    def deliver(self, worker, b, lines, first=None):
        ctx, stage = self.ctx, self.stage
        start, attempt, redelivered = 0, 0, False
        failures = Counter()
        while start < len(lines):
            attempt += 1
            if attempt > MAX_ATTEMPTS:
                ctx.fail(f"{stage.name} worker {worker} batch {b}: no success in {MAX_ATTEMPTS} attempts")
                return
            r, first = (first, None) if first else (ctx.attempt(stage, worker, b, attempt, lines, start), None)
            if r["outcome"] == "ok":
                if not redelivered and ctx.rng_draw() < ctx.redeliver:
                    redelivered = True  # the source did not get the acknowledgement
                    with ctx.lock:
                        ctx.redelivered_ok += 1
                    continue
                return
            if r["outcome"] == "failed" and r.get("undelivered"):
                # batchItemFailures: the checkpoint moves to the first undelivered record.
                at = r["start_line"] + r["undelivered"][0] - 1
                if at < start or at >= len(lines):
                    ctx.fail(f"{r['run']}: undelivered line {r['undelivered'][0]} is outside its input")
                    return
                start = at
                failures[at] += 1
                if failures[at] >= DEAD_LETTER_AFTER:
                    m = json.loads(lines[at])
                    with ctx.lock:
                        ctx.dead_letter.append({"uid": uid_of(m), "stage": stage.name,
                                                "worker": worker, "batch": b, "line": at + 1,
                                                "last_run": r["run"]})
                    start = at + 1
            # killed, or failed without a report: again from where the batch stands


def parse_seconds(d):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", d)
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n


def plans_for(ctx, batches, workers):
    """Each worker's (batch number, lines) in order. Two workers: each takes 60% of the
    batches, the middle 20% in both; the second goes backwards, so they reach the shared
    batches at about the same time and cross there."""
    numbered = list(enumerate(batches))
    if workers == 2:
        cut_a, cut_b = int(len(numbered) * 0.6), int(len(numbered) * 0.4)
        return [numbered[:cut_a], list(reversed(numbered[cut_b:]))]
    return [numbered]


def idle_batches(ctx, n):
    size = SIZES[ctx.args.size]["idle_batches"]
    k = size if isinstance(size, int) else max(1, round(n * size))
    return set(ctx.rng.sample(range(n), min(n, k)))


def run_stage(ctx, stage, plans, idle=()):
    threads = [threading.Thread(target=Runner(ctx, stage, w * (2 if idle else 1), plan,
                                              idle if w == 0 else ()).run)
               for w, plan in enumerate(plans)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def waited_out(workdir, run_id):
    """Messages this run failed because their key stayed pending under another live owner
    for the whole `pending_wait` (a liveness cost: two processes waiting on each other)."""
    path = workdir / "stderr" / f"{run_id}.txt"
    text = path.read_text(errors="replace") if path.exists() else ""
    return sum(1 for line in text.splitlines() if "after waiting" in line and "pending under" in line)


def left_pending(workdir, run_id):
    """Whether this run ended with keys it could not commit ("could not settle every lock
    before the end"): its delivered messages' locks stayed pending after it exited."""
    path = workdir / "stderr" / f"{run_id}.txt"
    return path.exists() and "could not settle every lock" in path.read_text(errors="replace")


def lease_takeovers(workdir, run_id):
    """Keys this run's lock reported as taken over by another owner before it committed."""
    text = (workdir / "stderr" / f"{run_id}.txt").read_text(errors="replace")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours, should a build still add them
    keys = []
    for line in text.splitlines():
        if "taken over after its lease ran out" in line and "key=" in line:
            keys.append(line.split("key=", 1)[1].split()[0].strip('"'))
    return keys


# ---------------------------------------------------------------------------- verdict

def attribute(copies, valid, id_of, locks, runs, killed, takeovers, unsettled, ambiguous):
    """Every copy beyond one per message, by cause: Counter of causes, the crash-window
    copies per killed run, the unexplained ones."""
    by_pid = defaultdict(list)
    for r in runs:
        by_pid[r["pid"]].append(r["run"])
    per_id = defaultdict(list)
    for i, run in copies:
        per_id[i].append(run)
    dup, crash_by_run, unexplained = Counter(), Counter(), []
    for i in valid:
        runs_of = per_id.get(i, [])
        if len(runs_of) <= 1:
            continue
        key = f"{PREFIX}:{key_text(id_of[i])}"
        _, owner = locks.get(key, (None, None))
        committer = None
        if owner:
            pid = int(owner.split("/")[1])
            candidates = [r for r in by_pid.get(pid, []) if r in runs_of]
            committer = candidates[-1] if candidates else None
        if committer is None:
            committer = runs_of[-1]
        for run, count in Counter(runs_of).items():
            extra = count - 1 if run == committer else count
            if run != committer and extra:  # the first copy from a run that did not commit
                if run in killed:
                    dup["crash"] += 1
                    crash_by_run[run] += 1
                    extra -= 1
                elif (key, run) in takeovers:
                    dup["lease"] += 1
                    extra -= 1
                elif run in unsettled:
                    dup["unsettled"] += 1
                    extra -= 1
            # The rest: each needs an ambiguous sink outcome that carried the id.
            amb = ambiguous[(i, run)] + ambiguous[(i, None)]
            explained = min(extra, amb)
            dup["ambiguous"] += explained
            if extra > explained:
                dup["unattributed"] += extra - explained
                unexplained.append({"uid": i, "key": key, "copies": runs_of,
                                    "committer": committer,
                                    "killed": sorted(set(runs_of) & killed)})
    return dup, crash_by_run, unexplained, per_id


def analyse(ctx, res, emu, work, proxies, stages):
    p, workdir, spec = ctx.p, ctx.workdir, ctx.spec
    valid, id_of, bad = work["valid"], work["id_of"], work["bad"]
    sink_log, fault_counts, summaries, windows = [], Counter(), {}, []
    for name, px in proxies.items():
        entries, summary, w = px.read()
        sink_log.extend(entries)
        summaries[name] = summary
        windows.extend(w)
        for k, v in summary.items():
            if not k.endswith(":None"):
                fault_counts[k] += v
    final_stage = stages[-1]
    sink_entries = [e for e in sink_log if e.get("class") == "sink"]
    copies = copies_of("file" if p == "hop" else p, res, emu, sink_entries)
    locks = final_locks(p, res, emu)
    lock_runs = [r for r in ctx.runs if r["stage"] == final_stage.name]
    killed = {r["run"] for r in ctx.runs if r["outcome"] == "killed"}
    ambiguous = Counter()
    if p != "hop":  # the hop's final sink is a file: no proxy in front of it
        for e in sink_entries:
            if e.get("fault") in AFTER_FAULTS and e.get("applied"):
                for i in e.get("ids", []):
                    ambiguous[(i, e.get("app"))] += 1  # app None: no app/ in its user agent
    takeovers = {(key, r["run"]) for r in lock_runs for key in lease_takeovers(workdir, r["run"])}
    unsettled = {r["run"] for r in lock_runs if left_pending(workdir, r["run"])}
    dup, crash_by_run, unexplained, per_id = attribute(
        copies, valid, id_of, locks, lock_runs, killed, takeovers, unsettled, ambiguous)

    dead = {d["uid"] for d in ctx.dead_letter}
    rejected = dead & bad
    dead_valid = sorted(dead & valid)
    lost = sorted(valid - set(per_id) - dead)
    bad_delivered = sorted(bad & set(per_id))
    bad_silent = sorted(bad - dead - set(per_id))
    stray = set(per_id) - valid - bad
    # Records an emulator acknowledged (the proxy saw a success for them) but does not hold:
    # a defect of the emulator, reported apart from sluice's losses.
    acknowledged = set()
    for e in sink_entries:
        if e.get("applied") and not e.get("replay"):
            acknowledged.update(set(e.get("ids", [])) - set(e.get("refused", [])))
    mid_dups = None
    if p == "hop":
        held = Counter(uid_of(m) for recs in work["mid"].values() for m in recs)
        mid_dups = sum(c - 1 for c in held.values() if c > 1)
        dropped = sorted(acknowledged - set(held))
    else:
        dropped = sorted(acknowledged - set(per_id)) if p != "dynamodb" else []
    bad_keys = {f"{PREFIX}:{key_text(id_of[u])}" for u in bad if key_text(id_of[u])}
    pending = sorted(k for k, (s, _) in locks.items() if s != "committed" and k not in bad_keys)

    outcomes = Counter(r["outcome"] for r in ctx.runs)
    through_lock = sum(r["lines"] for r in lock_runs)
    keyed_through_lock = sum(r["keyed"] for r in lock_runs)  # lines the lock takes a key for
    ddb_summary = summaries.get("dynamodb", {})

    def calls(cls):
        return sum(v for k, v in ddb_summary.items() if k.startswith(cls + ":"))

    per_msg = (lambda c: round(calls(c) / keyed_through_lock, 3)) if (
        keyed_through_lock and p in DYNAMODB_LOCK and not spec.get("control")) else (lambda c: None)
    t_end = ctx.t_start + ctx.elapsed
    windows_hit = sorted({tuple(w[:2]) for w in windows if w[0] < t_end})
    call_max = min(500, ctx.batch)
    row = {
        "pipeline": p, "mix": ctx.mix, "messages": len(valid) + len(bad),
        "deliveries": ctx.deliveries, "copies": len(copies),
        "once": sum(1 for i in valid if len(per_id.get(i, [])) == 1),
        "duplicates": sum(dup.values()), "dup_crash": dup["crash"],
        "dup_ambiguous": dup["ambiguous"], "dup_lease": dup["lease"],
        "dup_unsettled": dup["unsettled"], "unsettled_runs": len(unsettled),
        "dup_unattributed": dup["unattributed"], "lost": len(lost),
        "rejected": len(rejected), "dead_lettered_valid": len(dead_valid),
        "runs": len(ctx.runs), "crashes": outcomes["killed"], "failed_runs": outcomes["failed"],
        "redelivered_ok": ctx.redelivered_ok,
        "faults": sum(fault_counts.values()), "fault_counts": dict(fault_counts),
        "windows": len(windows_hit), "pending_locks": len(pending),
        "waited_out": sum(waited_out(workdir, r["run"]) for r in lock_runs),
        "workers": spec["workers"] if not spec.get("idle") else 2,
        "acquire_per_msg": per_msg("acquire"), "commit_per_msg": per_msg("commit"),
        "renew_per_msg": per_msg("renew"), "through_lock": through_lock,
        "keyed_through_lock": keyed_through_lock,
        "mid_dups": mid_dups, "max_crash_dups_per_run": max(crash_by_run.values(), default=0),
        "elapsed_s": round(ctx.elapsed, 1), "errors": list(ctx.errors),
    }
    problems = list(ctx.errors)
    if dropped:
        problems.append(f"the emulator acknowledged {len(dropped)} records it does not hold "
                        f"(an emulator defect, not a loss by sluice), e.g. {dropped[:5]}")
    if lost:
        problems.append(f"{len(lost)} messages lost, e.g. {lost[:5]}")
    if dead_valid:
        problems.append(f"{len(dead_valid)} messages with a key failed {DEAD_LETTER_AFTER} "
                        f"attempts in a row and were dead-lettered, e.g. {dead_valid[:5]}")
    if bad_delivered:
        problems.append(f"{len(bad_delivered)} messages without a key were delivered: {bad_delivered}")
    if bad_silent:
        problems.append(f"{len(bad_silent)} messages without a key were neither reported "
                        f"undelivered nor delivered (dropped silently): {bad_silent}")
    if not spec.get("control"):
        if p in STRICT and row["duplicates"]:
            problems.append(f"{row['duplicates']} duplicates (crash {dup['crash']}, ambiguous "
                            f"{dup['ambiguous']}, lease {dup['lease']}, left pending "
                            f"{dup['unsettled']}, unattributed {dup['unattributed']})"
                            + (f", e.g. {unexplained[:3]}" if unexplained else ""))
        elif dup["unattributed"]:
            problems.append(f"{dup['unattributed']} unattributed duplicates, e.g. {unexplained[:3]}")
        over = {r: n for r, n in crash_by_run.items() if n > call_max}
        if p == "firehose" and over:
            problems.append(f"crash-window duplicates of more than one call ({call_max} records) "
                            f"in one run: {over}")
    if pending:
        problems.append(f"{len(pending)} locks left pending, e.g. {pending[:5]}")
    if stray:
        problems.append(f"{len(stray)} ids in the sink that were never sent")
    row["problems"] = problems
    (workdir / "unexplained.json").write_text(json.dumps(unexplained, indent=1))
    (workdir / "dead-letter.json").write_text(json.dumps(ctx.dead_letter, indent=1))
    return row


def hop_batches(mid, batch):
    """The intermediate stream cut as an event source mapping would: per shard, in order,
    batches of up to `batch` records."""
    out = []
    for shard in sorted(mid):
        lines = [json.dumps(m) + "\n" for m in mid[shard]]
        out.append([lines[i:i + batch] for i in range(0, len(lines), batch)])
    return out


def run_one(args, emu, p, mix, seed):
    tag = f"{p[:2]}{p[-2:]}{mix[:2]}{seed % 100000:05d}".replace("_", "")
    workdir = Path(args.out) / f"{p}-{mix}"
    if workdir.exists():
        shutil.rmtree(workdir)
    for d in ("stderr", "batches", "undelivered"):
        (workdir / d).mkdir(parents=True)
    size = SIZES[args.size]
    n = args.messages or size["messages"]
    spec = MIXES[mix]
    control = bool(spec.get("control"))
    res = create_resources(p, tag, emu, workdir, control)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION=REGION,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    env.pop("SLUICE_LOG", None)  # the default: warnings (the lock's takeover warning)
    proxies = {}
    if p in DYNAMODB_LOCK and p != "hop":
        proxies["dynamodb"] = Proxy(emu.ddb, {k: v for k, v in spec["faults"].items()
                                              if k != "read" and (k != "sink" or p == "dynamodb")},
                                    seed, workdir, "dynamodb")
        env["AWS_ENDPOINT_URL_DYNAMODB"] = proxies["dynamodb"].url
    if p in ("kinesis", "kinesis_after", "firehose", "hop"):
        proxies["moto"] = Proxy(emu.moto, {k: v for k, v in spec["faults"].items()
                                           if k in ("sink", "read")},
                                seed + 1, workdir, "moto")
        env["AWS_ENDPOINT_URL_KINESIS"] = env["AWS_ENDPOINT_URL_FIREHOSE"] = proxies["moto"].url
    if p == "gcs":
        # Only the sink's faults: Cloud Storage is not the lock store.
        proxies["gcs"] = Proxy(emu.gcs, {k: v for k, v in spec["faults"].items() if k == "sink"},
                               seed + 2, workdir, "gcs")
        env["STORAGE_EMULATOR_HOST"] = proxies["gcs"].url
    bad_keys = args.undelivered and not control
    batches, valid, id_of, bad, dups = workload(n, size["batch"], seed, tag, bad_keys)
    texts = configs(p, res, spec)
    stages = []
    for name, text in texts.items():
        path = workdir / f"config-{name}.jsonnet" if len(texts) > 1 else workdir / "config.jsonnet"
        path.write_text(text)
        stages.append(Stage(name, path, lock=not control and name != "producer"))
    ctx = Context(args, p, mix, workdir, env, bad)
    ctx.batch = size["batch"]
    lines = [[json.dumps(m) + "\n" for m in batch] for batch in batches]
    plans = plans_for(ctx, lines, spec["workers"])
    ctx.deliveries = sum(len(ls) for plan in plans for _, ls in plan)
    work = {"valid": valid, "id_of": id_of, "bad": bad}
    ctx.t_start = time.time()
    if p == "hop":
        run_stage(ctx, stages[0], plans)
        work["mid"] = stream_records(emu, res["mid"])
        shards = hop_batches(work["mid"], size["batch"])
        consumer_plans = [[(s * 100000 + b, ls) for b, ls in enumerate(shard)]
                          for s, shard in enumerate(shards)]
        idle = ()
        if spec.get("idle"):
            idle = {consumer_plans[0][b][0] for b in idle_batches(ctx, len(consumer_plans[0]))}
        # The consumer's lock store behind its proxy from now on (its outage windows count
        # from here).
        proxies["dynamodb"] = Proxy(emu.ddb, {k: v for k, v in spec["faults"].items()
                                              if k not in ("sink", "read")},
                                    seed, workdir, "dynamodb")
        ctx.env["AWS_ENDPOINT_URL_DYNAMODB"] = proxies["dynamodb"].url
        run_stage(ctx, stages[1], consumer_plans, idle)
    else:
        idle = ()
        if spec.get("idle"):
            idle = idle_batches(ctx, len(plans[0]))
        run_stage(ctx, stages[0], plans, idle)
    ctx.elapsed = time.time() - ctx.t_start
    for px in proxies.values():
        px.stop()
    row = analyse(ctx, res, emu, work, proxies, stages)
    row["dup_deliveries_in_input"] = dups
    runs = [{k: v for k, v in r.items()} for r in ctx.runs]
    (workdir / "runs.json").write_text(json.dumps(runs, indent=0, default=str))
    return row


COLUMNS = [("pipeline", "pipeline"), ("mix", "faults"), ("workers", "workers"),
           ("messages", "messages"), ("deliveries", "deliveries"), ("copies", "in sink"),
           ("duplicates", "duplicates"), ("dup_crash", "crash window"),
           ("dup_ambiguous", "ambiguous"), ("dup_lease", "lease expired"),
           ("dup_unsettled", "left pending"),
           ("dup_unattributed", "unattributed"), ("lost", "losses"), ("rejected", "rejected"),
           ("mid_dups", "hop: mid-stream dups"), ("runs", "runs"), ("crashes", "crashes"),
           ("failed_runs", "failed runs"), ("redelivered_ok", "redelivered ok"),
           ("faults", "faults injected"), ("windows", "outage windows"),
           ("waited_out", "waited out"),
           ("acquire_per_msg", "acquires/msg"), ("commit_per_msg", "commits/msg"),
           ("elapsed_s", "elapsed s")]


def table(rows):
    head = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in COLUMNS) + "|"
    lines = [head, sep]
    for r in rows:
        cells = ["-" if r.get(k) is None else str(r[k]) for k, _ in COLUMNS]
        if r.get("control"):
            cells[1] = "none, no lock (control)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell_seed(seed, p, mix):
    """A cell's own seed: the same cell draws the same whatever else runs with it, so
    `--seed S --pipelines P --mixes M` repeats the draws of that cell of a larger run."""
    return seed * 1000 + zlib.crc32(f"{p}/{mix}".encode()) % 1000


def supports_undelivered(sluice):
    try:
        out = subprocess.run([sluice, "run", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--undelivered" in out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--sluice", default=str(ROOT / "target/debug/sluice"))
    ap.add_argument("--out", default=str(ROOT / "target/faults"))
    ap.add_argument("--pipelines", default=None, help="comma-separated: " + ",".join(PIPELINES))
    ap.add_argument("--mixes", default=None, help="comma-separated: " + ",".join(MIX_ORDER))
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
    size = SIZES[args.size]
    pipelines = args.pipelines.split(",") if args.pipelines else PIPELINES
    for p in pipelines:
        if p not in PIPELINES:
            sys.exit(f"unknown pipeline {p!r}: one of {', '.join(PIPELINES)}")
    mixes = args.mixes.split(",") if args.mixes else None
    for m in mixes or []:
        if m not in MIXES or m == "nolock":
            sys.exit(f"unknown mix {m!r}: one of {', '.join(MIX_ORDER)}")
    if mixes is None and args.pipelines is None and "cells" in size:
        cells = list(size["cells"])
    else:
        chosen = mixes or size.get("mixes") or MIX_ORDER
        cells = [(p, m) for p in pipelines for m in chosen
                 if mixes or "cells" not in size or (p, m) in size["cells"]]
    args.undelivered = supports_undelivered(args.sluice)
    print(f"fault campaign: size {args.size}, seed {args.seed}, sluice {args.sluice}, out {out}",
          flush=True)
    if not args.undelivered:
        print("note: this sluice has no `run --undelivered`: failed runs are redelivered whole "
              "and the messages without a key are left out of the workload", flush=True)
    # Stopped from outside: clean up (the finally below) instead of leaving emulators.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    emu = Emulators(out)
    rows = []
    started = time.time()
    try:
        for p, m in cells:
            row = run_one(args, emu, p, m, cell_seed(args.seed, p, m))
            rows.append(row)
            status = "ok" if not row["problems"] else "FAILED: " + "; ".join(row["problems"])
            print(f"{p:13} {m:6} messages {row['messages']} copies {row['copies']} "
                  f"dups {row['duplicates']} (crash {row['dup_crash']}, ambiguous "
                  f"{row['dup_ambiguous']}, lease {row['dup_lease']}, left pending "
                  f"{row['dup_unsettled']}, unattributed "
                  f"{row['dup_unattributed']}) lost {row['lost']} rejected {row['rejected']} "
                  f"crashes {row['crashes']} failed {row['failed_runs']} faults {row['faults']} "
                  f"windows {row['windows']} waited out {row['waited_out']} "
                  f"{row['elapsed_s']} s: {status}", flush=True)
        control = size.get("control")
        if control and not args.no_control:
            row = run_one(args, emu, control, "nolock", cell_seed(args.seed, control, "nolock"))
            row["control"] = True
            rows.append(row)
            status = ("ok: the harness saw the duplicates"
                      if row["dup_unattributed"] and not row["errors"]
                      else "FAILED: the control without the lock showed no unattributed duplicate")
            print(f"control       {control} without the lock: {row['duplicates']} duplicates, "
                  f"{row['dup_unattributed']} unattributed, {row['crashes']} crashes: {status}",
                  flush=True)
    finally:
        for px in list(LIVE_PROXIES):
            px.stop()
        emu.stop()
    total = round(time.time() - started, 1)
    md = table(rows)
    print("\n" + md)
    locked = [r for r in rows if not r.get("control")]
    print(f"\ntotal: {sum(r['messages'] for r in locked)} messages through the lock "
          f"({sum(r['through_lock'] for r in locked)} lines handed to locked runs), "
          f"{sum(r['crashes'] for r in locked)} crashes, {total} s")
    clean = [r for r in locked if r["mix"] == "clean" and r["acquire_per_msg"] is not None]
    for r in clean:
        print(f"store calls per message, clean {r['pipeline']}: {r['acquire_per_msg']} acquire, "
              f"{r['commit_per_msg']} commit ({r['renew_per_msg']} renew) calls over "
              f"{r['keyed_through_lock']} keyed lines (floor: <= 1 acquire, <= 0.04 commit)")
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
        print(f"\n{len(failed)} cell(s) broke the invariant; details in {out}/*/", file=sys.stderr)
        for r in failed:
            print(f"  {r['pipeline']}-{r['mix']}: " + "; ".join(r["problems"] or ["control clean"]),
                  file=sys.stderr)
        return 1
    print("invariant held: no losses, no duplicates where the sink promises none, every "
          "message without a key dead-lettered, no lock left pending")
    return 0


if __name__ == "__main__":
    sys.exit(main())
