#!/usr/bin/env python3
"""Single scenarios of the fault campaign, run on their own: what the campaign meets by
chance, made to happen on purpose, to reproduce a failure and check its fix.

    scenario.py crossed [--pipeline kinesis_after] [--messages 20] [--reverse]
        Two `sluice run` processes over the same input at the same time, no faults. Each
        must finish promptly (they must not wait on each other for `pending_wait`), every
        message must be in the sink once, and the store calls are counted.
    scenario.py commit-outage [--pipeline kinesis] [--lease 3s] [--outage 8] [--outage-start 0]
                              [--times 10]
        One run while every commit fails for OUTAGE seconds from about its start (the lease
        shorter than that, renewals going through), then the same input again (a
        redelivery). The first run's delivered keys must end committed and the redelivery
        must send nothing again; repeated TIMES (the failure depends on timing).

Options common to both: --sluice (default target/debug/sluice), --out DIR. Exit status 0
when every check held. The pipelines and configs are the campaign's (campaign.py).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import campaign as c  # noqa: E402


def env_for(ddb_url, moto_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION=c.REGION,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_ENDPOINT_URL_DYNAMODB=ddb_url,
               AWS_ENDPOINT_URL_KINESIS=moto_url, AWS_ENDPOINT_URL_FIREHOSE=moto_url)
    env.pop("SLUICE_LOG", None)
    return env


def messages(n, tag):
    return [json.dumps({"uid": f"{tag}-{i}", "id": f"{tag}-{i}", "user": f"u{i % 7}"}) + "\n"
            for i in range(n)]


def start(a, out, name, config, env, text):
    (out / f"{name}.jsonl").write_text(text)
    return subprocess.Popen(
        [a.sluice, "run", "-c", str(config), "--ext-str", f"run={name}",
         "--undelivered", str(out / f"{name}.undelivered"), str(out / f"{name}.jsonl")],
        stdout=subprocess.DEVNULL, stderr=open(out / f"{name}.stderr", "w"), env=env)


def crossed(a, emu, out):
    spec = dict(c.MIXES["clean"], lease=a.lease)
    res = c.create_resources(a.pipeline, "sc1", emu, out, False)
    px = c.Proxy(emu.ddb, {}, 1, out, "dynamodb")
    config = out / "config.jsonnet"
    config.write_text(c.configs(a.pipeline, res, spec)["run"])
    env = env_for(px.url, emu.moto)
    lines = messages(a.messages, "m")
    t0 = time.time()
    procs = [start(a, out, "run0", config, env, "".join(lines)),
             start(a, out, "run1", config, env, "".join(reversed(lines) if a.reverse else lines))]
    ok = True
    for n, p in enumerate(procs):
        p.wait()
        took = time.time() - t0
        undelivered = (out / f"run{n}.undelivered").read_text().splitlines()
        print(f"run{n}: exit {p.returncode} after {took:.1f} s, {len(undelivered)} lines undelivered")
        if p.returncode != 0 or took > 10:
            ok = False
    px.stop()
    calls = px.read()[1]
    copies = Counter(i for i, _ in c.copies_of(a.pipeline, res, emu, []))
    print(f"store calls: {calls}")
    print(f"in the sink: {sum(copies.values())} copies of {len(copies)} of {a.messages} messages")
    acquires = sum(v for k, v in calls.items() if k.startswith("acquire:"))
    if acquires > 4 * a.messages:
        print(f"FAILED: {acquires} acquisitions for {a.messages} messages in two processes")
        ok = False
    return ok


def commit_outage(a, emu, out):
    spec = dict(c.MIXES["clean"], lease=a.lease)
    ok = True
    for t in range(a.times):
        d = out / f"try{t}"
        d.mkdir()
        res = c.create_resources(a.pipeline, f"sc2t{t}", emu, d, False)
        px = c.Proxy(emu.ddb, {"windows_at": [{"classes": ["commit"], "start": a.outage_start,
                                                "length": a.outage}]}, 1, d, "dynamodb")
        config = d / "config.jsonnet"
        config.write_text(c.configs(a.pipeline, res, spec)["run"])
        env = env_for(px.url, emu.moto)
        text = "".join(messages(a.messages, f"t{t}"))
        t0 = time.time()
        p = start(a, d, "first", config, env, text)
        if a.again_after is not None:
            # The redelivery comes while the first run is alive, retrying its commits.
            time.sleep(a.again_after)
            p2 = start(a, d, "again", config, env, text)
        p.wait()
        first = time.time() - t0
        if a.again_after is None:
            pending = sum(1 for s, _ in c.final_locks(a.pipeline, res, emu).values()
                          if s != "committed")
            p2 = start(a, d, "again", config, env, text)
        p2.wait()
        if a.again_after is not None:
            pending = sum(1 for s, _ in c.final_locks(a.pipeline, res, emu).values()
                          if s != "committed")
        px.stop()
        copies = Counter(r for _, r in c.copies_of(a.pipeline, res, emu, []))
        log = (d / "first.stderr").read_text()
        gave_up = " (it gave up settling)" if "could not settle" in log else ""
        taken = log.count("taken over after its lease ran out")
        taken = f" ({taken} keys taken over while it was alive)" if taken else ""
        print(f"try {t}: first run exit {p.returncode} after {first:.1f} s{taken}, "
              f"{pending} locks pending after it{gave_up}; "
              f"redelivery exit {p2.returncode}; copies per run {dict(copies)}")
        if pending or copies.get("again"):
            ok = False
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=["crossed", "commit-outage"])
    ap.add_argument("--pipeline", default=None)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--reverse", action="store_true", help="crossed: the second input reversed")
    ap.add_argument("--lease", default="3s")
    ap.add_argument("--outage", type=float, default=8.0, help="commit-outage: seconds")
    ap.add_argument("--outage-start", type=float, default=0.0,
                    help="commit-outage: seconds from the proxy's start (just before the run)")
    ap.add_argument("--times", type=int, default=10, help="commit-outage: tries")
    ap.add_argument("--again-after", type=float, default=None,
                    help="commit-outage: start the redelivery this many seconds after the "
                         "first run, while it is alive (default: after it exits)")
    ap.add_argument("--sluice", default=str(c.ROOT / "target/debug/sluice"))
    ap.add_argument("--out", default=str(c.ROOT / "target/faults/scenario"))
    a = ap.parse_args()
    a.pipeline = a.pipeline or ("kinesis_after" if a.scenario == "crossed" else "kinesis")
    if a.pipeline not in ("kinesis", "kinesis_after", "firehose", "file_after"):
        sys.exit("--pipeline: one of kinesis, kinesis_after, firehose, file_after")
    a.sluice = str(Path(a.sluice).resolve())
    out = Path(a.out) / a.scenario
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    emu = c.Emulators(out)
    try:
        ok = (crossed if a.scenario == "crossed" else commit_outage)(a, emu, out)
    finally:
        for px in list(c.LIVE_PROXIES):
            px.stop()
        emu.stop()
    print("ok" if ok else f"FAILED (details in {out})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
