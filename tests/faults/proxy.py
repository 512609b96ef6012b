#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for the AWS JSON protocol, in front of dynoxide or moto.

    proxy.py --upstream http://127.0.0.1:PORT --faults FAULTS.json --log LOG.jsonl [--port 0]

Once listening it prints `listening 127.0.0.1:PORT` on stdout. It forwards every request
to the upstream emulator, and for the calls that matter to exactly-once it injects faults at
configured rates. Each request is classified by its `X-Amz-Target` header and body:

    acquire   DynamoDB TransactWriteItems of Updates `SET #owner = :me, #status = :pending ...`
              (the lock's acquisitions, up to 100 keys a call), UpdateItem (one key at a
              time, `lock_acquire: 'items'`, and takeovers; PutItem in older builds), and
              BatchExecuteStatement of INSERTs and UPDATEs without a `committed` parameter
              (`lock_acquire: 'statements'`, up to 25 keys a call; `'epochs'`, the keys
              written pending in an epoch), and with `'epochs'` the UpdateItem of an epoch
              record (partition key value `#epoch:OWNER:N`) by which a taker aborts the
              slot of a key it takes over (`ADD lock_aborted ...`; logged as op
              `UpdateItem/abort`)
    commit    DynamoDB TransactWriteItems of Updates `SET #status = :committed ...` (and
              of Updates `ADD #progress :progress` alone, which record a send's progress,
              its placements: logged as op `TransactWriteItems/record`),
              BatchExecuteStatement of UPDATEs with a `committed` parameter (`'statements'`),
              and the UpdateItem of an epoch record that commits a batch of keys (`ADD
              lock_committed ...`, `'epochs'`; logged as op `UpdateItem/commit`; its key is
              the epoch record's)
    lock_read DynamoDB BatchGetItem (`lock_acquire: 'statements'` and `'epochs'`: the
              consistent read of up to 100 keys before they are taken, the read-back of
              commits whose condition failed, and the reads of epoch records, logged as op
              `BatchGetItem/epoch`)
    renew     DynamoDB TransactWriteItems of Updates `SET #lease = :lease, #ttl = :ttl`
              (the lock's lease renewals)
    abandon   DynamoDB TransactWriteItems of Updates `SET #lease = :ended` (keys left
              pending with their lease ended after an ambiguous send)
    release   DynamoDB TransactWriteItems of Deletes only (the lock's rollback)
    sink      DynamoDB TransactWriteItems holding a Put (the transactional DynamoDB sink),
              Kinesis PutRecords, Firehose PutRecordBatch, and Cloud Storage uploads (a
              request to /upload/storage/v1/..., in front of the Cloud Storage emulator:
              the ids are those of the JSON lines of its body)
    read      Kinesis GetShardIterator and GetRecords (a sender reading a stream back
              before it sends a record again)
    other     anything else (forwarded untouched)

FAULTS.json maps a class to the rate (0..1, per call) of each fault:

    {"sink": {"throttle": 0.02, "error_before": 0.01, "error_after": 0.01,
              "timeout_before": 0.002, "timeout_after": 0.002, "partial": 0.05},
     "acquire": {...}, "commit": {...}, "renew": {...}, "abandon": {...}, "release": {...},
     "windows": {...}, "windows_at": [...],
     "hold_s": 5.5, "partial_fraction": 0.3, "seed": 1}

Faults *before* forwarding: the emulator never sees the request.
    throttle        HTTP 400 with the service's throttling error: DynamoDB and Kinesis
                    ProvisionedThroughputExceededException, Firehose
                    ServiceUnavailableException (HTTP 503, Firehose's throttling answer)
    error_before    HTTP 500 (DynamoDB InternalServerError, Kinesis InternalFailure,
                    Firehose ServiceUnavailableException)
    timeout_before  the request is held `hold_s` seconds (past the client's attempt timeout)
                    and the connection closed without an answer
    partial         sink calls with records (PutRecords, PutRecordBatch): each record fails
                    with probability `partial_fraction` (at least one); only the others are
                    forwarded, and the answer has a failed entry (ErrorCode, ErrorMessage) at
                    each failed record's position, with the failed count adjusted
    hot             (sink calls with records, for callers whose `app/` name ends with
                    `"hot": {"suffix": "-hot", "records": 0.3}`'s suffix: a process on a hot
                    shard) each record whose (caller, id) draw is under `records` is throttled
                    on every attempt, the others forwarded as for `partial`: the send's own
                    retries cannot get those through, so a message whose records fan out is
                    delivered in part
    outage          (a rate per caller, not per call) every call of the class from that
                    caller (the `app/NAME` of its user agent) gets HTTP 500: its sends fail
                    after all retries, the lock rolls back, the run exits non-zero
    window          (outage windows, for every caller) every call of a class made during one
                    of the proxy's outage windows gets HTTP 500: a store or stream that is
                    down for seconds, longer than the SDK's retries of one call. The windows
                    are drawn from the seed when the proxy starts, over its lifetime:
                      "windows": {"classes": ["acquire", "commit", "*"], "first_s": [0.5, 3],
                                  "gap_s": [2, 10], "length_s": [1, 8]}
                    each window is `length_s` long (uniform in the range) and hits one entry
                    of `classes` ("*" is every class listed, a whole-store outage); the first
                    starts `first_s` after the start, the next `gap_s` after the previous one
                    ends. "windows_at": [{"classes": [...], "start": S, "length": L}] adds
                    windows at fixed offsets (seconds after the start). The log's first line
                    is {"windows": [[start_epoch, end_epoch, [classes]], ...]}.
Faults *after* forwarding: the emulator applied the request, the client sees a failure,
an ambiguous outcome no client can resolve by itself:
    error_after     the emulator's answer is replaced by HTTP 500
    timeout_after   the answer is held `hold_s` seconds and the connection closed

LOG.jsonl gets one line per sink call forwarded or failed, per read that got a fault, and
per lock-store call (acquire, commit, renew, abandon, release, lock_read), with the unit ids (sinks:
a record's `uid`, `uid#part` for a fan-out's records, or `cid` for content that several
messages share; see unit_id) or lock keys (lock calls) it carried; an acquisition also
records what the store answered (the holders of the keys a cancelled transaction found
held, the record a takeover replaced, the keys whose statement failed and the error code
of each: a key's history), the fault (or null), whether the emulator applied it (`applied`: it answered 2xx;
for partial faults `ids` lists only the forwarded records and `refused` the others; a
TransactWriteItems retried with the ClientRequestToken of one already applied is a `replay`,
answered with success and written nothing; an applied PutRecords also lists in `seqs` the
sequence number of each forwarded record, in the order of `ids`), the
caller (the `app/NAME` part of its user agent: sluice sets it from AWS_SDK_UA_APP_ID), the
time the request arrived (`t_in`, before the emulator could apply it) and the time it was
logged (`t`: once the emulator answered, for a call forwarded). With `lock_acquire:
'epochs'`, an acquisition lists the epoch record and slot each key was written pending in
(`epochs`: {KEY: ["#epoch:OWNER:N", SLOT]}), and an epoch record's commit the slots it
committed (`slots`). A commit call lists the TTL it sets on each key it names (`ttls`: {KEY:
epoch seconds}; an epoch record's commit, the record's), whether applied or not: the
attempts at one commit carry the same TTL. On SIGTERM it appends a `{"summary": ...}` line with counts per class
and fault.
"""
import argparse
import base64
import bisect
import http.client
import json
import random
import re
import signal
import socketserver
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

FAULTS = ("throttle", "error_before", "timeout_before", "partial", "error_after", "timeout_after")
LOCK_CLASSES = ("acquire", "commit", "renew", "abandon", "release", "lock_read")
# How far ahead outage windows are drawn (a proxy lives for one campaign cell).
WINDOW_HORIZON_S = 2 * 3600
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "x-amz-crc32"}


class State:
    def __init__(self, upstream, faults, log_path):
        u = urlparse(upstream)
        self.host, self.port = u.hostname, u.port
        self.faults = faults
        self.hold = float(faults.get("hold_s", 5.5))
        self.partial_fraction = float(faults.get("partial_fraction", 0.3))
        self.rng = random.Random(faults.get("seed"))
        self.lock = threading.Lock()
        self.log = open(log_path, "a", buffering=1)
        self.counts = {}
        # ClientRequestTokens of TransactWriteItems the emulator applied: the SDK sends the
        # same token when it retries, and DynamoDB (and dynoxide) answer a retry of an
        # applied transaction with success without writing again.
        self.applied_tokens = set()
        # moto's Kinesis numbers a shard's records with max + 1 without a lock, so two
        # PutRecords it serves at once can get the same sequence numbers and one overwrites
        # the other's records: acknowledged, then gone. Writes to the emulator's streams are
        # therefore forwarded one at a time (the campaign found this; sluice is not at fault).
        self.stream_writes = threading.Lock()
        self.t0 = time.time()
        self.windows = outage_windows(faults, self.t0)
        self.window_starts = [w[0] for w in self.windows]
        self.longest_window = max((b - a for a, b, _ in self.windows), default=0.0)
        if self.windows:
            self.log.write(json.dumps({"windows": [[round(a, 4), round(b, 4), sorted(c)]
                                                   for a, b, c in self.windows]}) + "\n")

    def in_window(self, cls, now=None):
        """Whether class `cls` is inside one of the outage windows now (every caller)."""
        now = time.time() if now is None else now
        i = bisect.bisect_right(self.window_starts, now)
        while i > 0:
            i -= 1
            a, b, c = self.windows[i]
            if a < now - self.longest_window:
                break
            if now < b and cls in c:
                return True
        return False

    def in_outage(self, cls, app):
        """Whether every call of class `cls` from caller `app` fails (`outage` rate per
        caller, decided once per caller from the seed): such a run's sends fail after all
        their retries, so the lock releases its keys and the run exits non-zero."""
        rate = float((self.faults.get(cls) or {}).get("outage", 0))
        if not rate or not app:
            return False
        return random.Random(f"{self.faults.get('seed')}/{cls}/{app}").random() < rate

    def hot_records(self, cls, op, app, ids):
        """A caller on a hot shard (`"hot": {"suffix": "-hot", "records": 0.3}`: its `app/`
        name ends with the suffix): each of its records whose (caller, id) draw falls under
        `records` is throttled on every attempt, so the send's own retries cannot get it
        through and the message is delivered in part (its other records went). The fail
        mask of a PutRecords / PutRecordBatch, or None."""
        spec = self.faults.get("hot")
        if (not spec or cls != "sink" or op not in ("PutRecords", "PutRecordBatch") or not app
                or not app.endswith(spec.get("suffix", "-hot"))):
            return None
        rate = float(spec.get("records", 0.3))
        seed = self.faults.get("seed")
        fail = [zlib.crc32(f"{seed}/{app}/{i}".encode()) / 2**32 < rate for i in ids]
        return fail if any(fail) else None

    def draw(self, cls):
        """The fault for one call of class `cls`, or None."""
        rates = self.faults.get(cls) or {}
        with self.lock:
            x = self.rng.random()
        acc = 0.0
        for f in FAULTS:
            acc += float(rates.get(f, 0))
            if x < acc:
                return f
        return None

    def record(self, entry):
        entry["t"] = round(time.time(), 4)
        line = json.dumps(entry, separators=(",", ":"))
        with self.lock:
            key = f"{entry.get('class')}:{entry.get('fault')}"
            self.counts[key] = self.counts.get(key, 0) + 1
            self.log.write(line + "\n")

    def count(self, entry):
        """Counts a call without logging it (clean acquisitions: one per message)."""
        with self.lock:
            key = f"{entry.get('class')}:{entry.get('fault')}"
            self.counts[key] = self.counts.get(key, 0) + 1

    def summary(self):
        with self.lock:
            self.log.write(json.dumps({"summary": self.counts}) + "\n")
            self.log.flush()


def outage_windows(faults, t0):
    """[(start, end, {classes})] in epoch seconds: the drawn and the fixed outage windows."""
    out = []
    for w in faults.get("windows_at") or []:
        start = t0 + float(w["start"])
        out.append((start, start + float(w["length"]), set(w["classes"])))
    spec = faults.get("windows")
    if spec:
        rng = random.Random(f"{faults.get('seed')}/windows")
        options = list(spec["classes"])
        every = {c for c in options if c != "*"}
        t = t0 + rng.uniform(*spec.get("first_s", (0.5, 3.0)))
        while t < t0 + WINDOW_HORIZON_S:
            pick = rng.choice(options)
            length = rng.uniform(*spec.get("length_s", (1.0, 8.0)))
            out.append((t, t + length, set(every) if pick == "*" else {pick}))
            t += length + rng.uniform(*spec.get("gap_s", (2.0, 10.0)))
    return sorted(out, key=lambda w: w[0])


def service_of(target):
    if target.startswith("DynamoDB"):
        return "dynamodb"
    if target.startswith("Kinesis"):
        return "kinesis"
    if target.startswith("Firehose"):
        return "firehose"
    return "other"


def unit_id(m):
    """What the campaign counts a record by: its `uid` (the unique id of each message), else
    its `id`, else its `cid` (a record whose content several messages share); a fan-out's
    record (one of several made from one message) is `uid#part`. None when it has none."""
    if not isinstance(m, dict):
        return None
    for k in ("uid", "id", "cid"):
        if k in m:
            u = str(m[k])
            return f"{u}#{m['part']}" if "part" in m else u
    return None


def line_ids(body):
    """The unit ids of an uploaded object's JSON lines (a Cloud Storage upload)."""
    ids = []
    for line in body.decode("utf-8", "replace").splitlines():
        try:
            u = unit_id(json.loads(line))
        except ValueError:
            continue
        if u is not None:
            ids.append(u)
    return ids


def record_id(blob_b64):
    """The unit id (unit_id) of a record whose data is a JSON message (base64 in the JSON
    protocol)."""
    try:
        return unit_id(json.loads(base64.b64decode(blob_b64)))
    except Exception:
        return None


def update_class(expression):
    """The lock operation of one Update of a TransactWriteItems, by its update expression
    (transforms/src/kv_store/aws_dynamodb/lock.rs)."""
    e = expression or ""
    # Before `:pending`: an abandonment of a key held in an epoch also sets the status back
    # to pending (`SET #lease = :ended, #status = :pending REMOVE #epoch, #slot`).
    if ":ended" in e:
        return "abandon"
    if ":pending" in e:
        return "acquire"
    if ":committed" in e:
        return "commit"
    if ":lease" in e:
        return "renew"
    return "commit"


EPOCH_MARK = "#epoch:"


def epoch_update(body):
    """What an UpdateItem does to an epoch record (`lock_acquire: 'epochs'`): `abort` (its
    update expression adds to `lock_aborted`), `commit` (to `lock_committed`), `renew` (it
    sets `lock_lease_until`), else `epoch`; None when its key is not an epoch record's."""
    key = body.get("Key") or {}
    if not any(EPOCH_MARK in str((v or {}).get("S", "")) for v in key.values() if isinstance(v, dict)):
        return None
    expr = str(body.get("UpdateExpression") or "")
    names = body.get("ExpressionAttributeNames") or {}
    for placeholder in sorted(names, key=len, reverse=True):
        expr = expr.replace(placeholder, str(names[placeholder]))
    for attr, what in (("lock_aborted", "abort"), ("lock_committed", "commit"), ("lock_lease_until", "renew")):
        if attr in expr:
            return what
    return "epoch"


def records_progress(expression):
    """Whether an Update of a TransactWriteItems only records a send's progress (`ADD
    #progress :progress`, lock.rs Op::Record: the placements of a file or object sink):
    classed with the commits (update_class), but no commit."""
    e = expression or ""
    return "#progress" in e and update_class(e) == "commit" and ":committed" not in e


def call_name(target, body):
    """The operation as logged: X-Amz-Target's, with what it does to epoch records
    (`UpdateItem/commit`, `UpdateItem/abort`, `BatchGetItem/epoch`...), and
    `TransactWriteItems/record` for a transaction that only records progress."""
    op = target.split(".")[-1]
    if op == "TransactWriteItems":
        items = body.get("TransactItems", [])
        if items and all(records_progress((i.get("Update") or {}).get("UpdateExpression"))
                         for i in items):
            return f"{op}/record"
    if op == "UpdateItem":
        what = epoch_update(body)
        return f"{op}/{what}" if what else op
    if op == "BatchGetItem":
        keys = [k.get("PK", {}).get("S") or "" for t in body.get("RequestItems", {}).values()
                for k in t.get("Keys", [])]
        if keys and all(EPOCH_MARK in k for k in keys):
            return f"{op}/epoch"
    return op


def statement_key(statement):
    """The lock key of one PartiQL statement of `lock_acquire: 'statements'`
    (transforms/src/kv_store/aws_dynamodb/statements.rs): the parameter at the partition
    key's placeholder (`'PK': ?` in an INSERT, `"PK" = ?` in an UPDATE's WHERE)."""
    text, params = statement.get("Statement", ""), statement.get("Parameters", [])
    for mark in ("'PK': ?", '"PK" = ?'):
        at = text.find(mark)
        if at >= 0:
            i = text[:at].count("?")
            return params[i].get("S") if i < len(params) else None
    return None


STATEMENT_PARAM = re.compile(r"""'([^']*)'\s*:\s*\?|"([^"]*)"\s*=\s*\?|\?""")


def statement_values(statement):
    """{attribute: parameter} of one PartiQL statement: the attributes an INSERT names
    (`'NAME': ?`) and those a SET or WHERE sets equal (`"NAME" = ?`), by the position of
    their `?` among the parameters."""
    text, params = statement.get("Statement", ""), statement.get("Parameters", [])
    out = {}
    for i, m in enumerate(STATEMENT_PARAM.finditer(text)):
        name = m.group(1) if m.group(1) is not None else m.group(2)
        if name is not None and i < len(params):
            out.setdefault(name, params[i])
    return out


def update_values(body):
    """{attribute: value} an UpdateItem's expression assigns (`SET a = :x`, `ADD a :x`),
    its names and placeholders resolved."""
    expr = str(body.get("UpdateExpression") or "")
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    out = {}
    for name, placeholder in re.findall(r"(#?[\w.]+)\s*=?\s*(:\w+)", expr):
        attr = names.get(name, name)
        if placeholder in values:
            out.setdefault(attr, values[placeholder])
    return out


def scalar(v):
    """An attribute value's S or N, as text (None for anything else)."""
    return (v or {}).get("S", (v or {}).get("N")) if isinstance(v, dict) else None


def epoch_slots(op, body):
    """Where a lock call puts keys in epochs (`lock_acquire: 'epochs'`), for the log:
    {"epochs": {KEY: [EPOCH RECORD, SLOT]}} for an acquisition that writes keys pending in
    an epoch (a statement, or a takeover's UpdateItem, setting `lock_epoch` and
    `lock_slot`; the record is `#epoch:OWNER:N`, transforms/src/kv_store/aws_dynamodb/
    epochs), {"slots": [SLOT, ...]} for the UpdateItem of an epoch record that commits
    them (`ADD lock_committed :slots`), else {}."""
    def place(key, values):
        owner, epoch, slot = (scalar(values.get(a))
                              for a in ("lock_owner", "lock_epoch", "lock_slot"))
        if key and owner and epoch is not None and slot is not None:
            return key, [f"{EPOCH_MARK}{owner}:{epoch}", int(slot)]
        return None

    if op == "BatchExecuteStatement":
        found = dict(filter(None, (place(statement_key(st), statement_values(st))
                                   for st in body.get("Statements", []))))
        return {"epochs": found} if found else {}
    if op == "UpdateItem":
        key = scalar((body.get("Key") or {}).get("PK"))
        values = update_values(body)
        if epoch_update(body) == "commit":
            ns = (values.get("lock_committed") or {}).get("NS", [])
            return {"slots": sorted(int(x) for x in ns)}
        if epoch_update(body) is None:
            found = place(key, values)
            return {"epochs": dict([found])} if found else {}
    return {}


def commit_ttls(op, body):
    """The TTL (epoch seconds) a commit call sets on each key it names, for the log:
    {"ttls": {KEY: TTL}} for a TransactWriteItems' commit updates (`SET #status =
    :committed, #ttl = :ttl`, lock.rs), a BatchExecuteStatement's commit statements (`SET
    "ttl" = ?`, statements.rs; the campaign's tables name the attribute `ttl`) and the
    UpdateItem of an epoch record that commits slots (`ADD #committed :slots SET #ttl =
    :ttl`, epochs/commit.rs; keyed by the record), else {}. The keeper computes a commit's
    TTL once: every attempt at that commit (the SDK's and the store's retries) carries the
    same one, and a commit made again later carries a new one."""
    def number(v):
        text = scalar(v)
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    found = {}
    if op == "TransactWriteItems":
        for item in body.get("TransactItems", []):
            u = item.get("Update") or {}
            expr = u.get("UpdateExpression")
            if update_class(expr) == "commit" and ":committed" in (expr or ""):
                key = scalar((u.get("Key") or {}).get("PK"))
                ttl = number((u.get("ExpressionAttributeValues") or {}).get(":ttl"))
                if key and ttl is not None:
                    found[key] = ttl
    elif op == "BatchExecuteStatement":
        for st in body.get("Statements", []):
            key, ttl = statement_key(st), number(statement_values(st).get("ttl"))
            if statement_class(st) == "commit" and key and ttl is not None:
                found[key] = ttl
    elif op == "UpdateItem" and epoch_update(body) == "commit":
        key = scalar((body.get("Key") or {}).get("PK"))
        ttl = number(update_values(body).get("ttl"))
        if key and ttl is not None:
            found[key] = ttl
    return {"ttls": found} if found else {}


def statement_class(statement):
    """acquire or commit, for one statement: a commit sets the status `committed`."""
    if statement.get("Statement", "").startswith("UPDATE") and \
            {"S": "committed"} in statement.get("Parameters", []):
        return "commit"
    return "acquire"


def classify(target, body):
    """(class, ids) for a request: the message ids of a sink call, the keys of a lock call."""
    op = target.split(".")[-1]
    if op == "BatchExecuteStatement":
        statements = body.get("Statements", [])
        keys = [k for k in map(statement_key, statements) if k]
        classes = {statement_class(st) for st in statements}
        return (classes.pop() if len(classes) == 1 else "commit"), keys
    if op == "BatchGetItem":
        keys = [k.get("PK", {}).get("S") for t in body.get("RequestItems", {}).values()
                for k in t.get("Keys", [])]
        return "lock_read", [k for k in keys if k]
    if op == "UpdateItem":
        key = body.get("Key", {}).get("PK", {}).get("S")
        what = epoch_update(body)
        cls = {"commit": "commit", "renew": "renew", "epoch": "commit"}.get(what, "acquire")
        return cls, [key] if key else []
    if op == "PutItem":
        item = body.get("Item", {})
        key = next((v.get("S") for k, v in item.items() if k == "PK"), None)
        return "acquire", [key] if key else []
    if op == "TransactWriteItems":
        items = body.get("TransactItems", [])
        puts = [i["Put"] for i in items if "Put" in i]
        if puts:
            ids = []
            for p in puts:
                for attr in ("event_id", "uid", "id"):
                    v = p.get("Item", {}).get(attr)
                    if v and "S" in v:
                        ids.append(v["S"])
                        break
            return "sink", ids
        keys = []
        for i in items:
            w = i.get("Update") or i.get("Delete") or {}
            k = w.get("Key", {}).get("PK", {}).get("S")
            if k:
                keys.append(k)
        if items and all("Delete" in i for i in items):
            return "release", keys
        classes = {update_class(i["Update"].get("UpdateExpression")) for i in items if "Update" in i}
        if len(classes) == 1:
            return classes.pop(), keys
        return "commit", keys
    if op in ("PutRecords", "PutRecordBatch"):
        return "sink", [record_id(r.get("Data", "")) for r in body.get("Records", [])]
    if target.startswith("Kinesis") and op in ("GetShardIterator", "GetRecords"):
        return "read", []
    return "other", []


def error_body(service, kind):
    if kind in ("outage", "window"):
        kind = "error_before"
    if service == "gcs":  # the JSON API's error document
        status = 429 if kind == "throttle" else 503
        return status, str(status), f"injected {status}"
    if kind == "throttle":
        if service == "firehose":
            return 503, "ServiceUnavailableException", "Slow down. (injected throttling)"
        prefix = "com.amazonaws.dynamodb.v20120810#" if service == "dynamodb" else ""
        return 400, prefix + "ProvisionedThroughputExceededException", "Rate exceeded (injected)"
    if service == "dynamodb":
        return 500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "injected 500"
    if service == "firehose":
        return 500, "ServiceUnavailableException", "injected 500"
    return 500, "InternalFailure", "injected 500"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State = None  # set by main

    def log_message(self, *args):
        pass

    def _forward(self, body):
        target = self.headers.get("X-Amz-Target", "")
        if target.endswith((".PutRecords", ".PutRecord", ".PutRecordBatch")):
            with self.state.stream_writes:
                return self._forward_now(body)
        return self._forward_now(body)

    def _forward_now(self, body):
        conn = http.client.HTTPConnection(self.state.host, self.state.port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        out = (resp.status, [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP], data)
        conn.close()
        return out

    def _reply(self, status, headers, data):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reply_error(self, service, kind):
        status, code, msg = error_body(service, kind)
        if service == "gcs":
            data = json.dumps({"error": {"code": status, "message": msg}}).encode()
            return self._reply(status, [("Content-Type", "application/json")], data)
        data = json.dumps({"__type": code, "message": msg}).encode()
        ctype = "application/x-amz-json-1.0" if service == "dynamodb" else "application/x-amz-json-1.1"
        self._reply(status, [("Content-Type", ctype), ("x-amzn-ErrorType", code.split("#")[-1])], data)

    def _hold_and_close(self):
        time.sleep(self.state.hold)
        self.close_connection = True

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        arrived = round(time.time(), 4)  # before the emulator could apply it
        target = self.headers.get("X-Amz-Target", "")
        service = service_of(target)
        ua = self.headers.get("x-amz-user-agent", "") + " " + self.headers.get("User-Agent", "")
        app = next((p[4:] for p in ua.split() if p.startswith("app/")), None)
        try:
            parsed = json.loads(body) if body and target else {}
        except ValueError:
            parsed = {}
        cls, ids = classify(target, parsed) if target else ("other", [])
        if not target and self.path.startswith("/upload/storage/v1/"):
            service, cls, ids, target = "gcs", "sink", line_ids(body), "gcs.upload"
        if cls == "other":
            return self._reply(*self._forward(body))
        st = self.state
        op = target.split(".")[-1]
        hot = st.hot_records(cls, op, app, ids)
        if st.in_window(cls):
            fault = "window"
        elif st.in_outage(cls, app):
            fault = "outage"
        elif hot:
            fault = "hot"
        else:
            fault = st.draw(cls)
        entry = {"class": cls, "op": call_name(target, parsed) if service == "dynamodb" else op, "app": app,
                 "fault": fault, "t_in": arrived}
        quiet = cls == "read"  # many calls: counted, logged only when faulted
        if not quiet or fault is not None:
            entry["ids" if cls == "sink" else "keys"] = ids
        if service == "dynamodb" and cls in ("acquire", "commit"):
            entry.update(epoch_slots(op, parsed))
        if service == "dynamodb" and cls == "commit":
            entry.update(commit_ttls(op, parsed))
        if fault == "partial" and (cls != "sink" or op not in ("PutRecords", "PutRecordBatch")):
            fault = entry["fault"] = "error_before"
        if fault in ("throttle", "error_before", "outage", "window"):
            entry["applied"] = False
            st.record(entry)
            return self._reply_error(service, fault)
        if fault == "timeout_before":
            entry["applied"] = False
            st.record(entry)
            return self._hold_and_close()
        if fault == "partial":
            n = len(parsed.get("Records", []))
            with st.lock:
                fail = [st.rng.random() < st.partial_fraction for _ in range(n)]
                if n and not any(fail):
                    fail[st.rng.randrange(n)] = True
            return self._partial(op, parsed, ids, entry, fail)
        if fault == "hot":
            return self._partial(op, parsed, ids, entry, hot)
        status, headers, data = self._forward(body)
        entry["applied"] = 200 <= status < 300
        entry["status"] = status
        token = parsed.get("ClientRequestToken")
        if op == "TransactWriteItems" and token:
            entry["token"] = token
            with st.lock:
                if entry["applied"] and token in st.applied_tokens:
                    entry["replay"] = True  # answered from the token: nothing written
                elif entry["applied"]:
                    st.applied_tokens.add(token)
        if cls == "sink" and entry["applied"] and op in ("PutRecords", "PutRecordBatch"):
            entry["refused"] = refused_by_upstream(op, data, ids)
            if op == "PutRecords":
                entry["seqs"] = sequence_numbers(data)
        if cls == "acquire" or op == "BatchExecuteStatement":
            entry.update(acquire_answer(op, ids, status, data))
        if not quiet or fault is not None:
            st.record(entry)
        else:
            st.count(entry)
        if fault == "error_after":
            return self._reply_error(service, "error_before")
        if fault == "timeout_after":
            return self._hold_and_close()
        return self._reply(status, headers, data)

    def _partial(self, op, parsed, ids, entry, fail):
        """Answers a PutRecords / PutRecordBatch whose records at the true places of `fail`
        fail (throttled), forwarding only the others."""
        records = parsed.get("Records", [])
        keep = [r for r, f in zip(records, fail) if not f]
        entry["ids"] = [i for i, f in zip(ids, fail) if not f]
        entry["refused"] = [i for i, f in zip(ids, fail) if f]
        upstream_results = []
        status, headers, upstream_failed = 200, [("Content-Type", "application/x-amz-json-1.1")], 0
        if keep:
            forwarded = dict(parsed)
            forwarded["Records"] = keep
            status, headers, data = self._forward(json.dumps(forwarded).encode())
            if not 200 <= status < 300:
                entry["applied"] = False
                entry["status"] = status
                self.state.record(entry)
                return self._reply(status, headers, data)
            answer = json.loads(data)
            key = "Records" if op == "PutRecords" else "RequestResponses"
            upstream_results = answer.get(key, [])
            if op == "PutRecords":
                entry["seqs"] = [r.get("SequenceNumber") for r in upstream_results]
            upstream_failed = answer.get("FailedRecordCount", answer.get("FailedPutCount", 0)) or 0
        entry["applied"] = True
        entry["status"] = status
        self.state.record(entry)
        results, it = [], iter(upstream_results)
        for f in fail:
            if f:
                code = "ProvisionedThroughputExceededException" if op == "PutRecords" else "ServiceUnavailableException"
                results.append({"ErrorCode": code, "ErrorMessage": "injected record failure"})
            else:
                results.append(next(it))
        failed = sum(fail) + upstream_failed
        if op == "PutRecords":
            answer = {"FailedRecordCount": failed, "Records": results}
        else:
            answer = {"FailedPutCount": failed, "Encrypted": False, "RequestResponses": results}
        self._reply(200, [h for h in headers if h[0].lower() == "content-type"] or
                    [("Content-Type", "application/x-amz-json-1.1")], json.dumps(answer).encode())

    def do_POST(self):
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_PUT = do_DELETE = do_HEAD = do_POST


def acquire_answer(op, keys, status, data):
    """What the store answered an acquisition, for the log (a key's history): the keys a
    cancelled transaction found held (`held`, with the holder's owner and status), the
    record a takeover (UpdateItem, ALL_OLD) replaced (`old`; with its epoch and slot when it
    was pending in an epoch), or the keys whose statement of
    a BatchExecuteStatement (an acquisition's or a commit's) failed, with the error code
    (`statement_errors`)."""
    try:
        answer = json.loads(data) if data else {}
    except ValueError:
        return {}

    def brief(item):
        out = {}
        for attr, name in (("lock_owner", "owner"), ("lock_status", "status"),
                           ("lock_since", "since"), ("lock_lease_until", "lease"),
                           ("lock_progress", "progress"), ("lock_epoch", "epoch"),
                           ("lock_slot", "slot")):
            v = (item or {}).get(attr)
            if v:
                out[name] = v.get("S", v.get("N", v.get("SS")))
        return out

    if op == "UpdateItem":
        old = answer.get("Attributes") or answer.get("Item")
        return {"old": brief(old)} if old else {}
    if op == "BatchExecuteStatement":
        # Each statement succeeds or fails alone: the keys whose statement failed, and why.
        errors = {k: (r.get("Error") or {}).get("Code")
                  for k, r in zip(keys, answer.get("Responses", [])) if r.get("Error")}
        return {"statement_errors": errors} if errors else {}
    reasons = answer.get("CancellationReasons")
    if op == "TransactWriteItems" and reasons:
        return {"held": {k: {"code": r.get("Code"), **brief(r.get("Item"))}
                         for k, r in zip(keys, reasons) if r.get("Code") not in (None, "None")}}
    return {}


def sequence_numbers(data):
    """The sequence number the emulator gave each record of a PutRecords answer (None for a
    refused one), in order: which caller put each copy in the stream."""
    try:
        return [r.get("SequenceNumber") for r in json.loads(data).get("Records", [])]
    except (ValueError, AttributeError):
        return []


def refused_by_upstream(op, data, ids):
    """Ids of records the emulator itself answered with an error code."""
    try:
        answer = json.loads(data)
    except ValueError:
        return []
    key = "Records" if op == "PutRecords" else "RequestResponses"
    return [i for i, r in zip(ids, answer.get(key, [])) if r.get("ErrorCode")]


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        # A client killed mid-request (the campaign's SIGKILLs) resets its connections.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--faults", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    faults = json.load(open(a.faults))
    Handler.state = State(a.upstream, faults, a.log)
    server = Server(("127.0.0.1", a.port), Handler)

    def stop(*_):
        Handler.state.summary()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"listening 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.2)


if __name__ == "__main__":
    socketserver.TCPServer.allow_reuse_address = True
    sys.exit(main())
