#!/usr/bin/env python3
"""The exactly-once fault-injection campaign: whole pipelines through `sluice run` against the
local emulators while faults are injected, then every sink read back and every message counted.

    campaign.py --size small|large [--sluice target/debug/sluice] [--out DIR]
                [--pipelines kinesis,kinesis_after,firehose,dynamodb,file,file_after,gcs,hop,
                             inside_after,two_sends,ddb_file,fanout,recurring,identical,scaleout]
                [--mixes clean,sink,lock,outage,crash,retry,idle,all,clock,clock_past,fulldisk]
                [--messages N] [--markdown FILE] [--seed N] [--no-control]

scripts/faults.sh is the documented entry point; docs/fault-campaign.md ("The fault-injection
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
  (Kinesis, Firehose) and of the Cloud Storage emulator (send_gcp_storage) injects
  throttling, 5xx, timeouts and partial record failures before forwarding (and, for a
  process on a "hot shard", the same records throttled on every attempt), 5xx and timeouts
  after forwarding (ambiguous outcomes), and outage windows (every lock-store call of a
  class fails for 1-8 s, from every process); runs are stopped at random points, by SIGKILL
  or SIGTERM; two workers run over overlapping input; in-process retries (`meta_retry`
  around the lock); a second worker gets a batch while the first holds it alive on idle
  input; processes run with their clocks offset (libfaketime), within the lock's tolerated
  skew and past it; the SQLite lock file's disk fills up during a run.
- Pipelines with one sink or several (a send inside the lock and one after it, two sends in
  one lock, a transactional DynamoDB put and a file), a fan-out into many Kinesis records,
  keys recurring after their TTL, distinct messages with identical records, and four
  consumers of a 4-shard stream that is resharded while they run (shapes.py).
- Read back: GetRecords (Kinesis), the Firehose bucket (S3), the DynamoDB sink's applied
  transactions (the proxy's log) checked against a Scan, the Cloud Storage bucket's objects,
  and the files; the lock table.
- Verdict per message and per sink: delivered once, more than once, lost, or rejected (no
  key: it must end in the dead-letter list). See docs/fault-campaign.md ("Verdicts") for what fails a cell.

Everything a cell did is kept under --out/PIPELINE-MIX/: configs, batches, each process's
stderr and undelivered report, the proxy logs, runs.json, dead-letter.json, unexplained.json,
locks.json (the lock table at the end); --out/results.json holds every row.
"""
import argparse
import json
import math
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
from collections import Counter, defaultdict, namedtuple
from pathlib import Path

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shapes  # noqa: E402

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

# Fault mixes: what is injected, whether runs are stopped (`kill`: the share of runs; `term`:
# the share of those stopped by SIGTERM rather than SIGKILL), how many workers, the lock's
# lease.
MIXES = {
    # No faults: the lock-store calls per message (acquisitions, commits) are counted.
    "clean": {"faults": {}, "kill": 0.0, "workers": 1, "lease": "30s", "redeliver": False},
    "sink": {"faults": SINK_FAULTS, "kill": 0.0, "workers": 1, "lease": "30s"},
    "lock": {"faults": LOCK_FAULTS, "kill": 0.0, "workers": 1, "lease": "30s"},
    "outage": {"faults": {"windows": ALL_STORE_WINDOWS}, "kill": 0.0, "workers": 2,
               "lease": "12s"},
    "crash": {"faults": {}, "kill": 0.4, "term": 0.5, "workers": 1, "lease": "1s"},
    # The lock inside meta_retry: failures are retried in the same process.
    # (Without the per-process sink outages: every in-process retry of such a run fails
    # again, which only costs time.)
    "retry": {"faults": {"sink": {k: v for k, v in SINK_FAULTS["sink"].items() if k != "outage"},
                         "read": SINK_FAULTS["read"], **LOCK_FAULTS, "windows": STORE_WINDOWS},
              "kill": 0.2, "term": 0.5, "workers": 2, "lease": "3s", "retry": True},
    # A second live worker on idle input: worker A holds a batch with its input open and
    # idle for longer than the lease, worker B gets the same batch meanwhile.
    "idle": {"faults": {}, "kill": 0.0, "workers": 1, "lease": "2s", "idle": True},
    "all": {"faults": {**SINK_FAULTS, **LOCK_FAULTS, "windows": STORE_WINDOWS}, "kill": 0.4,
            "term": 0.5, "workers": 2, "lease": "3s"},
    # Offset clocks within the tolerated skew: runs alternate between a clock 4 s ahead of
    # and one 4 s behind the store's (8 s apart), within the default bound (clock_skew 10s,
    # set explicitly: its default is a quarter of a lease shorter than 40 s), so that a
    # stopped run's batch is redelivered on the other clock; two workers cross. Runs are
    # stopped just after their keys were taken (the proxy logged their acquisition), a
    # quarter of them by SIGTERM. A crashed run's keys are taken over after its lease plus the skew, by a host
    # whose clock is 8 s off the one that wrote the lease: pending_wait outlasts that.
    "clock": {"faults": {}, "kill": 0.4, "kill_after_acquire": True, "term": 0.25,
              "workers": 2, "lease": "12s", "clock_skew": "10s", "pending_wait": "40s",
              "clock": ["+4s", "-4s"]},
    # Past the bound: each batch's first attempt runs on a host whose clock is 30 s ahead
    # or 7 s behind (half the skew is 5 s): it must refuse to take keys (exit non-zero, the
    # clock error on stderr, nothing sent, no key taken); the source then redelivers it to
    # a host with a true clock.
    "clock_past": {"faults": {}, "kill": 0.0, "workers": 1, "lease": "12s",
                   "clock_skew": "10s", "clock_past": ["+30s", "-7s"]},
    # The SQLite lock file on a small tmpfs that fills up during a quarter of the runs (at a
    # random point), freed once that run exited: the run must fail, and the redelivery
    # (after the disk is freed) must neither lose nor duplicate anything.
    "fulldisk": {"faults": {}, "kill": 0.0, "workers": 1, "lease": "2s", "fulldisk": 0.25},
    # The negative control: the file pipeline without the lock, under crashes and
    # redeliveries. It must break the invariant (unattributed duplicates): if it does not,
    # the harness cannot see what it claims to measure, and the campaign fails.
    "nolock": {"faults": {}, "kill": 0.4, "workers": 1, "lease": "1s", "control": True},
}
MIX_ORDER = ["clean", "sink", "lock", "outage", "crash", "retry", "idle", "all", "clock",
             "clock_past", "fulldisk"]


def statements_mix(spec, acquire="statements"):
    """A mix with the DynamoDB lock taking and committing keys with PartiQL statements
    (`lock_acquire: 'statements'`: a consistent BatchGetItem, the `lock_read` class, then
    BatchExecuteStatement, acquire or commit; `'epochs'`: the same read and acquisitions,
    the keys written pending in an epoch, then one UpdateItem of the epoch record per batch,
    the `commit` class, and a taker's reads of epoch records, `lock_read`, and aborts of
    their slots, `acquire`). Its calls are fewer than the transactions' (a read and a
    statement call per 25 keys), so where the mix injects lock faults, the acquisitions'
    and reads' rates of throttling and errors are the commits' (their timeouts stay rare:
    an acquisition held 5 s outlasts the short leases); its outage windows reach the reads
    too."""
    out = dict(spec, lock_acquire=acquire)
    faults = dict(spec["faults"])
    if "acquire" in faults:
        quick = {k: v for k, v in LOCK_FAULTS["commit"].items() if not k.startswith("timeout")}
        faults["acquire"] = {**faults["acquire"], **quick}
        faults["lock_read"] = dict(LOCK_FAULTS["commit"])
    if "windows" in faults:
        w = dict(faults["windows"])
        w["classes"] = [c for c in w["classes"] if c != "*"] + ["lock_read"] + (
            ["*"] if "*" in w["classes"] else [])
        faults["windows"] = w
    out["faults"] = faults
    return out


# Every mix that reaches a DynamoDB lock, again with the lock in `lock_acquire:
# 'statements'` (MIX_stmt) and in `lock_acquire: 'epochs'` (MIX_epoch).
STATEMENT_MIXES = [f"{m}_stmt" for m in MIX_ORDER if m != "fulldisk"]
EPOCH_MIXES = [f"{m}_epoch" for m in MIX_ORDER if m != "fulldisk"]
for _m in MIX_ORDER:
    if f"{_m}_stmt" in STATEMENT_MIXES:
        MIXES[f"{_m}_stmt"] = dict(statements_mix(MIXES[_m]), base=_m)
    if f"{_m}_epoch" in EPOCH_MIXES:
        MIXES[f"{_m}_epoch"] = dict(statements_mix(MIXES[_m], "epochs"), base=_m)
ALL_MIXES = MIX_ORDER + STATEMENT_MIXES + EPOCH_MIXES

PIPELINES = ["kinesis", "kinesis_after", "firehose", "dynamodb", "file", "file_after", "gcs",
             "hop", "inside_after", "two_sends", "ddb_file", "fanout", "recurring", "identical",
             "scaleout"]
# The sinks each pipeline writes to, each counted on its own (a loss or a duplicate at any
# sink fails the cell).
SINKS = {"kinesis": ["kinesis"], "kinesis_after": ["kinesis"], "firehose": ["firehose"],
         "dynamodb": ["dynamodb"], "file": ["file"], "file_after": ["file"], "gcs": ["gcs"],
         "hop": ["file"], "inside_after": ["file", "kinesis"], "two_sends": ["kinesis", "file"],
         "ddb_file": ["dynamodb", "file"], "fanout": ["kinesis"], "recurring": ["file", "gcs"],
         "identical": ["kinesis"], "scaleout": ["kinesis"]}
# Sinks where any duplicate fails the cell (Firehose cannot be read back: only its
# crash-window duplicates are bounded, to one call's worth per run). The `identical`
# pipeline's records carry no key: its extra copies after a crash or an ambiguous answer are
# explained ("unprovable"), bounded by one per message per chance.
STRICT_SINKS = {"kinesis", "dynamodb", "file", "gcs"}
# The proxy in front of each sink (its log holds the sink calls).
SINK_PROXY = {"kinesis": "moto", "firehose": "moto", "dynamodb": "dynamodb", "gcs": "gcs"}
# Pipelines whose lock store is DynamoDB (behind the proxy): store faults reach them. The
# others' (file) is SQLite.
DYNAMODB_LOCK = set(PIPELINES) - {"file"}
SQLITE_LOCK = {"file"}
# Workers per pipeline where the mix's do not apply: keys recurring after a short TTL are
# re-presented by one worker (a second one crossing it seconds later could meet a key after
# its TTL and process it again, by design); the scale-out has one consumer per shard.
PIPELINE_WORKERS = {"recurring": 1}
SCALEOUT_CONSUMERS = 4


def applies(p, mix):
    """Whether mix `mix` makes sense for pipeline `p`."""
    spec = MIXES[mix]
    if spec.get("lock_acquire") and p not in DYNAMODB_LOCK:
        return False
    if spec.get("fulldisk"):
        return p in SQLITE_LOCK
    if spec.get("clock") or spec.get("clock_past"):
        # A clock is measured against DynamoDB's (SQLite has none to compare with).
        return p in DYNAMODB_LOCK and p not in ("hop", "scaleout")
    if spec.get("idle"):
        return p != "scaleout"
    return True


SIZES = {
    # CI (a step of scripts/test.sh): every pipeline under `all` (or, for the newer ones, the
    # mix that reaches their class), every other mix on a few pipelines, then the control; a
    # hundred messages per cell, under 4 minutes.
    "small": {"messages": 100, "batch": 20, "redeliver": 0.05, "idle_batches": 1,
              "fulldisk": 0.0,  # one full disk per cell (each costs the run 30 s of settling)
              "cells": [("kinesis", "all"), ("kinesis", "outage"), ("kinesis", "clean"),
                        ("kinesis_after", "all"), ("kinesis_after", "idle"),
                        ("kinesis_after", "retry"),
                        ("firehose", "all"), ("firehose", "crash"), ("firehose", "sink"),
                        ("dynamodb", "all"), ("dynamodb", "retry"), ("dynamodb", "lock"),
                        ("file", "all"), ("file", "idle"), ("file", "crash"),
                        ("file_after", "all"), ("file_after", "outage"),
                        ("gcs", "all"), ("gcs", "crash"),
                        ("hop", "all"), ("hop", "clean"),
                        ("inside_after", "all"), ("two_sends", "all"), ("ddb_file", "all"),
                        ("fanout", "sink"), ("recurring", "crash"), ("identical", "crash"),
                        ("scaleout", "crash"), ("kinesis", "clock"),
                        ("kinesis_after", "clock_past"), ("file", "fulldisk"),
                        # The lock in `lock_acquire: 'statements'`: every fault at once,
                        # and the lock store's faults alone with commits by statements;
                        # the same in `lock_acquire: 'epochs'` (commits by epoch records).
                        ("kinesis", "all_stmt"), ("file_after", "lock_stmt"),
                        ("kinesis", "all_epoch"), ("file_after", "lock_epoch")],
              # Two cells at a time (they mostly wait: on leases, faults held 5 s, outage
              # windows; the whole run takes under a minute of CPU), the longest first (a
              # full disk's 30 s of settling, leases plus the clock skew).
              "jobs": 2, "first": [("kinesis", "clock"), ("file", "fulldisk")],
              "control": "file"},
    # docs/exactly-once.md's table: every mix on every pipeline it applies to (144 cells),
    # and again with the DynamoDB lock in `lock_acquire: 'statements'` (135 cells) and in
    # `lock_acquire: 'epochs'` (135 cells), >= 150,000 messages through the lock and >= 400
    # crashes (SIGKILL and SIGTERM); two cells at a time, the slowest first.
    "large": {"messages": 2000, "batch": 100, "redeliver": 0.03, "idle_batches": 0.2,
              "mixes": ALL_MIXES, "control": "file", "jobs": 2,
              "first": [(p, m) for m in ("clock", "fulldisk", "clock_stmt", "clock_epoch") for p in PIPELINES]},
}
DEAD_LETTER_AFTER = 3  # failed attempts of the same record before it is dead-lettered
# The fan-out's source retries a record longer: each of its messages is up to six Kinesis
# records, each failing alone 25% of the time and every time on a hot shard, so three
# unlucky attempts in a row are a matter of chance there, not a sign of a stuck key (as a
# Lambda event source mapping's MaximumRetryAttempts is set for such a function).
DEAD_LETTER_AFTER_FANOUT = 6
MAX_ATTEMPTS = 60      # attempts of one batch before the cell fails
RUN_TIMEOUT = 300      # seconds: a run that takes longer is a hang
TERM_WAIT = 60         # seconds a run may take to stop after SIGTERM (its grace is 25 s)


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
    exit; kinesalite too with `kinesalite` (the scale-out's source stream, resharded)."""

    def __init__(self, out, kinesalite=False):
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
        self.kinesalite = None
        if kinesalite:
            bin_ = emu / "kinesalite/node_modules/.bin/kinesalite"
            if not bin_.exists():
                sys.exit(f"{bin_} is missing: run scripts/emulators.sh install")
            port = free_port()
            self._start([str(bin_), "--port", str(port), "--createStreamMs", "0",
                         "--deleteStreamMs", "0", "--updateStreamMs", "0", "--shardLimit", "1000"],
                        port, "kinesalite", out / "kinesalite.log")
            self.kinesalite = f"http://127.0.0.1:{port}"

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


def workload(n, batch, seed, tag, bad_keys, p=None):
    """The deliveries (message dicts) cut into phases of batches; the valid uids,
    {uid: id}, the uids without a key, the number of duplicate deliveries, and the
    pipeline's shape data ({uid: parts}, {uid: cid}, {uid: phase}).

    Every message has a unique `uid` (what the sinks are counted by) and an `id` (the
    lock's key): the uid itself, except four typed ids (1, "1", true, "true": four distinct
    keys, each delivered once) and, with `bad_keys`, three messages without a usable key
    ("", null, missing), which the lock must reject and the source dead-letter.
    About 1% of the messages are delivered twice: half a few positions later (well within
    100 ms at these rates), half far later in the run.

    Shapes (shapes.py): `fanout` messages carry parts; `identical` messages carry records
    shared by 1-4 of them; `recurring` has two phases, the second a new message (new uid)
    for every key of the first (their second window), its duplicate deliveries only near
    ones (a far one would come after the key's TTL and be processed again, by design)."""
    rng = random.Random(seed)
    phases = 2 if p == "recurring" else 1
    per = [n // phases + (1 if k < n % phases else 0) for k in range(phases)]
    shape = {"parts": {}, "cid": {}, "phase": {}}
    out_phases, valid, id_of, bad, ndups = [], set(), {}, set(), 0
    first = None
    for ph in range(phases):
        m_n = per[ph]
        msgs = [{"uid": f"{tag}-{ph}{i:06d}" if phases > 1 else f"{tag}-{i:07d}",
                 "id": None, "user": f"u{rng.randrange(50)}", "seq": i,
                 "pad": "x" * rng.randrange(20, 200)} for i in range(m_n)]
        for m in msgs:
            m["id"] = m["uid"]
        if ph == 0:
            special = rng.sample(range(m_n), 7 if bad_keys else 4)
            for i, v in zip(special, [1, "1", True, "true", "", None, MISSING]):
                if v is MISSING:
                    del msgs[i]["id"]
                else:
                    msgs[i]["id"] = v
            bad |= {msgs[i]["uid"] for i in special[4:]}
            first = msgs
        else:
            # The second window: the first phase's keys again (its keyed, string ones).
            keys = [m["id"] for m in first if isinstance(m.get("id"), str) and m["id"]
                    and m["id"] == m["uid"]]
            for m, k in zip(msgs, keys):
                m["id"] = k
        if p == "fanout":
            shapes.add_parts(msgs, rng)
        if p == "identical":
            shapes.add_content(msgs, rng, bad | {m["uid"] for m in msgs
                                                 if not isinstance(m.get("id"), str)
                                                 or m["id"] != m["uid"]}, f"{tag}{ph}")
        for m in msgs:
            shape["phase"][m["uid"]] = ph
            if "parts" in m:
                shape["parts"][m["uid"]] = len(m["parts"])
            if "rec" in m:
                shape["cid"][m["uid"]] = m["rec"]["cid"]
        deliveries = list(msgs)
        dups = rng.sample(range(m_n), max(2, m_n // 100))
        plan = []
        for k, i in enumerate(dups):
            if k % 2 == 0 or p == "recurring":
                at = min(len(deliveries), i + 1 + rng.randrange(5))
            else:
                at = min(len(deliveries), i + m_n // 3 + rng.randrange(max(1, m_n // 3)))
            plan.append((at, i))
        for at, i in sorted(plan, reverse=True):  # from the back: earlier positions stay valid
            deliveries.insert(at, dict(msgs[i]))
        out_phases.append([deliveries[i:i + batch] for i in range(0, len(deliveries), batch)])
        valid |= {m["uid"] for m in msgs} - bad
        id_of.update({m["uid"]: m.get("id") for m in msgs})
        ndups += len(dups)
    return out_phases, valid, id_of, bad, ndups, shape


# ---------------------------------------------------------------------------- pipelines

def ddb_store(table, spec):
    acquire = (", lock_acquire: '%s'" % spec["lock_acquire"]) if spec.get("lock_acquire") else ""
    return ("sub.kv_store.aws.dynamodb({ aws: { arn: 'arn:aws:dynamodb:%s:%s:table/%s' }, "
            "attributes: { partition_key: 'PK', ttl: 'ttl' }%s })" % (REGION, ACCOUNT, table, acquire))


def batch_settings(spec):
    # Idle input: the sinks flush on their timer, so the lock's keeper must commit without a
    # ctrl message (the path where a second worker used to send it again). The full disk
    # too: its runs hold their input open while the disk fills.
    return (" batch: { count: 1000, size: 1000000, duration: '1s' },"
            if spec.get("idle") or spec.get("fulldisk") else "")


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


def lock(store, inner, spec, key="id", ttl="1h"):
    skew = f"\n      clock_skew: '{spec['clock_skew']}'," if spec.get("clock_skew") else ""
    return f"""sub.tf.meta.kv_store.lock({{
      kv_store: {store},
      prefix: '{PREFIX}',
      ttl_offset: '{ttl}',
      object: {{ source_key: '{key}' }},
      duplicates: 'drop',
      lease: '{spec["lease"]}',
      pending_wait: '{spec.get("pending_wait", "20s")}',{skew}
      transforms: [
        {(',' + chr(10) + '        ').join(inner)},
      ],
    }})"""


def skew_s(spec):
    """The lock's tolerated clock skew: clock_skew, else 10 s or a quarter of a shorter
    lease (transforms/src/meta/kv_store_lock/mod.rs)."""
    if spec.get("clock_skew"):
        return parse_seconds(spec["clock_skew"])
    return min(10.0, parse_seconds(spec["lease"]) / 4)


def recurring_ttl_s(spec):
    """The `recurring` pipeline's ttl_offset: as short as a window's re-presentations allow.
    The TTL counts from when the batch that commits a key began (keys.rs, ttl_of), and a
    message may wait for another owner's key for up to the lease, the clock skew and
    pending_wait before it runs: a shorter TTL may be past when the key is committed, and a
    copy right behind it is processed again (a run found it: recurring/clock, ttl_offset
    lease + 5 s, a message that waited 30 s for a crashed owner's key). Hence those and 5 s."""
    return (parse_seconds(spec["lease"]) + skew_s(spec)
            + parse_seconds(spec.get("pending_wait", "20s")) + 5)


def recurring_window_s(spec):
    """The window the `recurring` pipeline's lock keeps a key for after its commit: its
    ttl_offset in whole seconds, a fraction rounded up as the lock does
    (transforms/src/meta/kv_store_lock/mod.rs; '28.75s' is 29 s)."""
    return math.ceil(recurring_ttl_s(spec))


def clock_offset_s(clock):
    """A run's wall-clock offset (`clock`: '+4s', '-4s', None) in seconds."""
    if not clock:
        return 0.0
    return -parse_seconds(clock[1:]) if clock.startswith("-") else parse_seconds(clock.lstrip("+"))


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
        consumer = [lock(ddb_store(res["locks"], spec), [stamp(), file_send(res["out"], spec)], spec,
                         key="hop_id")]
        return {"producer": config_text("hop producer (no lock) -> Kinesis", producer, spec),
                "consumer": config_text("hop consumer: lock on hop_id + file", consumer, spec)}
    store = (f"sub.kv_store.sqlite({{ file: '{res['lockdb']}' }})" if p in SQLITE_LOCK
             else ddb_store(res["locks"], spec))
    # No run stamp in Kinesis records: a record read back is recognised by its data, the same
    # on every attempt (the proxy's log names the process that put each copy). A file or
    # object gets the stamp; where both are written, it is removed before the Kinesis send.
    unstamp = "sub.tf.obj.delete({ obj: { src: 'run' } })"
    marked = "sub.tf.obj.insert({ obj: { trg: 'locked' }, value: true })"
    if p == "inside_after":
        # A send inside the lock (files) and one after it (Kinesis): the message is settled
        # by both.
        inner = [stamp(), file_send(res["out"], spec), unstamp]
        return {"run": config_text("lock + file inside, Kinesis after it",
                                   [lock(store, inner, spec), kinesis_send(res["stream"], spec)],
                                   spec)}
    if p == "two_sends":
        inner = [marked, kinesis_send(res["stream"], spec), stamp(), file_send(res["out"], spec)]
        return {"run": config_text("lock + Kinesis + file", [lock(store, inner, spec)], spec)}
    if p == "ddb_file":
        inner = [stamp(), "sub.tf.obj.copy({ obj: { src: 'uid', trg: 'event_id' } })",
                 ddb_put(res["events"], spec), file_send(res["out"], spec)]
        return {"run": config_text("lock + transactional DynamoDB put + file",
                                   [lock(store, inner, spec)], spec)}
    if p == "fanout":
        # One record per element of `parts`: each keeps the message's fields (its `id`, the
        # lock key, so the read-back can prove it) and gets `part`.
        inner = ["sub.tf.aggregate.from.array({ obj: { src: 'parts' } })",
                 kinesis_send(res["stream"], spec)]
        return {"run": config_text("lock + fan-out into Kinesis records",
                                   [lock(store, inner, spec)], spec)}
    if p == "recurring":
        inner = [stamp(), file_send(res["out"], spec), gcs_send(res["bucket"], spec)]
        return {"run": config_text("lock (short TTL) + file + Cloud Storage",
                                   [lock(store, inner, spec,
                                         ttl=f"{recurring_ttl_s(spec):g}s")], spec)}
    if p == "identical":
        # The record is `rec` alone: byte-identical for the messages sharing it, no key.
        inner = ["sub.tf.obj.copy({ obj: { src: 'rec' } })",
                 kinesis_send(res["stream"], spec, key="pk")]
        return {"run": config_text("lock + records without the key, identical across messages",
                                   [lock(store, inner, spec)], spec)}
    if p == "scaleout":
        return {"consumer": config_text("scale-out consumer: lock + Kinesis",
                                        [lock(store, [marked, kinesis_send(res["stream"], spec)],
                                              spec)], spec)}
    inner = [stamp()]
    if p == "kinesis" or p == "kinesis_after":
        send = kinesis_send(res["stream"], spec)
        inner = [marked]
    elif p == "firehose":
        send = ("sub.tf.send.aws.data_firehose({ aws: { arn: 'arn:aws:firehose:%s:%s:deliverystream/%s' },"
                "%s aux_tforms: [sub.tf.str.append({ suffix: '\\n' })] })"
                % (REGION, ACCOUNT, res["delivery"], batch_settings(spec)))
    elif p == "gcs":
        send = gcs_send(res["bucket"], spec)
    elif p == "dynamodb":
        send = ("sub.tf.obj.copy({ obj: { src: 'uid', trg: 'event_id' } }),\n        "
                + ddb_put(res["events"], spec))
    else:
        send = file_send(res["out"], spec)
    if control:
        return {"run": config_text(f"the {p} sink without the lock (control)", inner + [send], spec)}
    if p.endswith("_after"):
        # Substation's consumer pattern: a trivial list inside the lock, the send after it.
        transforms = [lock(store, inner, spec), send]
        return {"run": config_text(f"lock, then the {p[:-6]} sink after it", transforms, spec)}
    return {"run": config_text(f"lock + {p} sink", [lock(store, inner + [send], spec)], spec)}


def ddb_put(table, spec):
    return ("sub.tf.send.aws.dynamodb.put({ aws: { arn: 'arn:aws:dynamodb:%s:%s:table/%s' },"
            "%s transactional: true })" % (REGION, ACCOUNT, table, batch_settings(spec)))


def wait_stream(k, name):
    for _ in range(100):
        s = k.describe_stream_summary(StreamName=name)
        if s["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            return
        time.sleep(0.1)


def create_resources(p, tag, emu, workdir, control, lockdir=None):
    """The cell's tables, streams, buckets and directories (`res`); `lockdir` holds the
    SQLite lock file (a tmpfs in the `fulldisk` mix)."""
    res = {"dir": str(workdir), "locks": f"locks-{tag}", "out": str(workdir / "out"),
           "lockdb": str(Path(lockdir or workdir) / "locks.sqlite")}
    sinks = set(SINKS[p])
    ddb = client("dynamodb", emu.ddb)
    if p in DYNAMODB_LOCK and not control:
        ddb.create_table(TableName=res["locks"], BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}])
    if "dynamodb" in sinks:
        res["events"] = f"events-{tag}"
        ddb.create_table(
            TableName=res["events"], BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "event_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "event_id", "KeyType": "HASH"}])
    k = client("kinesis", emu.moto)
    if p == "hop":
        res["mid"] = f"mid-{tag}"
        k.create_stream(StreamName=res["mid"], ShardCount=2)
        wait_stream(k, res["mid"])
    elif "kinesis" in sinks:
        res["stream"] = f"out-{tag}"
        k.create_stream(StreamName=res["stream"], ShardCount=4 if p == "scaleout" else 2)
        wait_stream(k, res["stream"])
    if p == "scaleout":
        # The source stream, on kinesalite (resharding as Kinesis does).
        res["src"] = f"src-{tag}"
        src = client("kinesis", emu.kinesalite)
        src.create_stream(StreamName=res["src"], ShardCount=4)
        wait_stream(src, res["src"])
    if "gcs" in sinks:
        res["bucket"] = f"gcs-{tag}".lower().replace("_", "-")
        status, body = gcs_call(emu.gcs, "POST", "/storage/v1/b?project=test",
                                json.dumps({"name": res["bucket"]}).encode())
        if status != 200:
            sys.exit(f"creating bucket {res['bucket']}: HTTP {status} {body[:200]!r}")
    if "firehose" in sinks:
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

def unit_of(m):
    """What a copy is counted by (proxy.unit_id): the message's `uid`, `uid#part` for one
    of a fan-out's records, `cid` for a record whose content several messages share."""
    for k in ("uid", "id", "cid"):
        if k in m:
            u = str(m[k])
            return f"{u}#{m['part']}" if "part" in m else u
    return None


uid_of = unit_of


def stream_records(emu, stream, seqs=False, endpoint=None):
    """{shard id: [record data dicts, in order]} of a Kinesis stream, from TRIM_HORIZON;
    with `seqs`, [(data dict, sequence number)]."""
    k = client("kinesis", endpoint or emu.moto)
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
    """[(unit, run, file name)] of every JSON line of the files under `directory`."""
    out = []
    for f in sorted(Path(directory).rglob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                out.append((unit_of(m), m.get("run"), f.name))
    return out


def sink_copies(sink, res, emu, sink_log):
    """Every copy in one sink: a list of (unit, run, object: file, object name, shard)."""
    out = []
    if sink == "kinesis":
        # Which process put each copy: the proxy logged the sequence numbers of its calls
        # (the records carry no run stamp: the send recognises a record it reads back by
        # its data, which must be the same on every attempt).
        caller = {}
        for e in sink_log:
            for seq in e.get("seqs") or []:
                if seq:
                    caller[seq] = e.get("app")
        for shard, recs in stream_records(emu, res["stream"], seqs=True).items():
            out.extend((unit_of(m), caller.get(seq, m.get("run")), shard) for m, seq in recs)
    elif sink == "firehose":
        s3 = client("s3", emu.moto)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=res["bucket"]):
            for o in page.get("Contents", []):
                body = s3.get_object(Bucket=res["bucket"], Key=o["Key"])["Body"].read()
                for line in body.decode().splitlines():
                    if line.strip():
                        m = json.loads(line)
                        out.append((unit_of(m), m.get("run"), o["Key"]))
    elif sink == "dynamodb":
        # Applied transactions: a second put of the same key would overwrite the item.
        for e in sink_log:
            if e.get("class") == "sink" and e.get("applied") and not e.get("replay"):
                out.extend((i, e.get("app"), None) for i in e.get("ids", []))
        ddb = client("dynamodb", emu.ddb)
        in_table = set()
        for page in ddb.get_paginator("scan").paginate(TableName=res["events"]):
            in_table.update(i["event_id"]["S"] for i in page["Items"])
        logged = {i for i, _, _ in out}
        if in_table != logged:
            raise AssertionError(
                f"the table and the proxy's applied writes disagree: {len(in_table - logged)} "
                f"items not logged, {len(logged - in_table)} logged ids not in the table")
    elif sink == "gcs":
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
                    out.append((unit_of(m), m.get("run"), item["name"]))
    else:
        out = file_copies(res["out"])
    return out


def copies_of(p, res, emu, sink_log):
    """Every delivered copy in the pipeline's (first, final) sink: a list of (unit, run)."""
    return [(u, r) for u, r, _ in sink_copies(SINKS[p][0], res, emu, sink_log)]


def lock_table(p, res, emu):
    """{key: record} of the lock table at the end (status, owner, lease, since, ttl,
    progress, note)."""
    locks = {}
    if p in SQLITE_LOCK:
        db = Path(res["lockdb"])
        if not db.exists():  # the control runs without the lock
            return locks
        c = sqlite3.connect(db)
        for key, owner, committed, lease, ttl, since, note, progress in c.execute(
                "SELECT key, owner, committed, lease_until_ms, ttl, since_ms, note, progress "
                "FROM sluice_locks"):
            locks[key] = {"status": "committed" if committed else "pending", "owner": owner,
                          "lease": lease, "ttl": ttl, "since": since, "note": note,
                          "progress": progress}
        c.close()
        return locks
    ddb = client("dynamodb", emu.ddb)
    items = []
    try:
        for page in ddb.get_paginator("scan").paginate(TableName=res["locks"]):
            items.extend(page["Items"])
    except ddb.exceptions.ResourceNotFoundException:  # the control has no lock table
        pass
    return dynamodb_locks(items)


EPOCH_MARK = "#epoch:"


def dynamodb_locks(items):
    """{key: record} of the DynamoDB lock table's items (status, owner, lease, since, ttl,
    progress, note). With `lock_acquire: 'epochs'`, a key whose status is `epoch` was
    written pending in an epoch, and its epoch record (partition key `#epoch:OWNER:N`, not a
    key: left out) says what became of it: `committed` when the record's `lock_committed`
    holds the key's `lock_slot`, `aborted` (by a taker that then did not take the key) when
    `lock_aborted` does, else `pending`; the record and slot are kept in `epoch`."""
    epochs, keys = {}, {}
    for i in items:
        pk = i["PK"]["S"]
        if EPOCH_MARK in pk:
            epochs[pk] = i
            continue
        rec = {}
        for attr, name in (("lock_status", "status"), ("lock_owner", "owner"),
                           ("lock_lease_until", "lease"), ("ttl", "ttl"),
                           ("lock_since", "since"), ("lock_note", "note"),
                           ("lock_progress", "progress"), ("lock_epoch", "epoch"),
                           ("lock_slot", "slot")):
            v = i.get(attr)
            if v is not None:
                rec[name] = v.get("S", v.get("N", v.get("SS")))
        keys[pk] = rec
    for rec in keys.values():
        if rec.get("status") != "epoch":
            continue
        epoch = str(rec.get("epoch", ""))
        name = epoch if EPOCH_MARK in epoch else f"{EPOCH_MARK}{rec.get('owner', '')}:{epoch}"
        record = epochs.get(name) or next((r for pk, r in epochs.items() if pk.endswith(name)), None)
        rec["epoch"] = f"{name}/{rec.pop('slot', '')}"
        slot = rec["epoch"].rsplit("/", 1)[1]

        def holds(attr):
            return any(same_number(n, slot) for n in ((record or {}).get(attr) or {}).get("NS", []))
        rec["status"] = ("committed" if holds("lock_committed") else
                         "aborted" if holds("lock_aborted") else "pending")
        if record is None:
            rec["note"] = "its epoch has no record (nothing committed or aborted in it)"
    return keys


def same_number(a, b):
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def final_locks(p, res, emu):
    """{key: (status, owner)} of the lock table at the end."""
    return {k: (r.get("status"), r.get("owner")) for k, r in lock_table(p, res, emu).items()}


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
        self.disk = None          # the `fulldisk` mix's tmpfs (shapes.FullDisk)
        self.disk_episodes = 0
        self.disk_met = 0
        self.hot_rate = 0.0       # share of runs on a "hot shard" (the proxy's `hot` fault)
        self.dead_letter_after = DEAD_LETTER_AFTER
        self.last_hot = set()     # (stage, worker, batch) whose last attempt was hot

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

    def spawn(self, stage, worker, b, attempt, lines, start, hold_open=False, clock=None):
        """Starts one `sluice run` over batch `b` from line `start`, its wall clock offset
        by `clock` (libfaketime) when given."""
        with self.lock:
            self.counter += 1
            where = (stage.name, worker, b)
            hot = (stage.lock and where not in self.last_hot and self.hot_rate
                   and self.rng.random() < self.hot_rate)
            # A batch meets a hot shard at most every other attempt (else its first failing
            # record could fail three times in a row and be dead-lettered).
            (self.last_hot.add if hot else self.last_hot.discard)(where)
            run_id = f"r{self.counter:05d}{stage.name[0]}{worker}b{b}a{attempt}" + ("-hot" if hot else "")
            recent = stage.durations[-50:]
            typical = statistics.median(recent) if recent else 1.0
            kill_at = (self.rng.uniform(0.002, typical)
                       if not hold_open and self.rng.random() < self.kill else None)
            if kill_at is not None and self.spec.get("kill_after_acquire"):
                kill_at = RUN_TIMEOUT / 2  # the latest; see finish()
            sig = None
            if kill_at is not None:
                term = self.spec.get("term", 0.0)
                sig = signal.SIGTERM if term and self.rng.random() < term else signal.SIGKILL
            disk_at = None
            if self.disk is not None and stage.lock and not hold_open and kill_at is None and (
                    self.rng.random() < SIZES[self.args.size].get("fulldisk", self.spec["fulldisk"])
                    or (self.counter >= 2 and not self.disk_met)):
                # (At least one per cell: every run from the second on until one met the
                # full disk: SQLite reuses its WAL's space, so a run may not need any.)
                # Two kinds, in turn (finish()):
                # the disk fills before the run takes its keys, or after it took the keys of
                # the first half of its lines and before its sink wrote them (the commit
                # then fails, the write does not: the lock file is alone on the tmpfs).
                self.disk_episodes += 1
                disk_at = self.rng.uniform(0.3, 0.8)
                hold_open = True
        err = self.workdir / "stderr" / f"{run_id}.txt"
        undelivered = self.workdir / "undelivered" / f"{run_id}.txt"
        cmd = [self.args.sluice, "run", "-c", str(stage.config), "--ext-str", f"run={run_id}"]
        if self.args.undelivered:
            cmd += ["--undelivered", str(undelivered)]
        disk_kind = None
        if disk_at is not None:
            disk_kind = ("before the keys", "after the keys")[self.disk_episodes % 2]
            if disk_kind == "after the keys":
                # The first half is handed to the pipeline as soon as it is read.
                cmd += ["--batch-messages", str(max(1, (len(lines) - start) // 2))]
        env = dict(self.env, AWS_SDK_UA_APP_ID=run_id)
        if clock:
            env.update(shapes.faketime_env(clock))
        if hold_open:
            stdin = subprocess.PIPE
        else:
            stdin = open(self.input_file(stage, b, lines, start))
        stderr = open(err, "w")
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr,
                                env=env, cwd=self.workdir)
        rest = ""
        if hold_open:
            cut = len(lines) if disk_at is None else start + max(1, (len(lines) - start) // 2)
            proc.stdin.write("".join(lines[start:cut]).encode())
            proc.stdin.flush()
            rest = "".join(lines[cut:])
        else:
            stdin.close()
        stderr.close()
        handed = [json.loads(line) for line in lines[start:]]
        return {"proc": proc, "run": run_id, "stage": stage.name, "worker": worker, "batch": b,
                "attempt": attempt, "start_line": start, "lines": len(lines) - start,
                "keyed": sum(1 for m in handed if key_text(m.get("id"))),
                "uids": [m.get("uid") for m in handed],
                "kill_at": kill_at, "signal": sig.name if sig else None, "disk_at": disk_at,
                "clock": clock, "hot": bool(hot), "start": time.time(),
                "undelivered_path": undelivered, "err_path": err,
                "idle_holder": hold_open and disk_at is None, "rest": rest,
                "disk_kind": disk_kind}

    def finish(self, h, stage):
        """Waits for a run (stopping it at its kill time: SIGKILL, or SIGTERM and then up to
        TERM_WAIT for it to stop; filling the disk at its disk time, freed once it exited)
        and records its outcome: ok, failed, killed (SIGKILL) or stopped (SIGTERM)."""
        proc = h.pop("proc")
        killed = stopped = hung = False
        deadline = time.time() + RUN_TIMEOUT
        rest = h.pop("rest")
        if h["disk_at"] is not None:
            # The first half of the lines is in (and, "after the keys", their keys taken,
            # the sink holding them until its 1 s timer); the disk fills; "after the keys",
            # the sink's timer writes a file (its commit fails); then the rest.
            out = Path(self.res_out)
            seen = set(out.rglob("*.jsonl")) if out.exists() else set()
            try:
                proc.wait(timeout=h["disk_at"])
            except subprocess.TimeoutExpired:
                h["disk_filled"] = self.disk.fill()
                h["disk_full_at"] = time.time()
                if h["disk_kind"] == "after the keys":
                    end = time.time() + 3.0
                    while proc.poll() is None and time.time() < end:
                        if out.exists() and set(out.rglob("*.jsonl")) - seen:
                            h["disk_written_at"] = time.time()
                            break
                        time.sleep(0.01)
            try:
                proc.stdin.write(rest.encode())
                proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass
        try:
            if h["kill_at"] is not None and self.spec.get("kill_after_acquire"):
                self.wait_for_acquisition(proc, h)
            if h["kill_at"] is not None:
                proc.wait(timeout=max(0.0, h["start"] + h["kill_at"] - time.time()))
            else:
                proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            if h["kill_at"] is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                hung = True
            elif h["signal"] == "SIGTERM":
                proc.send_signal(signal.SIGTERM)
                h["term_at"] = time.time()
                try:
                    proc.wait(timeout=TERM_WAIT)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    self.fail(f"{h['run']} did not stop within {TERM_WAIT} s of SIGTERM")
                stopped = True
            else:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed = True
        finally:
            if h["disk_at"] is not None:
                self.disk.free()
        if hung:
            self.fail(f"{h['run']} did not finish within {RUN_TIMEOUT} s")
        h["end"] = time.time()
        h["pid"], h["code"] = proc.pid, proc.returncode
        if killed:
            h["outcome"] = "killed"
        elif stopped and proc.returncode != 0:
            h["outcome"] = "stopped"
        else:
            h["outcome"] = "ok" if proc.returncode == 0 else "failed"
        path = h.pop("undelivered_path")
        err = h.pop("err_path")
        h["undelivered"] = None
        if self.args.undelivered and h["outcome"] in ("failed", "stopped") and path.exists():
            h["undelivered"] = undelivered_lines(path)
        if stopped:
            h["stop"] = stop_report(err)
        if h.get("disk_full_at"):
            text = err.read_text(errors="replace") if err.exists() else ""
            h["disk_error"], h["disk_reserve_only"] = disk_lines(text)
            with self.lock:
                self.disk_met += h["disk_error"]
        with self.lock:
            self.runs.append(h)
            if h["outcome"] == "ok":
                stage.durations.append(h["end"] - h["start"])
        return h

    def wait_for_acquisition(self, proc, h):
        """Until the run's first acquisition the lock store applied (the DynamoDB proxy's
        log names its caller), or its exit; then its kill time is set a few ms later."""
        log = self.workdir / "proxy-dynamodb.jsonl"
        pos = 0
        while proc.poll() is None and time.time() < h["start"] + RUN_TIMEOUT / 2:
            with open(log) as f:
                f.seek(pos)
                chunk = f.read()
            end = chunk.rfind("\n") + 1
            pos += end
            for line in chunk[:end].splitlines():
                if f'"app":"{h["run"]}"' in line and '"class":"acquire"' in line \
                        and '"applied":true' in line:
                    with self.lock:
                        h["kill_at"] = time.time() - h["start"] + self.rng.uniform(0.0, 0.05)
                    return
            time.sleep(0.01)

    def attempt(self, stage, worker, b, attempt, lines, start, clock=None):
        return self.finish(self.spawn(stage, worker, b, attempt, lines, start, clock=clock), stage)


# cmd/src/commands/run.rs: "sluice: stopped by SIGTERM[, and the grace period (25s) ran out
# before the pipeline finished]: N lines read, M delivered[ (K not: listed in FILE)]; the
# first line not read: <stdin>:L" (or "; all input was read").
# What a run logs when its lock file's disk is full (SQLite's errors).
DISK_ERRORS = ("disk is full", "No space left", "disk I/O error")
# The SQLite store's line when it gave up its reserve so that a settlement could land: the disk
# was met, and the run may still end well (every key it delivered committed).
RESERVE_GIVEN_UP = "was given up to settle the locks"


def disk_lines(text):
    """(met the full disk, only through the reserve): a run whose only disk line is the reserve's
    settled everything it delivered and may exit 0; any other disk error must fail the run."""
    lines = [ln for ln in text.splitlines() if any(t in ln for t in DISK_ERRORS)]
    # A call the lock tries again ("trying again") is not a failure yet: what became of it
    # shows in a later line (or in the run's exit and the keys it left).
    final = [ln for ln in lines if "trying again" not in ln]
    return bool(lines), bool(lines) and all(RESERVE_GIVEN_UP in ln for ln in final)
STOP_LINE = re.compile(r"stopped by (SIG\w+)(, and the grace period \([^)]*\) ran out[^:]*)?: "
                       r"(\d+) lines? read, (\d+) delivered(?: \((\d+) not[^)]*\))?; "
                       r"(?:the first line not read: (\S+?):(\d+)|all input was read)")


def stop_report(err_path):
    """What a run stopped by SIGTERM said on stderr: {signal, out_of_time, read, delivered,
    not_delivered, next_line (None: all was read)}, or None (a build without signal
    handling dies of the signal at once)."""
    text = err_path.read_text(errors="replace") if err_path.exists() else ""
    m = STOP_LINE.search(re.sub(r"\x1b\[[0-9;]*m", "", text))
    if not m:
        return None
    return {"signal": m.group(1), "out_of_time": bool(m.group(2)), "read": int(m.group(3)),
            "delivered": int(m.group(4)), "not_delivered": int(m.group(5) or 0),
            "next_line": int(m.group(7)) if m.group(7) else None}


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

    def clock(self, worker, b, attempt):
        """The wall-clock offset of this attempt's host: in the `clock` mix, alternately
        ahead and behind (a batch is redelivered on the other clock); in `clock_past`, the
        first attempt of each batch runs past the tolerated skew."""
        spec = self.ctx.spec
        if not self.stage.lock:
            return None
        if spec.get("clock"):
            return spec["clock"][(worker + attempt) % len(spec["clock"])]
        if spec.get("clock_past") and attempt == 1:
            return spec["clock_past"][b % len(spec["clock_past"])]
        return None

    def deliver(self, worker, b, lines, first=None):
        ctx, stage = self.ctx, self.stage
        start, attempt, redelivered = 0, 0, False
        failures = Counter()
        while start < len(lines):
            attempt += 1
            if attempt > MAX_ATTEMPTS:
                ctx.fail(f"{stage.name} worker {worker} batch {b}: no success in {MAX_ATTEMPTS} attempts")
                return
            r, first = (first, None) if first else (
                ctx.attempt(stage, worker, b, attempt, lines, start,
                            clock=self.clock(worker, b, attempt)), None)
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
                if failures[at] >= ctx.dead_letter_after:
                    m = json.loads(lines[at])
                    with ctx.lock:
                        ctx.dead_letter.append({"uid": uid_of(m), "stage": stage.name,
                                                "worker": worker, "batch": b, "line": at + 1,
                                                "last_run": r["run"]})
                    start = at + 1
            # killed, stopped (SIGTERM: conservatively, as a crash, whatever it reported), or
            # failed without a report: again from where the batch stands


def parse_seconds(d):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", d)
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n


def plans_for(ctx, batches, workers, offset=0):
    """Each worker's (batch number, lines) in order. Two workers: each takes 60% of the
    batches, the middle 20% in both; the second goes backwards, so they reach the shared
    batches at about the same time and cross there. Batches are numbered from `offset`."""
    numbered = [(offset + i, b) for i, b in enumerate(batches)]
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
    """Whether this run ended with keys it could not settle ("N lock key(s) left pending in
    STORE: the store kept failing", keeper/mod.rs; "could not settle every lock" in builds
    before 2026-12): its messages' locks stayed pending after it exited."""
    path = workdir / "stderr" / f"{run_id}.txt"
    text = path.read_text(errors="replace") if path.exists() else ""
    return "lock key(s) left pending in" in text or "could not settle every lock" in text


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

EPOCH_MARK = "#epoch:"


def epoch_record(key):
    """An epoch record's name from its partition key value (`#epoch:OWNER:N`, under
    whatever prefix)."""
    return key[key.index(EPOCH_MARK):] if EPOCH_MARK in key else key


Commit = namedtuple("Commit", "run sent arrived answered ttl")


def made(commit, window, clock=0.0):
    """When a Commit was made, by the proxy's clock: its first sending, or the second its
    TTL counts from (its TTL less `window`, less the committer's clock offset), when that
    is earlier.

    The keeper makes a round's commits at once: it sets each TTL to its clock's reading
    rounded up to the second, plus the offset in whole seconds (kv_store/lock/ticket.rs
    commit_ttl, at keeper settle_due's `now`), then sends them, up to `concurrency` calls
    at a time. The rounding up (0 to 1 s) covers the time until a call leaves unless that
    crosses the next second: with `lock_acquire: 'epochs'` a round is a call per epoch
    (a key an epoch, often, in `recurring`: about a hundred calls), and the last ones
    leave up to a few hundred milliseconds after the first: in the retry_epoch cells at
    seeds 11 and 12, 11-19% of the commits were first sent after the second their TTL
    counts from, by up to 0.25 s (none in the other modes' cells). A taker takes a key
    once its clock's second reaches the TTL (`#ttl <= :now_s`, rounded down), so a take
    the TTL allowed came at least `window` after that second. That slack is read from
    the log (the TTL each call carries, `ttls`) rather than assumed: no more is allowed
    than the keeper's own TTL gives, and `late_sends` reports it (results.json
    `late_commit_sends`: a window shorter, counted from the first sending, than the
    docs' whole offset by that much). A log without TTLs gives the first sending."""
    if commit.ttl is None:
        return commit.sent
    return min(commit.sent, commit.ttl - window - clock)


class KeyTimes:
    """When each run took and committed each lock key, from the DynamoDB proxy's log
    (proxy.py): the evidence that a copy came after its key's window.

    `takes[key]`: (run, arrival, answer) of each call that the store applied and that took
    the key: an acquisition's TransactWriteItems, UpdateItem (a takeover, a key taken alone)
    or BatchExecuteStatement (less the keys whose statement failed); its arrival at the
    proxy (`t_in`) is before the store could apply it, its answer (`t`) after. A log without
    arrival times (an older proxy's) gives no takes.

    `commits[key]`: a Commit of each applied commit call naming the key: a
    TransactWriteItems (not one that only records a send's progress,
    `TransactWriteItems/record`) or BatchExecuteStatement (less failed statements), or,
    with `lock_acquire: 'epochs'`, the UpdateItem of an epoch record whose committed slots
    include the slot a run's acquisition wrote the key in: its run, when that commit was
    first sent (`sent`), its own arrival and answer, and the TTL it set. A commit is made
    once, with its TTL, and may be sent several times: the SDK sends the same request again
    after an attempt timeout or an error (up to its 30 s operation timeout), the store sends
    the keys left again (a cancelled transaction's, a throttled statement's, an epoch
    commit's after its slots moved, a statement's in a transaction). Every such call
    carries the TTL the keeper computed (the proxy logs it, `ttls`, applied or not), and a
    commit made again later (the keeper's next round after a failed call) carries a new
    one: `sent` is the earliest arrival of a call by the same run naming the key with the
    same TTL, whatever became of that call (held, refused, thrown back). Without a TTL in
    the log (an older proxy's), a call is its own commit, sent when it arrived."""

    def __init__(self, entries):
        self.takes, self.commits = defaultdict(list), defaultdict(list)
        placed = defaultdict(set)  # (epoch record, slot) -> keys written pending there
        sent = {}  # (run, key, ttl) -> the first arrival of a call carrying that commit
        calls = []  # (run, key, ttl, arrival, answer, applied) of every commit call
        epoch_calls = []  # the same of epoch records' commits, by record and slots

        def first(run, key, ttl, t_in):
            if ttl is not None:
                sent[(run, key, ttl)] = min(sent.get((run, key, ttl), t_in), t_in)

        for e in entries:
            if e.get("class") not in ("acquire", "commit"):
                continue
            run, failed = e.get("app"), set(e.get("statement_errors") or {})
            # A commit's arrival, when the log lacks it: its answer, as late as can be.
            t_in = e.get("t_in", e["t"])
            if e["class"] == "acquire":
                if not e.get("applied"):
                    continue
                for k, (record, slot) in (e.get("epochs") or {}).items():
                    placed[(epoch_record(record), slot)].add(k)
                if "t_in" in e:
                    for k in e.get("keys", []):
                        if EPOCH_MARK not in k and k not in failed:
                            self.takes[k].append((run, e["t_in"], e["t"]))
            elif str(e.get("op")).endswith("/record"):
                continue  # progress recorded (placements), not committed
            elif e.get("op") == "UpdateItem/commit":
                ttls = e.get("ttls") or {}
                epoch_calls.extend((run, epoch_record(k), e.get("slots", []), ttls.get(k), t_in,
                                    e["t"], bool(e.get("applied"))) for k in e.get("keys", []))
            else:
                ttls = e.get("ttls") or {}
                for k in e.get("keys", []):
                    first(run, k, ttls.get(k), t_in)  # a failed statement was sent all the same
                    calls.append((run, k, ttls.get(k), t_in, e["t"],
                                  bool(e.get("applied")) and k not in failed))
        for run, record, slots, ttl, t_in, t, applied in epoch_calls:
            for slot in slots:
                for k in placed.get((record, slot), ()):
                    first(run, k, ttl, t_in)
                    calls.append((run, k, ttl, t_in, t, applied))
        for run, k, ttl, t_in, t, applied in calls:
            if applied:
                self.commits[k].append(Commit(run, sent.get((run, k, ttl), t_in), t_in, t, ttl))

    def after_window(self, key, run, other, window, offset=None):
        """Whether one of two runs' copies came after the key's window, by the log: one run
        took the key only after the other's last take was answered, and each of its takes
        arrived at least `window` seconds (plus how far the committer's clock ran ahead of
        its own, by `offset`: {run: seconds}) after every commit of the key, by any run,
        that the store may have applied before one of those takes (one that arrived before
        the take's answer) was made (`made`). None when the log has no take of the key by
        one of the two runs, or no such commit (a key taken over pending); False when their
        takes interleave.

        From the commit's first sending, not from its answer: the window is the lock's
        from when the keeper made the commit (docs/exactly-once.md), and a commit held by a
        fault, or whose answer was lost and that the SDK sent again, lands seconds after
        its TTL was set; the key's window after the landing is shorter by that delay."""
        offset = offset or {}
        mine = [x for x in self.takes.get(key, []) if x[0] == run]
        theirs = [x for x in self.takes.get(key, []) if x[0] == other]
        if not mine or not theirs:
            return None
        if max(t for _, _, t in theirs) < min(t_in for _, t_in, _ in mine):
            late = mine
        elif max(t for _, _, t in mine) < min(t_in for _, t_in, _ in theirs):
            late = theirs
        else:
            return False
        taker = late[0][0]
        last_answer = max(t for _, _, t in late)
        before = [c for c in self.commits.get(key, []) if c.arrived < last_answer]
        if not before:
            return None
        took = min(t_in for _, t_in, _ in late)
        return all(took - made(c, window, offset.get(c.run, 0.0))
                   >= window + max(0.0, offset.get(c.run, 0.0) - offset.get(taker, 0.0))
                   for c in before)

    def late_sends(self, window, offset=None):
        """How far after the second its TTL counts from each commit was first sent, where
        it was (`made`): {(run, key, TTL): seconds}, for results.json."""
        offset = offset or {}
        out = {}
        for k, commits in self.commits.items():
            for c in commits:
                late = c.sent - made(c, window, offset.get(c.run, 0.0))
                if late > 0:
                    out[(c.run, k, c.ttl)] = late
        return out

    def of(self, key):
        """{run: {"took": [arrivals], "committed": [[first sent, landed, TTL], ...]}} of
        `key` (unexplained.json): each applied commit call's first sending (of the commit
        it carried), its answer, and the TTL it set (epoch seconds, by the committer's
        clock; None from an older proxy's log)."""
        out = defaultdict(lambda: {"took": [], "committed": []})
        for run, t_in, _ in self.takes.get(key, []):
            out[run]["took"].append(t_in)
        for c in self.commits.get(key, []):
            out[c.run]["committed"].append([c.sent, c.answered, c.ttl])
        return dict(out)


def attribute(copies, expected, id_of, locks, runs, killed, stopped, takeovers, unsettled,
              ambiguous, ttl_gap=None, key_times=None, ttl_window=None):
    """Every copy beyond one per unit, by cause: Counter of causes, the crash-window copies
    per stopped run, the unexplained ones, {unit: [runs of its copies]}.

    `expected` maps each unit to its message's uid (the lock key is the uid's id).

    After the key's TTL (the `recurring` pipeline: `ttl_gap` given), processed again by
    design: a copy whose run is a window apart from the run of every other copy. Two runs
    are when the later took the key, by the lock store's log (`key_times`, a KeyTimes),
    more than `ttl_window` (the lock's window after a commit) after every commit of it
    before (KeyTimes.after_window), whichever of the two copies is the extra one; where the
    log cannot tell (no take of the key by one of the runs, or no commit before the later
    one's), when one run started more than `ttl_gap` after the other ended."""
    by_pid = defaultdict(list)
    times, offset = {}, {}
    for r in runs:
        by_pid[r["pid"]].append(r["run"])
        times[r["run"]] = (r["start"], r["end"])
        offset[r["run"]] = clock_offset_s(r.get("clock"))

    def ttl_passed(key, run, other):
        """Whether one of the two runs' copies came after the key's TTL of the other's."""
        if key_times is not None and ttl_window is not None:
            found = key_times.after_window(key, run, other, ttl_window, offset)
            if found is not None:
                return found
        if run not in times or other not in times:
            return False
        (start, end), (o_start, o_end) = times[run], times[other]
        return start > o_end + ttl_gap or o_start > end + ttl_gap
    per_id = defaultdict(list)
    for i, run, _ in copies:
        per_id[i].append(run)
    dup, crash_by_run, unexplained = Counter(), Counter(), []
    for i, uid in expected.items():
        runs_of = per_id.get(i, [])
        if len(runs_of) <= 1:
            continue
        key = f"{PREFIX}:{key_text(id_of[uid])}"
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
                # After the key's TTL: this run's copy is a window of its own, apart from
                # every other copy's (whichever came first: an earlier run that committed,
                # then a later one that took the key as new and committed last, is the
                # same). A copy inside another's window is not, whatever other windows
                # the key had.
                if ttl_gap is not None and all(ttl_passed(key, run, o)
                                               for o in set(runs_of) - {run}):
                    dup["after_ttl"] += 1
                    extra -= 1
                elif run in killed:
                    dup["crash"] += 1
                    crash_by_run[run] += 1
                    extra -= 1
                elif run in stopped:
                    dup["stop"] += 1
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
                unexplained.append({"unit": i, "key": key, "copies": runs_of,
                                    "committer": committer,
                                    "killed": sorted(set(runs_of) & (killed | stopped))})
                if key_times is not None:
                    unexplained[-1]["lock_times"] = key_times.of(key)
    return dup, crash_by_run, unexplained, per_id


def judge_units(sink, copies, expected, bad_units, dead, ctx, locks, lock_runs, killed,
                stopped, takeovers, unsettled, entries, ttl_gap, key_times=None,
                ttl_window=None):
    """One sink's counts, by unit: {copies, once, duplicates and their causes, lost, bad
    delivered, stray, dropped by the emulator, crash-window copies per run, unexplained}."""
    ambiguous = Counter()
    for e in entries:
        if e.get("fault") in AFTER_FAULTS and e.get("applied"):
            for i in e.get("ids", []):
                ambiguous[(i, e.get("app"))] += 1  # app None: no app/ in its user agent
    dup, crash_by_run, unexplained, per_id = attribute(
        copies, expected, ctx.id_of, locks, lock_runs, killed, stopped, takeovers, unsettled,
        ambiguous, ttl_gap, key_times, ttl_window)
    present = set(per_id)
    acknowledged = set()
    for e in entries:
        if e.get("applied") and not e.get("replay"):
            acknowledged.update(set(e.get("ids", [])) - set(e.get("refused", [])) - {None})
    return {
        "sink": sink, "copies": len(copies),
        "once": sum(1 for i in expected if len(per_id.get(i, [])) == 1),
        "duplicates": sum(dup.values()), "dup": dict(dup),
        "lost": sorted(i for i, uid in expected.items() if i not in present and uid not in dead),
        "bad_delivered": sorted(i for i in bad_units if i in present),
        "stray": sorted(present - set(expected) - set(bad_units)),
        "dropped": sorted(acknowledged - present) if sink != "dynamodb" else [],
        "crash_by_run": dict(crash_by_run), "unexplained": unexplained,
        "per_id": per_id,
    }


def judge_content(sink, copies, ctx, work, dead, killed, stopped, entries):
    """The `identical` pipeline's sink, counted by content: each content (`cid`) must be
    there as often as there are messages with it (messages without a key have contents of
    their own, which must not be there). An extra copy is explained ("unprovable") while
    the extras of a content stay within the chances its messages had to be sent twice
    without the send being able to prove the first: each stopped run that was handed one
    of them, and each ambiguous sink answer that carried the content."""
    cid_of = work["shape"]["cid"]
    want = Counter(cid_of[u] for u in work["valid"] if u not in dead)
    observed = Counter(u for u, _, _ in copies)
    chances = Counter()
    for r in ctx.runs:
        if r["run"] in killed or r["run"] in stopped:
            for u in set(r.get("uids") or []):
                if u in work["valid"]:
                    chances[cid_of[u]] += 1
    for e in entries:
        if e.get("fault") in AFTER_FAULTS and e.get("applied"):
            for i in e.get("ids", []):
                chances[i] += 1
    lost, unexplained = [], []
    dup = Counter()
    for cid, n in want.items():
        got = observed.get(cid, 0)
        if got < n:
            lost.extend([cid] * (n - got))
        elif got > n:
            extra = got - n
            ok = min(extra, chances[cid])
            dup["unprovable"] += ok
            if extra > ok:
                dup["unattributed"] += extra - ok
                unexplained.append({"unit": cid, "messages": n, "copies": got,
                                    "chances": chances[cid],
                                    "runs": [r for u, r, _ in copies if u == cid]})
    bad_cids = {cid_of[u] for u in work["bad"] if u in cid_of}
    all_cids = {cid_of[u] for u in work["valid"] | work["bad"] if u in cid_of}
    return {
        "sink": sink, "copies": len(copies),
        "once": sum(1 for cid, n in want.items() if observed.get(cid, 0) == n),
        "duplicates": sum(dup.values()), "dup": dict(dup), "lost": lost,
        "bad_delivered": sorted(c for c in bad_cids if observed.get(c)),
        "stray": sorted(set(observed) - all_cids), "dropped": [],
        "crash_by_run": {}, "unexplained": unexplained, "per_id": {},
    }


CLOCK_REFUSAL = re.compile(r"this host's clock is at least [\d.]+ s (ahead of|behind) ")


def clock_refused(text):
    """Whether a run's stderr has the lock's refusal to take keys for this host's clock
    (transforms/src/meta/kv_store_lock/acquire.rs, check_clock), not just its warning."""
    return bool(CLOCK_REFUSAL.search(re.sub(r"\x1b\[[0-9;]*m", "", text)))


def analyse(ctx, res, emu, work, proxies, stages):
    p, workdir, spec = ctx.p, ctx.workdir, ctx.spec
    valid, id_of, bad, shape = work["valid"], work["id_of"], work["bad"], work["shape"]
    ctx.id_of = id_of
    logs, fault_counts, summaries, windows = {}, Counter(), {}, []
    for name, px in proxies.items():
        entries, summary, w = px.read()
        logs[name] = entries
        summaries[name] = summary
        windows.extend(w)
        for k, v in summary.items():
            if not k.endswith(":None"):
                fault_counts[k] += v
    final_stage = stages[-1]
    table_ = lock_table(p, res, emu)
    (workdir / "locks.json").write_text(json.dumps(table_, indent=0, sort_keys=True))
    locks = {k: (r.get("status"), r.get("owner")) for k, r in table_.items()}
    lock_runs = [r for r in ctx.runs if r["stage"] == final_stage.name]
    killed = {r["run"] for r in ctx.runs if r["outcome"] == "killed"}
    stopped = {r["run"] for r in ctx.runs if r["outcome"] == "stopped"}
    takeovers = {(key, r["run"]) for r in lock_runs for key in lease_takeovers(workdir, r["run"])}
    unsettled = {r["run"] for r in lock_runs if left_pending(workdir, r["run"])}
    dead = {d["uid"] for d in ctx.dead_letter}
    if p == "fanout":
        def units(uids):
            return {f"{u}#{k}": u for u in uids for k in range(shape["parts"].get(u, 0))}
    else:
        def units(uids):
            return {u: u for u in uids}
    expected, bad_units = units(valid), units(bad)
    ttl_gap = ttl_window = key_times = None
    if p == "recurring":
        # The window after a commit; across run boundaries (a run's acquisitions follow its
        # start, its commits precede its end), with the clock skew and the second the
        # lock's TTL rounds a commit's instant up by.
        ttl_window = recurring_window_s(spec)
        ttl_gap = ttl_window + skew_s(spec) + 1.0
        key_times = KeyTimes(logs.get("dynamodb", []))
    sinks = []
    for sink in SINKS[p]:
        proxy = SINK_PROXY.get(sink)
        # The hop's final sink is a file: the moto proxy's calls are the producer's.
        entries = ([e for e in logs.get(proxy, []) if e.get("class") == "sink"]
                   if proxy and p != "hop" else [])
        copies = sink_copies(sink, res, emu, entries)
        if p == "identical":
            j = judge_content(sink, copies, ctx, work, dead, killed, stopped, entries)
        else:
            j = judge_units(sink, copies, expected, bad_units, dead, ctx, locks, lock_runs,
                            killed, stopped, takeovers, unsettled, entries, ttl_gap,
                            key_times, ttl_window)
        j["copy_list"] = copies
        sinks.append(j)

    delivered_uids = set()
    for j in sinks:
        for i in j["per_id"]:
            delivered_uids.add(str(i).split("#")[0])
    if p == "identical":
        cid_of = shape["cid"]
        seen = {u for j in sinks for u, _, _ in j["copy_list"]}
        delivered_uids = {u for u, c in cid_of.items() if c in seen}
    rejected = dead & bad
    dead_valid = sorted(dead & valid)
    bad_silent = sorted(bad - dead - delivered_uids)
    mid_dups = None
    if p == "hop":
        held = Counter(uid_of(m) for recs in work["mid"].values() for m in recs)
        mid_dups = sum(c - 1 for c in held.values() if c > 1)
        acknowledged = set()
        for e in logs.get("moto", []):
            if e.get("class") == "sink" and e.get("applied") and not e.get("replay"):
                acknowledged.update(set(e.get("ids", [])) - set(e.get("refused", [])))
        sinks[0]["dropped"] = sorted(acknowledged - set(held))
    bad_keys = {f"{PREFIX}:{key_text(id_of[u])}" for u in bad if key_text(id_of[u])}
    pending = sorted(k for k, (st, _) in locks.items() if st != "committed" and k not in bad_keys)
    # A full disk that outlasted a run's settling (the disk is freed only after the run
    # exited) leaves the keys of what it delivered pending: the run said so and failed, and
    # listed only what it did not deliver, which the source redelivers. Such a key is
    # explained when its message is once at every sink.
    disk_left = set()
    if ctx.disk is not None:
        met = {r["pid"] for r in ctx.runs if r.get("disk_full_at") and r["run"] in unsettled}
        once = {u for u in valid if all(len(j["per_id"].get(u, [])) == 1 for j in sinks)}
        once_keys = {f"{PREFIX}:{key_text(id_of[u])}" for u in once if key_text(id_of[u])}
        for k in pending:
            owner = locks[k][1] or ""
            try:
                pid = int(owner.split("/")[1])
            except (IndexError, ValueError):
                continue
            if pid in met and k in once_keys:
                disk_left.add(k)
        pending = [k for k in pending if k not in disk_left]

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
    dup = Counter()
    for j in sinks:
        dup.update(j["dup"])
    crash_by_run = Counter()
    for j in sinks:
        crash_by_run.update(j["crash_by_run"])
    lost_n = sum(len(j["lost"]) for j in sinks)

    # Runs past the clock bound: each must have refused (non-zero exit, the clock error),
    # sent nothing and taken no key.
    past = [r for r in lock_runs if r.get("clock") and spec.get("clock_past")]
    refused, past_bad = 0, []
    app_acquired = {e.get("app") for e in logs.get("dynamodb", [])
                    if e.get("class") == "acquire" and e.get("applied")}
    senders = {run for j in sinks for _, run, _ in j["copy_list"]}
    for r in past:
        text = (workdir / "stderr" / f"{r['run']}.txt").read_text(errors="replace")
        what = []
        if r["outcome"] == "ok":
            what.append("exited 0")
        if not clock_refused(text) and r["outcome"] == "failed":
            what.append("failed without the clock error")
        if r["run"] in senders:
            what.append("sent copies")
        if r["run"] in app_acquired:
            what.append("took keys")
        if what:
            past_bad.append(f"{r['run']} (clock {r['clock']}): " + ", ".join(what))
        elif r["outcome"] == "failed":
            refused += 1
    # Keys taken over from another owner's pending lock (a crashed or stopped run's, or a
    # live one's), from the acquisitions' log: in the clock mixes, how many across clocks.
    owner_run = {}
    for r in ctx.runs:
        owner_run.setdefault(r.get("pid"), []).append(r)
    run_of = {r["run"]: r for r in ctx.runs}
    takeover_n = cross_clock = 0
    for e in logs.get("dynamodb", []):
        old = e.get("old") or {}
        if e.get("class") != "acquire" or not e.get("applied") or old.get("status") not in ("pending", "epoch"):
            continue
        try:
            pid = int(str(old.get("owner", "")).split("/")[1])
        except (IndexError, ValueError):
            continue
        taker = run_of.get(e.get("app"))
        if taker is None or taker.get("pid") == pid:
            continue
        takeover_n += 1
        before = [r for r in owner_run.get(pid, []) if r["start"] <= taker["start"]]
        if before and taker.get("clock") and before[-1].get("clock") != taker.get("clock"):
            cross_clock += 1
    # Runs with their clock offset within the bound that refused anyway.
    within = [r["run"] for r in lock_runs if r.get("clock") and not spec.get("clock_past")
              and clock_refused((workdir / "stderr" / f"{r['run']}.txt").read_text(errors="replace"))]

    # Runs stopped by SIGTERM: what they reported (a build with signal handling) must agree
    # with their --undelivered list.
    stop_bad = []
    for r in ctx.runs:
        st = r.get("stop")
        if r["outcome"] != "stopped" or not st:
            continue
        listed = r.get("undelivered") or []
        next_line = st["next_line"] if st["next_line"] is not None else r["lines"] + 1
        if (st["read"] - st["delivered"] != len(listed) or st["read"] > r["lines"]
                or next_line != st["read"] + 1 or any(n > st["read"] for n in listed)):
            stop_bad.append(f"{r['run']}: {st['read']} read, {st['delivered']} delivered, "
                            f"first not read {st['next_line']}, {len(listed)} listed "
                            f"undelivered (up to line {max(listed, default=0)}), "
                            f"{r['lines']} handed")
    # Runs whose disk filled while they ran.
    disk_runs = [r for r in ctx.runs if r.get("disk_full_at")]
    disk_ok = []
    for r in disk_runs:
        text = (workdir / "stderr" / f"{r['run']}.txt").read_text(errors="replace")
        r["disk_error"], r["disk_reserve_only"] = disk_lines(text)
        if r["outcome"] == "ok" and r["disk_error"] and not r["disk_reserve_only"]:
            disk_ok.append(r["run"])

    # Keys recurring after their TTL: each window's message in an object of its own.
    recurring_keys = None
    if p == "recurring":
        by_key = defaultdict(dict)
        for u in valid:
            by_key[id_of[u]][shape["phase"][u]] = u
        recurring_keys = {"keys": 0, "apart": 0, "together": []}
        for k, ph in by_key.items():
            if len(ph) < 2:
                continue
            recurring_keys["keys"] += 1
            for j in sinks:
                objs = [{o for u, _, o in j["copy_list"] if u == ph[n]} for n in (0, 1)]
                if objs[0] and objs[1]:
                    if objs[0] & objs[1]:
                        recurring_keys["together"].append((j["sink"], k))
                    else:
                        recurring_keys["apart"] += 1

    # Commits first sent after the second their TTL counts from (KeyTimes.late_sends).
    late_sends = None
    if key_times is not None:
        late = key_times.late_sends(ttl_window, {r["run"]: clock_offset_s(r.get("clock"))
                                                 for r in lock_runs})
        late_sends = {"commits": len(late), "max_s": round(max(late.values(), default=0.0), 4)}

    row = {
        "pipeline": p, "mix": ctx.mix, "messages": len(valid) + len(bad),
        "deliveries": ctx.deliveries, "copies": sum(j["copies"] for j in sinks),
        "once": sum(j["once"] for j in sinks),
        "duplicates": sum(dup.values()), "dup_crash": dup["crash"], "dup_stop": dup["stop"],
        "dup_ambiguous": dup["ambiguous"], "dup_lease": dup["lease"],
        "dup_unsettled": dup["unsettled"], "unsettled_runs": len(unsettled),
        "dup_unprovable": dup["unprovable"] if p == "identical" else None,
        "dup_after_ttl": dup["after_ttl"] if p == "recurring" else None,
        "dup_unattributed": dup["unattributed"], "lost": lost_n,
        "sinks": ({j["sink"]: {"copies": j["copies"], "duplicates": j["duplicates"],
                               "lost": len(j["lost"])} for j in sinks}),
        "rejected": len(rejected), "dead_lettered_valid": len(dead_valid),
        "runs": len(ctx.runs), "crashes": outcomes["killed"] + outcomes["stopped"],
        "sigterms": outcomes["stopped"], "failed_runs": outcomes["failed"],
        "redelivered_ok": ctx.redelivered_ok,
        "faults": sum(fault_counts.values()), "fault_counts": dict(fault_counts),
        # By call (X-Amz-Target's operation) and fault: which calls the faults met.
        "fault_ops": dict(Counter(f"{e.get('op')}:{e['fault']}" for es in logs.values()
                                  for e in es if e.get("fault"))),
        "windows": len(windows_hit), "pending_locks": len(pending),
        "waited_out": sum(waited_out(workdir, r["run"]) for r in lock_runs),
        "workers": ctx.workers,
        "acquire_per_msg": per_msg("acquire"), "commit_per_msg": per_msg("commit"),
        "renew_per_msg": per_msg("renew"), "lock_read_per_msg": per_msg("lock_read"),
        "through_lock": through_lock,
        "keyed_through_lock": keyed_through_lock,
        "mid_dups": mid_dups, "max_crash_dups_per_run": max(crash_by_run.values(), default=0),
        "clock_refused": refused if spec.get("clock_past") else None,
        "clock_runs": sum(1 for r in lock_runs if r.get("clock")) if (
            spec.get("clock") or spec.get("clock_past")) else None,
        "takeovers": takeover_n, "cross_clock_takeovers": cross_clock,
        "disk_full": (f"{len(disk_runs)}/{sum(1 for r in disk_runs if r['outcome'] != 'ok')}"
                      if ctx.disk is not None else None),
        "disk_left_pending": len(disk_left) if ctx.disk is not None else None,
        "disk_kinds": ", ".join(f"{n} {k}" for k, n in sorted(Counter(
            r["disk_kind"] for r in disk_runs if r["disk_error"]).items())),
        "disk_met": sum(1 for r in disk_runs if r["disk_error"]),
        "disk_reserve": sum(1 for r in disk_runs if r.get("disk_reserve_only")),
        "hot_runs": sum(1 for r in ctx.runs if r.get("hot")) if ctx.hot_rate else None,
        "recurring": recurring_keys, "late_commit_sends": late_sends,
        "scaleout": work.get("scaleout"),
        "elapsed_s": round(ctx.elapsed, 1), "errors": list(ctx.errors),
    }
    problems = list(ctx.errors)
    for j in sinks:
        at = f" at {j['sink']}" if len(sinks) > 1 else ""
        if j["dropped"]:
            problems.append(f"the emulator acknowledged {len(j['dropped'])} records{at} it does "
                            f"not hold (an emulator defect, not a loss by sluice), e.g. "
                            f"{j['dropped'][:5]}")
        if j["lost"]:
            problems.append(f"{len(j['lost'])} lost{at}, e.g. {j['lost'][:5]}")
        if j["bad_delivered"]:
            problems.append(f"{len(j['bad_delivered'])} messages without a key were delivered"
                            f"{at}: {j['bad_delivered']}")
        if j["stray"]:
            problems.append(f"{len(j['stray'])} units{at} that were never sent, e.g. {j['stray'][:5]}")
        if spec.get("control"):
            continue
        d = Counter(j["dup"])
        allowed = d["unprovable"] + d["after_ttl"]
        if j["sink"] in STRICT_SINKS and j["duplicates"] > allowed:
            problems.append(
                f"{j['duplicates'] - allowed} duplicates{at} (crash {d['crash']}, SIGTERM "
                f"{d['stop']}, ambiguous {d['ambiguous']}, lease {d['lease']}, left pending "
                f"{d['unsettled']}, unattributed {d['unattributed']})"
                + (f", e.g. {j['unexplained'][:3]}" if j["unexplained"] else ""))
        elif d["unattributed"]:
            problems.append(f"{d['unattributed']} unattributed duplicates{at}, e.g. "
                            f"{j['unexplained'][:3]}")
        over = {r: n for r, n in j["crash_by_run"].items() if n > call_max}
        if j["sink"] not in STRICT_SINKS and over:
            problems.append(f"crash-window duplicates of more than one call ({call_max} "
                            f"records) in one run{at}: {over}")
    if dead_valid:
        problems.append(f"{len(dead_valid)} messages with a key failed {ctx.dead_letter_after} "
                        f"attempts in a row and were dead-lettered, e.g. {dead_valid[:5]}")
    if bad_silent:
        problems.append(f"{len(bad_silent)} messages without a key were neither reported "
                        f"undelivered nor delivered (dropped silently): {bad_silent}")
    if pending:
        problems.append(f"{len(pending)} locks left pending, e.g. {pending[:5]}")
    if past_bad:
        problems.append(f"{len(past_bad)} runs past the clock bound did not refuse cleanly: "
                        + "; ".join(past_bad[:5]))
    if within:
        problems.append(f"{len(within)} runs with a clock within the bound refused: {within[:5]}")
    if stop_bad:
        problems.append(f"{len(stop_bad)} runs stopped by SIGTERM reported what they read and "
                        f"delivered unlike their --undelivered list: " + "; ".join(stop_bad[:3]))
    if disk_ok:
        problems.append(f"{len(disk_ok)} runs exited 0 although their disk filled and they "
                        f"logged it: {disk_ok[:5]}")
    if recurring_keys and recurring_keys["together"]:
        problems.append(f"{len(recurring_keys['together'])} recurring keys left both windows' "
                        f"messages in one object: {recurring_keys['together'][:5]}")
    row["problems"] = problems
    unexplained = [u for j in sinks for u in j["unexplained"]]
    (workdir / "unexplained.json").write_text(json.dumps(unexplained, indent=1, default=str))
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


def proxy_faults(p, mix, spec, which):
    """The faults of one proxy of a cell: `dynamodb` (the lock store's faults, and the sink's
    when the pipeline writes to DynamoDB), `moto` (Kinesis and Firehose: the sink's and the
    read-back's) or `gcs` (the sink's). The fan-out meets per-record throttling in every mix
    but `clean`: a record fails alone 25% of the time, and a quarter of the runs are on a
    "hot shard", where the same records fail on every attempt."""
    f = spec["faults"]
    if which == "dynamodb":
        out = {k: v for k, v in f.items() if k != "read" and (k != "sink" or "dynamodb" in SINKS[p])}
    elif which == "moto":
        out = {k: v for k, v in f.items() if k in ("sink", "read")}
        if p == "fanout" and spec.get("base", mix) != "clean":
            sink = dict(out.get("sink", {}))
            sink["partial"] = max(sink.get("partial", 0.0), 0.25)
            out["sink"] = sink
            out["hot"] = {"suffix": "-hot", "records": 0.3}
    else:
        out = {k: v for k, v in f.items() if k == "sink"}
    return out


def skipped_row(p, mix, why, fail=False):
    """A cell not run: skipped (the full disk without root), or failed for want of what it
    needs (libfaketime that offsets sluice's clock)."""
    return {"pipeline": p, "mix": mix, "skipped": why, "problems": [why] if fail else [],
            "messages": 0, "through_lock": 0, "crashes": 0, "sigterms": 0, "errors": []}


def run_one(args, emu, p, mix, seed):
    tag = f"{p[:2]}{p[-2:]}{mix[:2]}{mix[-1]}{seed % 100000:05d}".replace("_", "")
    workdir = Path(args.out) / f"{p}-{mix}"
    if workdir.exists():
        shutil.rmtree(workdir)
    for d in ("stderr", "batches", "undelivered"):
        (workdir / d).mkdir(parents=True)
    size = SIZES[args.size]
    n = args.messages or size["messages"]
    spec = MIXES[mix]
    control = bool(spec.get("control"))
    if (spec.get("clock") or spec.get("clock_past")) and args.faketime_error:
        return skipped_row(p, mix, args.faketime_error, fail=True)
    disk = None
    if spec.get("fulldisk"):
        why = shapes.FullDisk.available()
        if why:
            # Not run is not passed: only an explicit waiver lets the campaign go green without it.
            waived = os.environ.get("FAULTS_WAIVE_FULLDISK") == "1"
            return skipped_row(p, mix, why + ("" if waived else
                                              " (FAULTS_WAIVE_FULLDISK=1 to run without it)"),
                               fail=not waived)
        disk = shapes.FullDisk(workdir / "lockfs")
        disk.mount()
    try:
        return run_cell(args, emu, p, mix, seed, tag, workdir, size, n, spec, control, disk)
    finally:
        if disk is not None:
            disk.free()
            disk.unmount()


def run_cell(args, emu, p, mix, seed, tag, workdir, size, n, spec, control, disk):
    res = create_resources(p, tag, emu, workdir, control, lockdir=disk and disk.dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION=REGION,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    env.pop("SLUICE_LOG", None)  # the default: warnings (the lock's takeover warning)
    for k in ("LD_PRELOAD", "FAKETIME"):
        env.pop(k, None)
    sinks = set(SINKS[p])
    proxies = {}
    if (p in DYNAMODB_LOCK and p != "hop") or "dynamodb" in sinks:
        proxies["dynamodb"] = Proxy(emu.ddb, proxy_faults(p, mix, spec, "dynamodb"),
                                    seed, workdir, "dynamodb")
        env["AWS_ENDPOINT_URL_DYNAMODB"] = proxies["dynamodb"].url
    if sinks & {"kinesis", "firehose"} or p == "hop":
        proxies["moto"] = Proxy(emu.moto, proxy_faults(p, mix, spec, "moto"),
                                seed + 1, workdir, "moto")
        env["AWS_ENDPOINT_URL_KINESIS"] = env["AWS_ENDPOINT_URL_FIREHOSE"] = proxies["moto"].url
    if "gcs" in sinks:
        # Only the sink's faults: Cloud Storage is not the lock store.
        proxies["gcs"] = Proxy(emu.gcs, proxy_faults(p, mix, spec, "gcs"), seed + 2, workdir, "gcs")
        env["STORAGE_EMULATOR_HOST"] = proxies["gcs"].url
    bad_keys = args.undelivered and not control
    phases, valid, id_of, bad, dups, shape = workload(n, size["batch"], seed, tag, bad_keys, p)
    texts = configs(p, res, spec)
    stages = []
    for name, text in texts.items():
        path = workdir / f"config-{name}.jsonnet" if len(texts) > 1 else workdir / "config.jsonnet"
        path.write_text(text)
        stages.append(Stage(name, path, lock=not control and name != "producer"))
    ctx = Context(args, p, mix, workdir, env, bad)
    ctx.batch = size["batch"]
    ctx.disk = disk
    ctx.res_out = res["out"]
    if p == "fanout" and spec.get("base", mix) != "clean":
        ctx.hot_rate = 0.25
        ctx.dead_letter_after = DEAD_LETTER_AFTER_FANOUT
    workers = PIPELINE_WORKERS.get(p, spec["workers"])
    ctx.workers = SCALEOUT_CONSUMERS if p == "scaleout" else (2 if spec.get("idle") else workers)
    work = {"valid": valid, "id_of": id_of, "bad": bad, "shape": shape}
    lines = [[[json.dumps(m) + "\n" for m in batch] for batch in batches] for batches in phases]
    plans = [plans_for(ctx, ls, workers, offset=10000 * ph) for ph, ls in enumerate(lines)]
    ctx.deliveries = sum(len(ls) for ph in plans for plan in ph for _, ls in plan)
    ctx.t_start = time.time()
    if p == "hop":
        run_stage(ctx, stages[0], plans[0])
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
    elif p == "scaleout":
        stage = stages[0]
        deliveries = [m for batches in phases for batch in batches for m in batch]
        ctx.deliveries = len(deliveries)

        def deliver(worker, b, ls):
            Runner(ctx, stage, worker, []).deliver(worker, b, ls)

        # An event source mapping's batches: a quarter of the cell's (each shard holds a
        # quarter of the records), so that every shard is read in several.
        feed = shapes.ScaleOut(client("kinesis", emu.kinesalite), res["src"], deliveries,
                               max(5, size["batch"] // 4), deliver, random.Random(seed),
                               consumers=SCALEOUT_CONSUMERS)
        for e in feed.run():
            ctx.fail(e)
        work["scaleout"] = {"shards_read": len(feed.shard_index), "events": feed.events}
        (workdir / "scaleout.json").write_text(json.dumps(work["scaleout"], indent=1))
    else:
        for ph, phase_plans in enumerate(plans):
            if ph:
                # The next window of the recurring keys: after the last run of the previous
                # one ended, its keys' TTL and the skew, and a margin (TTLs are whole seconds).
                with ctx.lock:
                    last = max((r["end"] for r in ctx.runs), default=time.time())
                time.sleep(max(0.0, last + recurring_ttl_s(spec) + skew_s(spec) + 2.0 - time.time()))
            idle = ()
            if spec.get("idle"):
                idle = {phase_plans[0][i][0] for i in idle_batches(ctx, len(phase_plans[0]))}
            run_stage(ctx, stages[0], phase_plans, idle)
    ctx.elapsed = time.time() - ctx.t_start
    for px in proxies.values():
        px.stop()
    row = analyse(ctx, res, emu, work, proxies, stages)
    row["dup_deliveries_in_input"] = dups
    runs = [{k: v for k, v in r.items() if k != "uids"} for r in ctx.runs]
    (workdir / "runs.json").write_text(json.dumps(runs, indent=0, default=str))
    return row


COLUMNS = [("pipeline", "pipeline"), ("mix", "faults"), ("workers", "workers"),
           ("messages", "messages"), ("deliveries", "deliveries"), ("copies", "in sink"),
           ("per_sink", "per sink: copies/dups/losses"),
           ("duplicates", "duplicates"), ("dup_crash", "crash window"),
           ("dup_stop", "SIGTERM window"),
           ("dup_ambiguous", "ambiguous"), ("dup_lease", "lease expired"),
           ("dup_unsettled", "left pending"), ("dup_unprovable", "unprovable"),
           ("dup_after_ttl", "after TTL"),
           ("dup_unattributed", "unattributed"), ("lost", "losses"), ("rejected", "rejected"),
           ("mid_dups", "hop: mid-stream dups"), ("runs", "runs"), ("crashes", "crashes"),
           ("sigterms", "of them SIGTERM"),
           ("failed_runs", "failed runs"), ("redelivered_ok", "redelivered ok"),
           ("faults", "faults injected"), ("windows", "outage windows"),
           ("waited_out", "waited out"), ("reached", "class reached"),
           ("acquire_per_msg", "acquires/msg"), ("commit_per_msg", "commits/msg"),
           ("elapsed_s", "elapsed s")]


def reached(r):
    """What a cell's own class came to (the newer mixes and pipelines), in a few words."""
    out = []
    if r.get("clock_runs") is not None:
        mix = MIXES.get(r["mix"], {})
        if mix.get("clock_past"):
            out.append(f"{r['clock_refused']} of {r['clock_runs']} runs past the clock bound "
                       f"refused")
        else:
            out.append(f"{r['clock_runs']} runs at {'/'.join(mix.get('clock', []))}, "
                       f"{r['cross_clock_takeovers']} keys taken over across clocks")
    if r.get("disk_full") is not None:
        full, failed = r["disk_full"].split("/")
        out.append(f"disk filled in {full} runs, met by {r['disk_met']} ({r['disk_kinds']}), "
                   f"{r.get('disk_reserve', 0)} settled on the reserve, "
                   f"{failed} failed, {r['disk_left_pending']} delivered keys left pending")
    if r.get("hot_runs") is not None:
        out.append(f"{r['hot_runs']} runs on a hot shard")
    if r.get("recurring"):
        out.append(f"{r['recurring']['apart']} recurring keys in two objects")
    if r.get("scaleout"):
        out.append(f"{r['scaleout']['shards_read']} shards read by {r['workers']} consumers, "
                   f"resharded")
    return "; ".join(out) or None


def table(rows):
    head = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in COLUMNS) + "|"
    lines = [head, sep]
    for r in rows:
        r = dict(r)
        if r.get("skipped"):
            cells = [r["pipeline"], f"{r['mix']}: skipped ({r['skipped']})"] + ["-"] * (len(COLUMNS) - 2)
            lines.append("| " + " | ".join(cells) + " |")
            continue
        if len(r.get("sinks") or {}) > 1:
            r["per_sink"] = ", ".join(f"{k} {v['copies']}/{v['duplicates']}/{v['lost']}"
                                      for k, v in r["sinks"].items())
        r["reached"] = reached(r)
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


def report_cell(p, m, row):
    """One line per cell as it ends."""
    if row.get("skipped"):
        print(f"{p:13} {m:10} {'FAILED' if row['problems'] else 'skipped'}: {row['skipped']}",
              flush=True)
        return
    status = "ok" if not row["problems"] else "FAILED: " + "; ".join(row["problems"])
    sinks = (" [" + ", ".join(f"{k} {v['copies']}/{v['duplicates']}/{v['lost']}"
                              for k, v in row["sinks"].items()) + "]"
             if len(row["sinks"]) > 1 else "")
    print(f"{p:13} {m:10} messages {row['messages']} copies {row['copies']}{sinks} "
          f"dups {row['duplicates']} (crash {row['dup_crash']}, SIGTERM "
          f"{row['dup_stop']}, ambiguous {row['dup_ambiguous']}, lease "
          f"{row['dup_lease']}, left pending {row['dup_unsettled']}, unprovable "
          f"{row['dup_unprovable'] or 0}, after TTL {row['dup_after_ttl'] or 0}, "
          f"unattributed {row['dup_unattributed']}) lost {row['lost']} rejected "
          f"{row['rejected']} crashes {row['crashes']} (SIGTERM {row['sigterms']}) "
          f"failed {row['failed_runs']} faults {row['faults']} windows {row['windows']} "
          f"waited out {row['waited_out']}"
          + (f" [{reached(row)}]" if reached(row) else "")
          + f" {row['elapsed_s']} s: {status}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--sluice", default=str(ROOT / "target/debug/sluice"))
    ap.add_argument("--out", default=str(ROOT / "target/faults"))
    ap.add_argument("--pipelines", default=None, help="comma-separated: " + ",".join(PIPELINES))
    ap.add_argument("--mixes", default=None,
                    help="comma-separated: " + ",".join(ALL_MIXES))
    ap.add_argument("--messages", type=int, default=None)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--markdown", default=None, help="also write the table to this file")
    ap.add_argument("--no-control", action="store_true",
                    help="skip the negative control (a pipeline without the lock)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="cells run at once (small: 2, large: 1)")
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
            sys.exit(f"unknown mix {m!r}: one of {', '.join(ALL_MIXES)}")
    if mixes is None and args.pipelines is None and "cells" in size:
        cells = list(size["cells"])
    else:
        chosen = mixes or size.get("mixes") or MIX_ORDER
        cells = [(p, m) for p in pipelines for m in chosen
                 if (mixes or "cells" not in size or (p, m) in size["cells"]) and applies(p, m)]
    args.undelivered = supports_undelivered(args.sluice)
    print(f"fault campaign: size {args.size}, seed {args.seed}, sluice {args.sluice}, out {out}",
          flush=True)
    if not args.undelivered:
        print("note: this sluice has no `run --undelivered`: failed runs are redelivered whole "
              "and the messages without a key are left out of the workload", flush=True)
    args.faketime_error = None
    if any(MIXES[m].get("clock") or MIXES[m].get("clock_past") for _, m in cells):
        if shapes.libfaketime() is None:
            args.faketime_error = "libfaketime is missing: apt-get install libfaketime"
        else:
            got, args.faketime_error = shapes.check_faketime(args.sluice, out)
            print(f"libfaketime: FAKETIME=+30s puts sluice's clock {got:+.1f} s off"
                  if got is not None else f"libfaketime: {args.faketime_error}", flush=True)
    # Stopped from outside: clean up (the finally below) instead of leaving emulators.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    emu = Emulators(out, kinesalite=any(p == "scaleout" for p, _ in cells))
    rows = {}
    started = time.time()
    first = [c for c in size.get("first", []) if c in cells]
    queue = first + [c for c in cells if c not in first]
    jobs = args.jobs or size.get("jobs", 1)
    taking = threading.Lock()

    def lane():
        while True:
            with taking:
                if not queue:
                    return
                p, m = queue.pop(0)
            try:
                row = run_one(args, emu, p, m, cell_seed(args.seed, p, m))
            except Exception as e:  # noqa: BLE001 - a broken cell fails, the others go on
                import traceback
                traceback.print_exc()
                row = skipped_row(p, m, f"the harness failed: {type(e).__name__}: {e}", fail=True)
            rows[(p, m)] = row
            report_cell(p, m, row)

    try:
        threads = [threading.Thread(target=lane) for _ in range(max(1, jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = [rows[c] for c in cells if c in rows]
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
    locked = [r for r in rows if not r.get("control") and not r.get("skipped")]
    print(f"\ntotal: {sum(r['messages'] for r in locked)} messages through the lock "
          f"({sum(r['through_lock'] for r in locked)} lines handed to locked runs), "
          f"{sum(r['crashes'] for r in locked)} crashes ({sum(r['sigterms'] for r in locked)} "
          f"of them SIGTERM), {len(locked)} cells, {total} s")
    for r in rows:
        if r.get("skipped"):
            print(f"skipped: {r['pipeline']}-{r['mix']}: {r['skipped']}")
    clean = [r for r in locked if r["mix"] in ("clean", "clean_stmt", "clean_epoch")
             and r["acquire_per_msg"] is not None]
    for r in clean:
        print(f"store calls per message, {r['mix']} {r['pipeline']}: {r['acquire_per_msg']} acquire, "
              f"{r['commit_per_msg']} commit ({r['renew_per_msg']} renew, "
              f"{r['lock_read_per_msg']} lock_read) calls over "
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
