#!/usr/bin/env python3
"""The Lambda benchmark: init time and peak memory of the sluice-lambda bootstrap.

A stdlib Lambda runtime API (the same three routes Lambda serves) hands the release
bootstrap one Kinesis event of N records of JSON, 1 KB each by default
(AWS_KINESIS_DATA_STREAM, the pipeline of benches/lambda/config.jsonnet). It measures

- init: from spawning the process to its first `GET /runtime/invocation/next` (config loaded,
  pipeline built, runtime started), with the config as Jsonnet and compiled to JSON;
- the invocation: from handing out the event to the response;
- peak RSS (VmHWM) once the response is in, before the process is stopped;

and, as the baseline measured in the same run, the spawn-to-exit time of `sluice --version`
(the cost of starting a process of this size at all). Medians over --runs.

    python3 benches/lambda/bench.py [--records 10000] [--runs 5]

Large records: `--record-bytes 900000` makes each record's JSON that long (a Kinesis record
holds at most 1 MiB) and, without --records, puts as many in the event as fit in Lambda's
6 MB payload limit (their data is base64, 4/3 of it); `--shape keys` makes each record an
object of many small keys instead of one long string (a document that parses larger).
"""
import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOOTSTRAP = os.path.join(ROOT, "target-bench/release/sluice-lambda")
SLUICE = os.path.join(ROOT, "target-bench/release/sluice")
CONFIG = os.path.join(ROOT, "benches/lambda/config.jsonnet")


# Lambda's limit on a synchronous invocation's payload, "6 MB" (reference/aws-contracts.md),
# enforced as 6,291,456 bytes.
PAYLOAD_LIMIT = 6 * 1024 * 1024


def record_data(i, size, shape):
    """Record i's JSON, `size` bytes long (give or take a few for `keys`)."""
    body = {"id": "e%d" % i, "user": "User%d" % (i % 97), "ts": 1700000000 + i}
    if shape == "keys":
        fields = {}
        n = len(compact(body)) + len(',"fields":{}')
        while True:
            k, v = "k%06d" % len(fields), "v%06d-xxxxxxxxxxxxxxxxxxxx" % len(fields)
            if n + len(k) + len(v) + 6 > size:
                break
            fields[k] = v
            n += len(k) + len(v) + 6
        body["fields"] = fields
    else:
        body["pad"] = "x" * max(0, size - len(compact(body)) - len(',"pad":""'))
    return compact(body).encode()


def compact(v):
    return json.dumps(v, separators=(",", ":"))


def kinesis_record(i, data):
    return {
        "kinesis": {
            "partitionKey": "pk%d" % (i % 16),
            "sequenceNumber": str(49590338271490256608559692538361571095921575989136588801 + i),
            "data": base64.b64encode(data).decode(),
            "approximateArrivalTimestamp": 1700000000.0,
            "kinesisSchemaVersion": "1.0",
        },
        "eventSource": "aws:kinesis",
        "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/bench",
    }


def kinesis_event(n, size=1024, shape="pad"):
    """An event of n records of `size` bytes; n None: as many as fit in PAYLOAD_LIMIT."""
    records = []
    i = 0
    total = len('{"Records": []}')
    while n is None or i < n:
        r = json.dumps(kinesis_record(i, record_data(i, size, shape)))
        if n is None and total + len(r) + 2 > PAYLOAD_LIMIT:
            break
        records.append(r)
        total += len(r) + 2
        i += 1
    return ('{"Records": [' + ", ".join(records) + "]}").encode(), len(records)


class QuietServer(ThreadingHTTPServer):
    """Says nothing of the connection the stopped bootstrap leaves waiting on `next`."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class Api:
    """One invocation: the event, then a `next` that never answers."""

    def __init__(self, event):
        self.event = event
        self.first_next = None
        self.handed = None
        self.response = None
        self.done = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if not self.path.endswith("/runtime/invocation/next"):
                    self.send_error(404)
                    return
                if api.first_next is None:
                    api.first_next = time.perf_counter()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Lambda-Runtime-Aws-Request-Id", "bench-1")
                    self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 900000))
                    self.send_header("Lambda-Runtime-Invoked-Function-Arn",
                                     "arn:aws:lambda:us-east-1:123456789012:function:bench")
                    self.send_header("Content-Length", str(len(api.event)))
                    self.end_headers()
                    api.handed = time.perf_counter()
                    self.wfile.write(api.event)
                else:
                    api.done.wait(120)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                api.response = (self.path, body)
                api.responded = time.perf_counter()
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                api.done.set()

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self):
        return self.server.server_address[1]


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def one_run(bootstrap, event, config):
    api = Api(event)
    env = dict(os.environ)
    env.update({
        "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:%d" % api.port,
        "AWS_LAMBDA_FUNCTION_NAME": "bench",
        "AWS_LAMBDA_FUNCTION_VERSION": "1",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "SLUICE_CONFIG": config,
        "SLUICE_LAMBDA_HANDLER": "AWS_KINESIS_DATA_STREAM",
        "SLUICE_REPORT_BATCH_ITEM_FAILURES": "true",
        "SLUICE_LOG": "warn",
        "AWS_REGION": "us-east-1",
    })
    t0 = time.perf_counter()
    p = subprocess.Popen([bootstrap], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not api.done.wait(300):
        p.kill()
        sys.exit("no response: %s" % p.stderr.read().decode())
    hwm = vm_hwm_kib(p.pid)
    p.kill()
    p.wait()
    api.server.shutdown()
    path, body = api.response
    if not path.endswith("/response") or json.loads(body) != {"batchItemFailures": []}:
        sys.exit("unexpected answer %s: %s" % (path, body[:300]))
    return {
        "init_ms": (api.first_next - t0) * 1e3,
        "invoke_ms": (api.responded - api.handed) * 1e3,
        "rss_mib": hwm / 1024,
    }


def spawn_ms(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=None,
                    help="records in the event (default 10000, or as many as fit in 6 MB "
                    "with --record-bytes)")
    ap.add_argument("--record-bytes", type=int, default=None,
                    help="bytes of JSON per record (default 1024; at most 1 MiB)")
    ap.add_argument("--shape", choices=("pad", "keys"), default="pad",
                    help="a record is a few keys and one long string (pad) or many small keys")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--config", default=CONFIG, help="the pipeline (default: %(default)s)")
    ap.add_argument("--bootstrap", default=BOOTSTRAP, help="the sluice-lambda binary")
    ap.add_argument("--sluice", default=SLUICE, help="the sluice binary (compiles the config)")
    a = ap.parse_args()
    for b in (a.bootstrap, a.sluice):
        if not os.access(b, os.X_OK):
            sys.exit("%s is missing: scripts/bench.sh lambda builds it" % b)
    if a.record_bytes is not None and not 0 < a.record_bytes <= 1 << 20:
        sys.exit("--record-bytes: a Kinesis record holds 1 to 1048576 bytes")
    records = a.records
    if records is None and a.record_bytes is None:
        records = 10000
    size = a.record_bytes or 1024
    event, records = kinesis_event(records, size, a.shape)
    with tempfile.TemporaryDirectory() as d:
        compiled = os.path.join(d, "config.json")
        out = subprocess.run([a.sluice, "build", "--stdout", a.config], capture_output=True)
        if out.returncode != 0:
            sys.exit("could not compile the config: %s" % out.stderr.decode())
        with open(compiled, "wb") as f:
            f.write(out.stdout)
        rows = {"jsonnet": [], "json": [], "baseline": []}
        for _ in range(a.runs):
            rows["baseline"].append(spawn_ms([a.sluice, "--version"]))
            rows["jsonnet"].append(one_run(a.bootstrap, event, a.config))
            rows["json"].append(one_run(a.bootstrap, event, compiled))
    med = statistics.median
    base = med(rows["baseline"])
    print("event: %d Kinesis records of %d bytes (%s; %.2f MB of JSON), %d runs, medians [min-max]"
          % (records, size, a.shape, len(event) / 1e6, a.runs))
    print("| config | init ms | init / baseline | invocation ms | peak RSS MiB |")
    print("|---|---|---|---|---|")
    for name in ("jsonnet", "json"):
        r = rows[name]
        init = [x["init_ms"] for x in r]
        inv = [x["invoke_ms"] for x in r]
        rss = [x["rss_mib"] for x in r]
        print("| %s | %.1f [%.1f-%.1f] | %.2f | %.0f [%.0f-%.0f] | %.1f [%.1f-%.1f] |" % (
            name, med(init), min(init), max(init), med(init) / base,
            med(inv), min(inv), max(inv), med(rss), min(rss), max(rss)))
    print("| baseline: `sluice --version` spawn to exit | %.1f [%.1f-%.1f] | 1.00 | | |"
          % (base, min(rows["baseline"]), max(rows["baseline"])))


if __name__ == "__main__":
    main()
