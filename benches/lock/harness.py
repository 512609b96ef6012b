"""What benches/lock/bench.py and units.py share (Python stdlib only): the processes they
start (dynoxide, delay_proxy.py, sluice) and stop, the bench's own DynamoDB calls (SigV4
with the test credentials: table set-up, the round-trip probe), the pipeline's config and
input, and the check of what came out.
"""
import datetime
import hashlib
import hmac
import http.client
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DYNOXIDE = os.path.join(ROOT, ".emulators", "node_modules", "@dynoxide", "linux-x64", "dynoxide")
TABLE = "sluice-bench-locks"
REGION = "us-east-1"
MARK = b'"bench_locked":true'

CHILDREN = []  # every process started, stopped on the way out whatever happens


def die(msg):
    sys.exit(f"lock bench: {msg}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            die(f"{what} exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    die(f"{what} is not listening on 127.0.0.1:{port} after {timeout:.0f} s")


def stop(proc, sig=signal.SIGTERM, timeout=10.0):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in CHILDREN:
        CHILDREN.remove(proc)


# --- DynamoDB calls from the bench itself (table set-up, round-trip probe) ---------------


def sigv4_headers(host, target, body):
    """SigV4 with the test credentials. dynoxide 1.2.1 rejects a request without a well-formed
    Authorization header (MissingAuthenticationToken) but does not check the signature
    itself; signing properly keeps the bench working against one that does."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {
        "content-type": "application/x-amz-json-1.0",
        "host": host,
        "x-amz-date": amz_date,
        "x-amz-target": target,
    }
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        ["POST", "/", ""]
        + [f"{k}:{headers[k]}" for k in sorted(headers)]
        + ["", signed, hashlib.sha256(body).hexdigest()]
    )
    scope = f"{day}/{REGION}/dynamodb/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + "test").encode()
    for part in (day, REGION, "dynamodb", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential=test/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return headers


class Dynamo:
    def __init__(self, port):
        self.host = f"127.0.0.1:{port}"
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def call(self, op, payload):
        body = json.dumps(payload).encode()
        self.conn.request("POST", "/", body, sigv4_headers(self.host, "DynamoDB_20120810." + op, body))
        resp = self.conn.getresponse()
        data = json.loads(resp.read() or b"{}")
        return resp.status, data

    def close(self):
        self.conn.close()


def create_table(port):
    db = Dynamo(port)
    status, data = db.call(
        "CreateTable",
        {
            "TableName": TABLE,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "PK", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}],
        },
    )
    if status != 200:
        die(f"CreateTable: HTTP {status}: {data}")
    for _ in range(100):
        status, data = db.call("DescribeTable", {"TableName": TABLE})
        if status == 200 and data["Table"]["TableStatus"] == "ACTIVE":
            break
        time.sleep(0.05)
    else:
        die(f"table {TABLE} not ACTIVE: {data}")
    db.call(
        "UpdateTimeToLive",
        {"TableName": TABLE, "TimeToLiveSpecification": {"Enabled": True, "AttributeName": "ttl"}},
    )
    db.close()


def probe_rtt(port, n=200):
    """Median of n sequential PutItems (Python client, one keep-alive connection), ms."""
    db = Dynamo(port)
    tag = uuid.uuid4().hex[:8]
    times = []
    for i in range(n):
        start = time.perf_counter()
        status, data = db.call("PutItem", {"TableName": TABLE, "Item": {"PK": {"S": f"probe-{tag}-{i}"}}})
        times.append(time.perf_counter() - start)
        if status != 200:
            die(f"probe PutItem: HTTP {status}: {data}")
    db.close()
    return statistics.median(times) * 1000


# --- processes -------------------------------------------------------------------------


def start_dynoxide(path):
    port = free_port()
    proc = subprocess.Popen(
        [path, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C reaches it through our clean-up, not twice
    )
    CHILDREN.append(proc)
    wait_listening(port, proc, "dynoxide")
    return proc, port


def start_proxy(target_port, delay_ms, counts_path, trace_path=None, bill=False):
    for path in (counts_path, trace_path):
        if path and os.path.exists(path):
            os.remove(path)  # never read an earlier run's counts
    target = "stub" if target_port == "stub" else f"127.0.0.1:{target_port}"
    cmd = [sys.executable, os.path.join(HERE, "delay_proxy.py"), "0", target, str(delay_ms), "--counts", counts_path]
    if trace_path:
        cmd += ["--trace", trace_path]
    if bill:
        cmd.append("--bill")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True)
    CHILDREN.append(proc)
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("listening "):
        stop(proc, signal.SIGKILL)
        die(f"the delay proxy did not start (said {line!r})")
    # It prints the line after listen(): connections from now on are accepted.
    return proc, int(line.rsplit(":", 1)[1])


def stop_proxy(proc, counts_path):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        stop(proc, signal.SIGKILL)
        die("the delay proxy did not exit on SIGTERM")
    stop(proc)
    proc.stdout.close()
    with open(counts_path) as f:
        return json.load(f)


def proxy_counts(proc, counts_path, timeout=5.0):
    """The counts of a running proxy (it writes them on SIGUSR1)."""
    seen = -1
    if os.path.exists(counts_path):
        with open(counts_path) as f:
            seen = json.load(f).get("snapshot", -1)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(counts_path):
            with open(counts_path) as f:
                counts = json.load(f)
            if counts.get("snapshot", -1) > seen:
                return counts
        time.sleep(0.02)
    die("the delay proxy did not write its counts on SIGUSR1")



def cpu_s(pid):
    """User + system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_s():
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")



def write_input(path, n, seen_every=0):
    """n messages with unique ids `evt-N`; with `seen_every` k, only every k-th has such an id
    (one a run over the plain input saw), the others `mix-N`, ids of their own."""
    with open(path, "w") as f:
        for i in range(n):
            key = f"mix-{i:08d}" if seen_every and i % seen_every else f"evt-{i:08d}"
            f.write(
                json.dumps(
                    {"id": key, "host": f"web-{i % 17}", "bytes": 100 + i % 9000, "msg": "GET /index.html 200"},
                    separators=(",", ":"),
                )
                + "\n"
            )


def write_config(path, prefix, concurrency, acquire=None, lease=None, hold=False):
    """The bench's pipeline; `hold` puts a one-hour `utility_delay` between the lock and the
    send, so that the process holds every key pending until it is killed."""
    extra = "" if concurrency is None else f"\n      concurrency: {concurrency},"
    if lease is not None:
        extra += f"\n      lease: '{lease}',"
    store_extra = "" if acquire is None else f"\n  lock_acquire: '{acquire}',"
    held = "\n    sub.tf.util.delay({ duration: '1h' }),  // keys stay pending: the process is killed here" if hold else ""
    text = f"""// Generated by benches/lock/bench.py.
local sub = std.extVar('sub');
local kv = sub.kv_store.aws.dynamodb({{
  aws: {{ arn: '{TABLE}' }},
  attributes: {{ partition_key: 'PK', ttl: 'ttl' }},{store_extra}
}});
{{
  transforms: [
    sub.tf.meta.kv_store.lock({{
      kv_store: kv,
      prefix: '{prefix}',
      ttl_offset: '1h',
      object: {{ source_key: 'id' }},{extra}
      transforms: [
        sub.tf.obj.insert({{ obj: {{ trg: 'bench_locked' }}, value: true }}),
      ],
    }}),{held}
    sub.tf.send.stdout(),
  ],
}}
"""
    with open(path, "w") as f:
        f.write(text)


def sluice_env(port):
    env = dict(os.environ)
    env.update(
        AWS_ENDPOINT_URL_DYNAMODB=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
    )
    for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(k, None)
    return env


def input_file(tmp, n):
    inp = os.path.join(tmp, f"input-{n}.jsonl")
    if not os.path.exists(inp):
        write_input(inp, n)
    return inp


def check_output(label, path, messages, marked_expected):
    """Every message came out, `marked_expected` of them through the inner transform."""
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    marked = sum(1 for line in lines if MARK in line)
    if len(lines) != messages or marked != marked_expected:
        die(f"{label}: expected {messages} messages out, {marked_expected} of them locked and processed; "
            f"got {len(lines)}, {marked} processed")


class Run:
    """One sluice run: wall time, CPU of each process, DynamoDB calls, phases."""

    def __init__(self, **kw):
        self.__dict__.update(kw)
