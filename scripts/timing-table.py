#!/usr/bin/env python3
"""The markdown table of alternating timing rounds inside NCCL (scripts/gpu-ab.sh,
bench/proto/nccl-cost/run.sh): lines "T LABEL <accept's ACCEPT line>", one per process,
grouped by label; medians and spread of us_per_call_graph, against the label "none"
(no plugin) and, with --ns-against LABEL, in ns against that label.

  timing-table.py RAW ROUNDS COLUMN [--ns-against LABEL]
"""
import argparse
import re
import statistics

ap = argparse.ArgumentParser()
ap.add_argument("raw")
ap.add_argument("rounds")
ap.add_argument("column", help="the first column's heading")
ap.add_argument("--ns-against", help="add a column: the median's difference from this label's, in ns")
a = ap.parse_args()

by = {}
for line in open(a.raw):
    m = re.match(r'T (\S+) .*"us_per_call_graph":([0-9.]+)', line)
    if m:
        by.setdefault(m[1], []).append(float(m[2]))
none = statistics.median(by["none"])
ref = statistics.median(by.get(a.ns_against, by["none"])) if a.ns_against else None
extra = f", vs {a.ns_against}" if ref is not None else ""
print(f"graph mode, 8 B send/recv to self, {a.rounds} alternating rounds: median us per call (min - max), vs no plugin{extra}\n")
cols = [a.column, "runs", "median", "min - max", "vs no plugin"] + ([f"vs {a.ns_against}"] if ref is not None else [])
print("| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
for k, v in by.items():
    med = statistics.median(v)
    row = [k, str(len(v)), f"{med:.3f}", f"{min(v):.3f} - {max(v):.3f}", f"{100 * (med / none - 1):+.2f}%"]
    if ref is not None:
        row.append(f"{1000 * (med - ref):+.0f} ns")
    print("| " + " | ".join(row) + " |")
