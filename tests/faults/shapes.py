"""The campaign's newer pipeline shapes and fault kinds, kept apart from campaign.py's driver:

- workload shapes: a fan-out (each message carries `parts`, split into one Kinesis record
  each), identical content (distinct messages, distinct keys, byte-identical records), and
  keys that recur in a second phase after their TTL;
- the scale-out source: a 4-shard Kinesis stream (kinesalite, which models resharding as
  Kinesis does: a split or merge closes the parents, routes new records to the children and
  ends the parents' iterators) read per shard, in order, by one consumer per shard, as an
  event source mapping feeds Lambda, with a split and a merge while the consumers run;
- a full disk: a small tmpfs holding the SQLite lock file, filled while a run is going;
- offset clocks: Debian's libfaketime preloaded into `sluice run`.
"""
import errno
import json
import os
import subprocess
import threading
import time
from pathlib import Path

# ---------------------------------------------------------------------------- workloads


def add_parts(msgs, rng, lo=2, hi=6):
    """Fan-out: every message gets `parts` ([{"part": 0}, ...], lo..hi of them); split by
    `aggregate_from_array` each becomes a record `{...the message..., "part": k}` that keeps
    the message's `id` (its lock key, so that the Kinesis read-back can prove it)."""
    for m in msgs:
        m["parts"] = [{"part": k} for k in range(rng.randint(lo, hi))]


def add_content(msgs, rng, special, tag):
    """Identical records: the message's record is `rec` ({cid, pk, body}), shared by groups
    of 1-4 messages (distinct uids and keys) and carrying no key. `special` (typed and
    keyless messages) get contents of their own, so a copy of one is told apart."""
    g = 0
    i = 0
    order = [m for m in msgs if m["uid"] not in special]
    while i < len(order):
        size = rng.randint(1, 4)
        for m in order[i:i + size]:
            m["rec"] = content(tag, g)
        i += size
        g += 1
    for m in msgs:
        if m["uid"] in special:
            m["rec"] = content(tag, g)
            g += 1


def content(tag, g):
    return {"cid": f"{tag}-c{g:06d}", "pk": f"p{g % 50}", "body": "same bytes " * (1 + g % 5)}


# ---------------------------------------------------------------------------- offset clocks

LIBFAKETIME_PATHS = ["/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                     "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                     "/usr/lib/faketime/libfaketime.so.1",
                     "/usr/local/lib/faketime/libfaketime.so.1"]


def libfaketime():
    """Debian's libfaketime (package libfaketime), or FAKETIME_LIB; None when missing."""
    for p in [os.environ.get("FAKETIME_LIB")] + LIBFAKETIME_PATHS:
        if p and Path(p).exists():
            return p
    return None


def faketime_env(offset):
    """The environment that offsets a process's wall clock by `offset` (`+4s`, `-30s`):
    libfaketime preloaded; the monotonic clock stays real (leases and timeouts measured by it
    keep their length)."""
    lib = libfaketime()
    if lib is None:
        raise RuntimeError("libfaketime is missing (apt-get install libfaketime)")
    return {"LD_PRELOAD": lib, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_NO_CACHE": "1"}


def offset_seconds(offset):
    sign = -1 if offset.startswith("-") else 1
    return sign * float(offset.lstrip("+-").rstrip("s"))


def check_faketime(sluice, workdir, offset="+30s"):
    """Runs sluice with time_now under libfaketime: (measured offset in s, error or None).
    A preload that does not reach Rust's SystemTime::now would make the clock cells
    meaningless."""
    cfg = Path(workdir) / "faketime-check.jsonnet"
    cfg.write_text("local sub = std.extVar('sub');\n{ transforms: [sub.tf.time.now({ obj: "
                   "{ trg: 't' } }), sub.tf.send.stdout()] }\n")
    env = dict(os.environ, **faketime_env(offset))
    before = time.time()
    try:
        out = subprocess.run([sluice, "run", "-c", str(cfg)], input="{}\n", text=True,
                             capture_output=True, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    after = time.time()
    try:
        t = json.loads(out.stdout.splitlines()[0])["t"] / 1e9
    except (IndexError, ValueError, KeyError, TypeError):
        return None, f"sluice under libfaketime printed {out.stdout[:200]!r}, {out.stderr[:300]!r}"
    if t - after > 0:
        got = t - after
    elif t - before < 0:
        got = t - before
    else:
        got = 0.0
    want = offset_seconds(offset)
    if abs(got - want) > 2.0:
        return got, (f"libfaketime did not offset sluice's clock: FAKETIME={offset} gave "
                     f"{got:+.1f} s")
    return got, None


# ---------------------------------------------------------------------------- a full disk


class FullDisk:
    """A small tmpfs for the SQLite lock file, filled (a filler file written until ENOSPC)
    while a run is going and freed after it exited. Needs root (mount); `available()` says
    why not otherwise."""

    def __init__(self, directory, size="8m"):
        self.dir = Path(directory)
        self.size = size
        self.mounted = False
        self.filler = self.dir / "filler"

    @staticmethod
    def available():
        if os.geteuid() != 0:
            return "not root: mounting a tmpfs needs root (CI runs as root)"
        return None

    def mount(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0755", "tmpfs",
                            str(self.dir)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mount -t tmpfs on {self.dir}: {r.stderr.strip()}")
        self.mounted = True

    def fill(self):
        """Writes the filler until the disk is full: bytes written."""
        n = 0
        chunk = b"\0" * 65536
        with open(self.filler, "ab", buffering=0) as f:
            while True:
                try:
                    n += f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
            # The last bytes a smaller write still fits.
            for size in (4096, 512, 1):
                while True:
                    try:
                        n += f.write(b"\0" * size)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        return n

    def free(self):
        try:
            self.filler.unlink()
        except FileNotFoundError:
            pass

    def unmount(self):
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.dir)], capture_output=True)
            self.mounted = False


# ---------------------------------------------------------------------------- scale-out


class ScaleOut:
    """A 4-shard source stream on kinesalite, its consumers and the reshard.

    The producer (this driver) puts the first half of the deliveries (partition key: the
    message's `user`; a second delivery of a message gets a random key, so it lands on
    another shard and meets the first in another consumer at the same time, as a producer's
    retry does). Consumers (one thread per shard being read, at least 4) read each shard in
    order from TRIM_HORIZON, hand each GetRecords batch to `deliver` (which runs `sluice run`
    until the batch is done, redelivering from the failed position) and take the next; a
    shard's children are read only once its parents are read to their end, as an event
    source mapping does. When a third of the first half's records are done, shard 0 is split
    and shards 2 and 3 merged; then the second half is put (into the children)."""

    def __init__(self, kinesis, stream, deliveries, batch, deliver, rng, consumers=4,
                 log=None):
        self.k, self.stream, self.batch, self.deliver = kinesis, stream, batch, deliver
        self.rng = rng
        self.consumers = consumers
        half = len(deliveries) // 2
        self.halves = [deliveries[:half], deliveries[half:]]
        self.seen_uids = set()
        self.lock = threading.Lock()
        self.done = set()       # shard ids read to their end
        self.claimed = set()
        self.produced_all = threading.Event()
        self.records_done = 0
        self.reshard_at = max(1, half // 3)
        self.progress = threading.Condition(self.lock)
        self.errors = []
        self.events = []         # (time, what) for the cell's record
        self.shard_index = {}
        self.log = log

    def note(self, what):
        with self.lock:
            self.events.append((round(time.time(), 3), what))

    def put(self, deliveries):
        recs = []
        for m in deliveries:
            uid = m.get("uid")
            again = uid in self.seen_uids
            self.seen_uids.add(uid)
            key = f"r{self.rng.randrange(10**9)}" if again else str(m.get("user", "u"))
            recs.append({"Data": (json.dumps(m) + "\n").encode(), "PartitionKey": key})
        for i in range(0, len(recs), 500):
            chunk = recs[i:i + 500]
            while chunk:
                r = self.k.put_records(StreamName=self.stream, Records=chunk)
                chunk = [rec for rec, res in zip(chunk, r["Records"]) if res.get("ErrorCode")]
                if chunk:
                    time.sleep(0.2)

    def wait_active(self):
        for _ in range(600):
            s = self.k.describe_stream_summary(StreamName=self.stream)
            if s["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
                return
            time.sleep(0.05)
        raise RuntimeError(f"stream {self.stream} did not become active")

    def shards(self):
        out, token = [], None
        while True:
            kw = {"NextToken": token} if token else {"StreamName": self.stream}
            r = self.k.list_shards(**kw)
            out.extend(r["Shards"])
            token = r.get("NextToken")
            if not token:
                return out

    def reshard(self):
        """Splits shard 0 at the middle of its hash range, merges shards 2 and 3."""
        shards = {s["ShardId"]: s for s in self.shards()}
        ids = sorted(shards)
        s0 = shards[ids[0]]["HashKeyRange"]
        mid = (int(s0["StartingHashKey"]) + int(s0["EndingHashKey"])) // 2
        self.k.split_shard(StreamName=self.stream, ShardToSplit=ids[0],
                           NewStartingHashKey=str(mid + 1))
        self.wait_active()
        self.k.merge_shards(StreamName=self.stream, ShardToMerge=ids[2],
                            AdjacentShardToMerge=ids[3])
        self.wait_active()
        after = self.shards()
        self.note(f"resharded: split {ids[0]}, merged {ids[2]} and {ids[3]}; "
                  f"{len(after)} shards, {sum(1 for s in after if 'EndingSequenceNumber' not in s.get('SequenceNumberRange', {}))} open")

    def producer(self):
        try:
            with self.progress:
                self.progress.wait_for(lambda: self.records_done >= self.reshard_at or self.errors,
                                       timeout=600)
            self.reshard()
            self.put(self.halves[1])
            self.note(f"put the second half ({len(self.halves[1])} records)")
        except Exception as e:  # noqa: BLE001 - a broken feed must fail the cell
            self.errors.append(f"producer: {type(e).__name__}: {e}")
        finally:
            self.produced_all.set()

    def ready(self, shards):
        """The next shard whose parents are read to their end, not taken yet."""
        for s in sorted(shards, key=lambda s: s["ShardId"]):
            sid = s["ShardId"]
            if sid in self.claimed:
                continue
            parents = [s.get("ParentShardId"), s.get("AdjacentParentShardId")]
            if all(p is None or p in self.done for p in parents):
                self.claimed.add(sid)
                return sid
        return None

    def consumer(self, n):
        try:
            while True:
                shards = self.shards()
                with self.lock:
                    sid = self.ready(shards)
                    finished = (self.produced_all.is_set()
                                and all(s["ShardId"] in self.done for s in shards))
                    if sid is not None and sid not in self.shard_index:
                        self.shard_index[sid] = len(self.shard_index)
                if finished:
                    return
                if sid is None:
                    time.sleep(0.2)
                    continue
                self.read_shard(n, sid)
                with self.progress:
                    self.done.add(sid)
                    self.progress.notify_all()
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"consumer {n}: {type(e).__name__}: {e}")
            self.produced_all.set()

    def read_shard(self, n, sid):
        idx = self.shard_index[sid]
        it = self.k.get_shard_iterator(StreamName=self.stream, ShardId=sid,
                                       ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        b = 0
        records = 0
        while True:
            all_put = self.produced_all.is_set()
            r = self.k.get_records(ShardIterator=it, Limit=self.batch)
            recs = r["Records"]
            if recs:
                lines = [rec["Data"].decode() for rec in recs]
                records += len(lines)
                self.deliver(idx, idx * 100000 + b, lines)
                b += 1
                with self.progress:
                    self.records_done += len(lines)
                    self.progress.notify_all()
            nxt = r.get("NextShardIterator")
            if nxt is None:
                self.note(f"consumer {n}: {sid} closed and read to its end ({records} records)")
                return
            if not recs:
                if all_put and not r.get("MillisBehindLatest"):
                    self.note(f"consumer {n}: {sid} read to the end of the input ({records} records)")
                    return
                time.sleep(0.2)
            it = nxt

    def run(self):
        self.put(self.halves[0])
        self.note(f"put the first half ({len(self.halves[0])} records) into 4 shards")
        threads = [threading.Thread(target=self.producer)]
        threads += [threading.Thread(target=self.consumer, args=(n,))
                    for n in range(self.consumers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return self.errors
