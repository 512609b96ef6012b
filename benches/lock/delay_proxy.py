#!/usr/bin/env python3
"""A TCP delay proxy on loopback that also counts DynamoDB requests (Python stdlib only).

    delay_proxy.py LISTEN_PORT TARGET_HOST:PORT DELAY_MS [--counts FILE] [--trace FILE] [--threads]
                   [--bill]

Listens on 127.0.0.1:LISTEN_PORT (0: any free port) and forwards every connection to
TARGET_HOST:PORT, holding each chunk of bytes DELAY_MS (a float) in each direction, so a
request/response round trip gains 2 x DELAY_MS. Once listening it prints one line,
`listening 127.0.0.1:PORT`, on stdout.

TARGET `stub` forwards nothing: the proxy answers every request itself, 2 x DELAY_MS after
it was read to its end, with `200 {}` (what a successful PutItem or TransactWriteItems
returns), a `BatchGetItem` with no item for any key (`{"Responses": {TABLE: []}}`) and a
`BatchExecuteStatement` with a success per statement (`{"Responses": [{}, ...]}`): a
DynamoDB that costs no CPU, to see the client's own ceiling.

There is no netem on these machines (docs/performance.md), hence a proxy. Timing: one
thread runs every connection: select() wakes on readable sockets or at the earliest
deadline (its timeout is in microseconds, unlike epoll's milliseconds); each chunk read is
stamped arrival + delay and put on a heap; whatever is due is written at once (a deadline
that has passed is not waited for, so 0 ms adds only a loop turn). TCP_NODELAY is set on
both sockets; chunks of one direction keep their order; writes never block the loop.
Sequential PutItems to dynoxide took 0.43 ms direct and 5.71 ms with 2.5 ms each way: the
proxy adds ~0.14 ms per direction beyond the delay.

--threads instead runs a reader and a writer thread per connection and direction (the
writer sleeps until the deadline, then writes), the design of the Rust proxy in the
toolchain notes. In Python it does not keep up. Measured on the 2-core machine with a
no-op HTTP server and a client of 32 keep-alive connections sending back to back (both
std-only Rust), 2.5 ms each way: threads 3,200-3,350 requests/s at 1.3 cores, round trip
p50 9.2-9.7 ms instead of ~5.5 (GIL hand-offs between 128 threads); the event loop
5,200-5,300 requests/s at 0.3 cores, p50 5.8-6.0 ms, and 8,600 / 13,200 requests/s with
64 / 128 connections. With no delay: threads 7,700 requests/s, the loop 18,600.

Counting: the client-to-server stream is parsed as HTTP/1.1 requests (keep-alive
connections carry many; headers may be split across reads; bodies are skipped by
Content-Length or chunked framing) and every request is counted by its `X-Amz-Target`
header (`DynamoDB_20120810.PutItem` ...; `-` when absent). The bodies of
`TransactWriteItems`, `BatchExecuteStatement`, `BatchGetItem` and `UpdateItem` with a
Content-Length are read: a transaction whose updates set `:pending` takes locks, and is also
counted as `DynamoDB_20120810.TransactWriteItems/acquire`, its keys in `acquire_keys`; a
`BatchExecuteStatement` is also counted as `.../acquire` (statements that write `pending`,
or `epoch` with `lock_acquire: 'epochs'`, and not `committed`: its statements in
`acquire_keys`) or `.../commit` (statements that write `committed`; traced as such with
--trace). With `lock_acquire: 'epochs'` an `UpdateItem` of an epoch record (a partition key
value with `#epoch:`) is also counted as `.../UpdateItem/commit` (it adds to
`lock_committed`: one commits a batch; traced), `.../UpdateItem/abort` (a taker adds to
`lock_aborted`) or `.../UpdateItem/epoch` (anything else), and a `BatchGetItem` of epoch
records only as `.../BatchGetItem/epoch`. Parsing never delays forwarding: a chunk is
stamped and queued before it is parsed.

Billing (--bill, not with the stub or --threads): every DynamoDB call is billed in write and
read capacity units as DynamoDB bills it (billing.py says how). The proxy then holds each
request until it has been read to its end (its delay counts from its last byte; a request
almost always arrives in one read), adds `"ReturnConsumedCapacity": "TOTAL"` to the body of
each data-plane call that does not ask for it, fixing Content-Length (dynoxide 1.2.1 does not
verify the SigV4 signature, which covers the body; the SDK reads the added field into its
output and ignores it), and parses the answers, after forwarding them, to bill each call with
its request. It also counts the keys that acquisitions took (`acquired_keys`: those of
successful acquiring transactions, of successful statements of acquiring
`BatchExecuteStatement`s, and successful `UpdateItem`s that take a key: those that set
`:pending` or the status `epoch`, not an epoch record's).

With --trace FILE it also appends a line per request to FILE: when its head was parsed
(CLOCK_MONOTONIC seconds, Python's time.monotonic(), comparable across processes) and its
target, for timelines.

On SIGTERM or SIGINT it writes the counts as JSON to FILE (or to stdout without --counts),
then exits; SIGUSR1 writes them without exiting. The JSON:
    {"targets": {"DynamoDB_20120810.PutItem": 20000, ...}, "requests": N,
     "connections": N, "bytes_up": N, "bytes_down": N, "unparsed_connections": N,
     "acquire_keys": N, "delay_ms": D, "snapshot": K}
where K counts the snapshots written (a reader waits for it to grow after a SIGUSR1); with
--bill also "acquired_keys": N and "bill": {"write": W, "read": R, "kinds": {"UpdateItem
condition failed": {"calls": N, "write": W, "read": R}, ...}, "from_response": U,
"estimated": U, "unbilled": {error type: calls}, "mismatches": N, "mismatch_example": S}.
"""
import argparse
import collections
import email.utils
import heapq
import json
import os
import queue
import select
import signal
import socket
import sys
import threading
import time

import billing  # beside this file

RECV_BYTES = 65536
# A request head longer than this is not HTTP as we know it: stop parsing that connection
# (it is still forwarded) and report it as unparsed.
MAX_HEAD = billing.MAX_HEAD
# The requests whose bodies the counter reads (it skips the others'): to count what they do,
# and for the stub to answer them.
CAPTURED = (".TransactWriteItems", ".BatchExecuteStatement", ".BatchGetItem", ".UpdateItem")
# Values of the lock's status attribute (transforms/src/kv_store/aws_dynamodb): a statement
# that writes `committed` commits, one that writes only `pending` (or `epoch`, pending in an
# epoch: `lock_acquire: 'epochs'`) takes.
PENDING = {"S": "pending"}
EPOCH = {"S": "epoch"}
COMMITTED = {"S": "committed"}


def stub_response(target, body):
    """What the stub answers: `{}` (a success for an acquisition, an UpdateItem whose `{}`
    holds no old record, so the key was free, or a PutItem without ReturnValues, and for
    TransactWriteItems alike); a BatchGetItem that found no item; a BatchExecuteStatement
    whose every statement succeeded."""
    payload = b"{}"
    op = target.rsplit(".", 1)[-1]
    if body and op in ("BatchGetItem", "BatchExecuteStatement"):
        try:
            req = json.loads(body)
        except ValueError:
            req = {}
        req = req if isinstance(req, dict) else {}
        if op == "BatchGetItem":
            answer = {"Responses": {table: [] for table in req.get("RequestItems") or {}}}
        else:
            answer = {"Responses": [{} for _ in req.get("Statements") or []]}
        payload = json.dumps(answer, separators=(",", ":")).encode()
    # A `Date` header, as DynamoDB's every answer has: the lock measures its clock's offset
    # from it, and without one it would ask again (a DescribeTable) before every batch.
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
            b"Date: %s\r\nx-amzn-RequestId: stub\r\nContent-Length: %d\r\n\r\n"
            % (http_date(), len(payload))) + payload


def http_date():
    """This second as an HTTP date (`Sun, 06 Dec 2026 05:12:09 GMT`), made once a second."""
    now = int(time.time())
    if _DATE[0] != now:
        _DATE[0], _DATE[1] = now, email.utils.formatdate(now, usegmt=True).encode()
    return _DATE[1]


_DATE = [None, b""]


class Counts:
    def __init__(self, delay_ms, trace=None, bill=False):
        self.lock = threading.Lock()
        self.trace = trace  # a file: one line per request, "CLOCK_MONOTONIC-seconds target"
        self.targets = {}
        self.requests = 0
        self.connections = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.unparsed = 0
        self.acquire_keys = 0
        self.delay_ms = delay_ms
        self.ledger = billing.Ledger() if bill else None
        self.acquired_keys = 0  # keys that acquisitions took (--bill: their answers are read)
        self.snapshots = 0

    def request(self, target):
        with self.lock:
            self.requests += 1
            self.targets[target] = self.targets.get(target, 0) + 1
            if self.trace:
                self.trace.write(f"{time.monotonic():.6f} {target}\n")

    def transaction(self, target, body):
        """Counts a TransactWriteItems that takes locks (its updates set `:pending`). Returns
        what the transaction does, as the lock's store writes them (`acquire`, `commit`,
        `renew`, `abandon`, `release`, else `other`), and how many keys it asks to take."""
        try:
            items = json.loads(body).get("TransactItems", [])
        except ValueError:
            return "other", 0
        updates = [i["Update"].get("UpdateExpression", "") for i in items if isinstance(i, dict) and "Update" in i]
        if updates and all(":pending" in u for u in updates):
            with self.lock:
                kind = target + "/acquire"
                self.targets[kind] = self.targets.get(kind, 0) + 1
                self.acquire_keys += len(updates)
            return "acquire", len(updates)
        for what, mark in (("commit", ":committed"), ("abandon", ":ended"), ("renew", ":lease")):
            if updates and all(mark in u for u in updates):
                return what, 0
        if items and all(isinstance(i, dict) and "Delete" in i for i in items):
            return "release", 0
        return "other", 0

    def statements(self, target, body):
        """Counts a BatchExecuteStatement by what its statements do: `acquire` (they write
        `pending`, not `committed`), `commit` (they write `committed`), else `other`; and
        how many keys it asks to take."""
        try:
            statements = json.loads(body).get("Statements") or []
        except (ValueError, AttributeError):
            return "other", 0
        params = [s.get("Parameters") or [] if isinstance(s, dict) else [] for s in statements]
        if params and all(COMMITTED in p for p in params):
            what, keys = "commit", 0
        elif params and all((PENDING in p or EPOCH in p) and COMMITTED not in p for p in params):
            what, keys = "acquire", len(params)
        else:
            return "other", 0
        with self.lock:
            kind = f"{target}/{what}"
            self.targets[kind] = self.targets.get(kind, 0) + 1
            self.acquire_keys += keys
            if self.trace:
                self.trace.write(f"{time.monotonic():.6f} {kind}\n")
        return what, keys

    def epoch_call(self, target, body):
        """Counts an UpdateItem or BatchGetItem of epoch records (`lock_acquire: 'epochs'`) as
        `TARGET/commit`, `/abort` or `/epoch` (an UpdateItem, billing.epoch_update) or
        `TARGET/epoch` (a BatchGetItem of epoch records only), traced as such with --trace.
        Returns that label's suffix, or None for any other call (the body is parsed only
        when it names an epoch record)."""
        if not body or billing.EPOCH_MARK.encode() not in body:
            return None
        try:
            req = json.loads(body)
        except ValueError:
            return None
        if target.endswith(".UpdateItem"):
            what = billing.epoch_update(req)
        else:
            what = "epoch" if billing.epoch_read(req) else None
        if what:
            with self.lock:
                kind = f"{target}/{what}"
                self.targets[kind] = self.targets.get(kind, 0) + 1
                if self.trace:
                    self.trace.write(f"{time.monotonic():.6f} {kind}\n")
        return what

    @staticmethod
    def takes(body):
        """Whether an UpdateItem (not an epoch record's) takes a key: it sets `:pending`, or
        the status `epoch` (a takeover into the taker's epoch)."""
        if b":pending" in body:
            return True
        if b'"epoch"' not in body:
            return False
        try:
            values = json.loads(body).get("ExpressionAttributeValues") or {}
        except (ValueError, AttributeError):
            return False
        return EPOCH in values.values()

    def response(self, call, status, body):
        """--bill: one answered call, `call` as RequestFramer queued it."""
        op, label, keys, req_body = call
        with self.lock:
            resp = self.ledger.add(op, label, status, req_body, body)
            if status == 200 and keys and op == "BatchExecuteStatement":
                # The statements that took their key (the others failed, each alone).
                answers = (resp or {}).get("Responses") or []
                keys = sum(1 for a in answers if isinstance(a, dict) and "Error" not in a)
            if status == 200 and keys:
                self.acquired_keys += keys

    def add(self, field, n):
        with self.lock:
            setattr(self, field, getattr(self, field) + n)

    def snapshot(self):
        with self.lock:
            self.snapshots += 1
            out = {
                "targets": dict(sorted(self.targets.items())),
                "requests": self.requests,
                "connections": self.connections,
                "bytes_up": self.bytes_up,
                "bytes_down": self.bytes_down,
                "unparsed_connections": self.unparsed,
                "acquire_keys": self.acquire_keys,
                "delay_ms": self.delay_ms,
                "snapshot": self.snapshots,
            }
            if self.ledger:
                out["acquired_keys"] = self.acquired_keys
                out["bill"] = self.ledger.snapshot()
            return out


class RequestCounter:
    """Incremental HTTP/1.1 request framing over one connection's client-to-server bytes."""

    def __init__(self, counts, on_request=None):
        self.counts = counts
        # Called with the target and the body (None unless captured) when a request has been
        # read to its end.
        self.on_request = on_request
        self.buf = bytearray()  # unparsed head or chunk-size line bytes
        self.skip = 0  # body bytes still to skip
        self.capture = 0  # body bytes to read (a CAPTURED request)
        self.body = None  # the captured body of the request being ended
        self.target = "-"
        self.state = "head"  # head | body | chunk_size | chunk_data | trailer
        self.broken = False

    def feed(self, data):
        if self.broken:
            return
        if self.skip:
            if len(data) < self.skip:
                self.skip -= len(data)
                return
            data = data[self.skip :]
            self.skip = 0
            self.skipped()
        self.buf += data
        self.parse()

    def skipped(self):
        if self.state == "body":
            self.ended()
        else:
            self.state = "chunk_size"

    def ended(self):
        self.state = "head"
        body, self.body = self.body, None
        if self.on_request is not None:
            self.on_request(self.target, body)

    def parse(self):
        while not self.broken:
            if self.skip:
                take = min(self.skip, len(self.buf))
                del self.buf[:take]
                self.skip -= take
                if self.skip:
                    return  # feed() skips the rest as it arrives
                self.skipped()
            elif self.state == "capture":
                if len(self.buf) < self.capture:
                    return
                body = bytes(self.buf[: self.capture])
                del self.buf[: self.capture]
                if self.target.endswith(".TransactWriteItems"):
                    self.counts.transaction(self.target, body)
                elif self.target.endswith(".BatchExecuteStatement"):
                    self.counts.statements(self.target, body)
                elif self.target.endswith((".UpdateItem", ".BatchGetItem")):
                    self.counts.epoch_call(self.target, body)
                self.body = body
                self.ended()
            elif self.state in ("body", "chunk_data"):
                self.skipped()  # a body that ended exactly at a read boundary
            elif self.state == "head":
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.give_up()
                    return
                head = bytes(self.buf[:end])
                del self.buf[: end + 4]
                self.on_head(head)
            elif self.state == "chunk_size":
                end = self.buf.find(b"\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.give_up()
                    return
                line = bytes(self.buf[:end]).split(b";", 1)[0].strip()
                del self.buf[: end + 2]
                try:
                    size = int(line, 16)
                except ValueError:
                    self.give_up()
                    return
                if size == 0:
                    self.state = "trailer"
                else:
                    self.state = "chunk_data"
                    self.skip = size + 2  # the data and its CRLF
            else:  # trailer: header lines up to an empty one
                end = self.buf.find(b"\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEAD:
                        self.give_up()
                    return
                del self.buf[: end + 2]
                if end == 0:
                    self.ended()

    def on_head(self, head):
        target = "-"
        length = 0
        chunked = False
        lines = head.split(b"\r\n")
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            name = name.strip().lower()
            if name == b"x-amz-target":
                target = value.strip().decode("latin-1")
            elif name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    self.give_up()
                    return
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        self.counts.request(target)
        self.target = target
        if chunked:
            self.state = "chunk_size"
        elif length and target.endswith(CAPTURED):
            self.state = "capture"
            self.capture = length
        elif length:
            self.state = "body"
            self.skip = length
        else:
            self.ended()

    def give_up(self):
        self.broken = True
        self.buf = bytearray()
        self.counts.add("unparsed", 1)


class Side:
    """One socket of a proxied pair, in the event loop: what is due to be written to it."""

    __slots__ = ("sock", "peer", "out", "shut_due", "shut", "reading", "counter", "field", "closed", "framer",
                 "parser")

    def __init__(self, sock, field, counter):
        self.sock = sock
        self.peer = None
        self.out = bytearray()  # due bytes not yet accepted by the kernel
        self.shut_due = False  # the peer's EOF is due: shut our write side once out is empty
        self.shut = False
        self.reading = True
        self.counter = counter  # a RequestCounter for the client side
        self.field = field  # what reading from this socket counts as
        self.closed = False
        self.framer = None  # --bill: the client side's billing.RequestFramer (it forwards what it reads)
        self.parser = None  # --bill: the server side's billing.ResponseParser


class Loop:
    """Every connection in one thread: select() with microsecond timeouts and a heap of
    (deadline, chunk). No thread hand-offs, so the cost per request is a few system calls;
    select() takes file descriptors below 1024, so up to ~500 connections at once."""

    def __init__(self, listener, target, delay_s, counts, wake):
        self.listener = listener
        self.target = target
        self.delay_s = delay_s
        self.counts = counts
        self.wake = wake
        self.heap = []
        self.seq = 0
        self.now = time.monotonic()  # when the chunk being read arrived
        self.sides = {}  # socket -> Side

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except BlockingIOError:
                return
            self.counts.add("connections", 1)
            try:
                if client.fileno() > 1000:
                    raise OSError("too many connections for select()")
                server = None if self.target is None else socket.create_connection(self.target)
            except OSError as e:
                where = "the stub" if self.target is None else f"{self.target[0]}:{self.target[1]}"
                print(f"delay_proxy: cannot serve a connection to {where}: {e}", file=sys.stderr)
                client.close()
                continue
            c = Side(client, "bytes_up", None)
            if server is None:
                # The stub: each request, once read to its end, is answered 2 x delay later.
                c.counter = RequestCounter(
                    self.counts, lambda target, body, c=c: self.push(2 * self.delay_s, c, stub_response(target, body)))
                pair = (c,)
            else:
                v = Side(server, "bytes_down", None)
                c.peer, v.peer = v, c
                pair = (c, v)
                if self.counts.ledger is None:
                    c.counter = RequestCounter(self.counts)
                else:
                    calls = collections.deque()
                    c.framer = billing.RequestFramer(self.counts, lambda data, v=v: self.push(self.delay_s, v, data), calls)
                    v.parser = billing.ResponseParser(self.counts, calls)
            for side in pair:
                side.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                side.sock.setblocking(False)
                self.sides[side.sock] = side

    def push(self, delay_s, dst, data):
        self.seq += 1
        heapq.heappush(self.heap, (self.now + delay_s, self.seq, dst, data))

    def close_pair(self, side):
        for x in (side, side.peer):
            if x is not None and not x.closed:
                x.closed = True
                self.sides.pop(x.sock, None)
                x.sock.close()

    def read(self, side, now):
        try:
            data = side.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:
            self.close_pair(side)  # reset: nothing more will be delivered either way
            return
        self.now = now
        if side.framer is not None and data:
            # --bill: the framer forwards whole requests itself.
            self.counts.add(side.field, len(data))
            side.framer.feed(data)
            return
        if side.framer is not None:
            side.framer.end()  # what it holds goes on before the end
        if side.peer is not None:
            self.push(self.delay_s, side.peer, data)
        if not data:
            side.reading = False
            if side.peer is None:
                self.push(2 * self.delay_s, side, b"")  # the stub's end, after its answers
            return
        self.counts.add(side.field, len(data))
        if side.counter is not None:
            side.counter.feed(data)
        if side.parser is not None:
            side.parser.feed(data)

    def flush(self, side):
        if side.closed:
            return
        try:
            if side.out:
                n = side.sock.send(side.out)
                del side.out[:n]
            if not side.out and side.shut_due and not side.shut:
                side.sock.shutdown(socket.SHUT_WR)
                side.shut = True
        except BlockingIOError:
            return
        except OSError:
            self.close_pair(side)
            return
        if side.shut and (side.peer is None or side.peer.shut):
            self.close_pair(side)  # both directions ended and were delivered

    def run(self, on_signal):
        while True:
            readers = [self.listener, self.wake]
            writers = []
            for sock, side in self.sides.items():
                if side.reading:
                    readers.append(sock)
                if side.out:
                    writers.append(sock)
            timeout = None
            if self.heap:
                timeout = max(0.0, self.heap[0][0] - time.monotonic())
            r, w, _ = select.select(readers, writers, [], timeout)
            now = time.monotonic()
            for sock in r:
                if sock is self.listener:
                    self.accept()
                elif sock is self.wake:
                    on_signal(self.wake.recv(64))
                else:
                    side = self.sides.get(sock)
                    if side is not None and not side.closed:
                        self.read(side, now)
            for sock in w:
                side = self.sides.get(sock)
                if side is not None:
                    self.flush(side)
            # Deliver what is due; a deadline that has passed is not waited for.
            now = time.monotonic()
            while self.heap and self.heap[0][0] <= now:
                _, _, dst, data = heapq.heappop(self.heap)
                if dst.closed:
                    continue
                if data:
                    dst.out += data
                else:
                    dst.shut_due = True
                self.flush(dst)


def pipe(src, dst, delay_s, counts, field, counter):
    """--threads: one direction of one connection, a reader (this thread) and a writer."""
    q = queue.SimpleQueue()

    def writer():
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            # The peer went away: make the reader of this direction stop too.
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    try:
        while True:
            try:
                data = src.recv(RECV_BYTES)
            except OSError:
                break
            if not data:
                break
            q.put((time.monotonic() + delay_s, data))
            counts.add(field, len(data))
            if counter is not None:
                counter.feed(data)
    finally:
        q.put(None)
        w.join()


def handle(client, target, delay_s, counts):
    try:
        server = socket.create_connection(target)
    except OSError as e:
        print(f"delay_proxy: cannot connect to {target[0]}:{target[1]}: {e}", file=sys.stderr)
        client.close()
        return
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    down = threading.Thread(
        target=pipe, args=(server, client, delay_s, counts, "bytes_down", None), daemon=True
    )
    down.start()
    pipe(client, server, delay_s, counts, "bytes_up", RequestCounter(counts))
    down.join()
    client.close()
    server.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("listen_port", type=int)
    ap.add_argument("target", help="HOST:PORT, or stub")
    ap.add_argument("delay_ms", type=float, help="added in each direction")
    ap.add_argument("--counts", help="write the counts here (JSON) on SIGTERM/SIGINT/SIGUSR1")
    ap.add_argument("--trace", help="append one line per request here: monotonic seconds, X-Amz-Target")
    ap.add_argument("--threads", action="store_true",
                    help="a reader and a writer thread per direction instead of the event loop (slower; for comparison)")
    ap.add_argument("--bill", action="store_true",
                    help="bill every DynamoDB call in capacity units (billing.py), asking the server for its "
                         "ConsumedCapacity; the counts get `bill` and `acquired_keys`")
    args = ap.parse_args()
    if args.target == "stub":
        target = None
    else:
        host, _, port = args.target.rpartition(":")
        target = (host or "127.0.0.1", int(port))
    if target is None and args.threads:
        ap.error("the stub needs the event loop (no --threads)")
    if args.bill and (target is None or args.threads):
        ap.error("--bill needs a server to answer (not the stub) and the event loop (no --threads)")
    delay_s = max(args.delay_ms, 0.0) / 1000.0
    trace = open(args.trace, "a", buffering=1 << 20) if args.trace else None
    counts = Counts(args.delay_ms, trace, args.bill)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.listen_port))
    listener.listen(512)

    def write_counts():
        if trace:
            with counts.lock:
                trace.flush()
        text = json.dumps(counts.snapshot(), indent=1) + "\n"
        if args.counts:
            tmp = args.counts + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, args.counts)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    def on_signal(signums):
        try:
            write_counts()
        except OSError as e:
            print(f"delay_proxy: cannot write the counts: {e}", file=sys.stderr)
        if any(n != signal.SIGUSR1 for n in signums):
            os._exit(0)

    # Signals reach the main thread's select() through a socket (the handlers do nothing
    # themselves), so the counts are written outside any lock or half-done update.
    wake, wake_w = socket.socketpair()
    wake.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda *_: None)

    if args.threads:
        def accept():
            while True:
                client, _ = listener.accept()
                counts.add("connections", 1)
                threading.Thread(target=handle, args=(client, target, delay_s, counts), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        print(f"listening 127.0.0.1:{listener.getsockname()[1]}", flush=True)
        while True:
            select.select([wake], [], [])
            on_signal(wake.recv(64))
    else:
        listener.setblocking(False)
        print(f"listening 127.0.0.1:{listener.getsockname()[1]}", flush=True)
        Loop(listener, target, delay_s, counts, wake).run(on_signal)


if __name__ == "__main__":
    main()
