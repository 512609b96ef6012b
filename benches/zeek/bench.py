#!/usr/bin/env python3
"""The Zeek conn log -> ECS throughput benchmark: sluice against jq, in the same run.

Generates N Zeek conn events (gen_zeek_conn.py), maps them to ECS with
`jq -c -f zeek_to_ecs.jq` and with `sluice run --workers 1` over the equivalent Jsonnet
pipeline (examples/benchmark/zeek_to_ecs/config.jsonnet), checks that both produce the same
events (compared as parsed JSON, line by line), and prints a table: wall time, events/s,
CPU time (user+sys), events per CPU-second and peak RSS, each the median of --runs runs,
with the sluice/jq ratios. Both tools read the same file from stdin and write to a file.

Usage: benches/zeek/bench.py [--events 200000] [--runs 3] [--sluice target/release/sluice]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def measure(cmd, stdin_path, stdout_path):
    """Runs cmd with stdin/stdout redirected; returns (wall s, cpu s, peak RSS MiB)."""
    with open(stdin_path, "rb") as fin, open(stdout_path, "wb") as fout:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def compare(a_path, b_path):
    """Counts lines and asserts they are equal as JSON."""
    n = 0
    with open(a_path) as a, open(b_path) as b:
        for n, (la, lb) in enumerate(zip(a, b), 1):
            ja, jb = json.loads(la), json.loads(lb)
            if ja != jb:
                sys.exit(f"outputs differ at line {n}:\n jq:     {la.strip()}\n sluice: {lb.strip()}")
        rest_a, rest_b = a.read(), b.read()
    if rest_a or rest_b:
        sys.exit("outputs differ in length")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target", "release", "sluice"))
    ap.add_argument("--jq", default="jq")
    ap.add_argument("--config", default=os.path.join(ROOT, "examples", "benchmark", "zeek_to_ecs", "config.jsonnet"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        events = os.path.join(tmp, "conn.jsonl")
        with open(events, "wb") as f:
            subprocess.run([sys.executable, os.path.join(HERE, "gen_zeek_conn.py"), str(args.events), "1"], stdout=f, check=True)
        tools = {
            "jq": [args.jq, "-c", "-f", os.path.join(HERE, "zeek_to_ecs.jq")],
            "sluice": [args.sluice, "run", "--workers", "1", "--config", args.config],
        }
        results = {name: [] for name in tools}
        outs = {name: os.path.join(tmp, f"{name}.jsonl") for name in tools}
        for _ in range(args.runs):
            for name, cmd in tools.items():  # interleaved, so both see the same machine load
                results[name].append(measure(cmd, events, outs[name]))
        lines = compare(outs["jq"], outs["sluice"])
        if lines != args.events:
            sys.exit(f"expected {args.events} output events, got {lines}")

    def med(name, i):
        return statistics.median(r[i] for r in results[name])

    print(f"Zeek conn -> ECS, {args.events} events, median of {args.runs} runs; outputs equal ({lines} events)")
    print(f"{'tool':<8} {'wall s':>8} {'events/s':>11} {'cpu s':>8} {'events/cpu-s':>13} {'peak RSS MiB':>13}")
    for name in tools:
        wall, cpu, rss = med(name, 0), med(name, 1), med(name, 2)
        print(f"{name:<8} {wall:>8.3f} {args.events / wall:>11,.0f} {cpu:>8.3f} {args.events / cpu:>13,.0f} {rss:>13.1f}")
    wall_ratio = med("jq", 0) / med("sluice", 0)
    cpu_ratio = med("jq", 1) / med("sluice", 1)
    print(f"sluice/jq: {wall_ratio:.1f}x events/s (wall), {cpu_ratio:.1f}x events per CPU-second")
    # Each sluice run against the jq run beside it: shows how much the machine moved.
    pairs = sorted(j[0] / s[0] for j, s in zip(results["jq"], results["sluice"]))
    walls = sorted(args.events / r[0] for r in results["sluice"])
    print(f"per run: sluice {walls[0]:,.0f} to {walls[-1]:,.0f} events/s; sluice/jq {pairs[0]:.1f}x to {pairs[-1]:.1f}x")


if __name__ == "__main__":
    main()
