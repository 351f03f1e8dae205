#!/usr/bin/env python3
"""ns_auto_check.py - does the Newton-Schulz AUTO choice (algorithm and iteration, the cost
model of src/core/ns_cost.c) pick the fastest pair on this machine? Per shape it runs
`tpla ns` with AUTO and with every forced (algorithm, iteration) pair, alternated --reps times
(AUTO, pair 1, pair 2, ..., AUTO, pair 1, ...), then prints per shape the median time of each
and a verdict: PASS when AUTO's median is within --slack of the fastest pair's (AUTO runs
one of the pairs, so the slack absorbs the spread between two invocations of one plan).

  python3 bench/ns_auto_check.py [--tpla build-gpu/tpla] [-g 2] [--reps 2] [--gram input]
                                 [--slack 0.03] [--out DIR] [--extra='FLAGS'] SHAPE...

A pair that took more than 3x AUTO's first time in its first repetition is not repeated
(4096x14336 with GRAM_ALLREDUCE all-reduces a 14336^2 Gram: ~70 ms). Each invocation is
`tpla ns -g G -n 20 -w 5 -s 1234 --svd-max=0 --json=...` under a 300 s timeout; its output
goes to DIR/<name>.log. Exit status: 0 when every invocation ran (PASS/MISS are results), 1
otherwise. Needs only Python 3 and the tool; with --extra='-x host' it runs on the CPU.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

ALGORITHMS = ["gram_allreduce", "gram_sharded", "redistribute", "gather"]
ITERATIONS = ["x", "gram"]


def run(args, name, flags, shape):
    """One `tpla ns` invocation; returns its JSON row for `shape` or None."""
    json_path = os.path.join(args.out, name + ".jsonl")
    if os.path.exists(json_path):
        os.remove(json_path)
    cmd = [args.tpla, "ns", "-g", str(args.gpus), "-n", "20", "-w", "5", "-s", "1234",
           "--svd-max=0", "--gram=" + args.gram, "--json=" + json_path] + args.extra + flags
    cmd.append(shape)
    with open(os.path.join(args.out, name + ".log"), "w") as log:
        log.write("# " + " ".join(cmd) + "\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=300).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    rows = []
    if os.path.exists(json_path):
        with open(json_path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    if rc != 0 or not rows:
        print("# %s: %s exited %s" % (shape, name, rc), file=sys.stderr)
        return None
    return rows[-1]


def check_shape(args, shape):
    """Alternated runs of AUTO and every pair; returns (table lines, verdict or None)."""
    pairs = [(a, i) for a in ALGORITHMS for i in ITERATIONS]
    times = {"auto": []}
    picked = None
    skipped = set()
    for rep in range(args.reps):
        row = run(args, "%s_auto_%d" % (shape, rep), [], shape)
        if row is None:
            return ["%-11s AUTO failed" % shape], None
        times["auto"].append(row["tmax_ms"])  # the slowest rank sets the pace
        picked = (row["algorithm"], row["iteration"])
        for a, i in pairs:
            if (a, i) in skipped:
                continue
            row = run(args, "%s_%s_%s_%d" % (shape, a, i, rep),
                      ["--algo=" + a, "--iterate=" + i], shape)
            if row is None:
                skipped.add((a, i))
                continue
            times.setdefault((row["algorithm"], row["iteration"]), []).append(row["tmax_ms"])
            if rep == 0 and row["tmax_ms"] > 3 * times["auto"][0]:
                skipped.add((a, i))
    auto = statistics.median(times["auto"])
    forced = {k: statistics.median(v) for k, v in times.items() if k != "auto"}
    best = min(forced, key=forced.get)
    lines = ["%-11s AUTO %s + %s: %.3f ms (%s)" % (shape, picked[0], picked[1], auto,
                                                   " ".join("%.3f" % t for t in times["auto"]))]
    for k in sorted(forced, key=forced.get):
        lines.append("%-11s   %-15s %-5s %8.3f ms  x%.3f of AUTO%s" %
                     (shape, k[0], k[1], forced[k], forced[k] / auto,
                      "  (once: > 3x AUTO)" if len(times[k]) == 1 and args.reps > 1 else ""))
    ok = auto <= forced[best] * (1 + args.slack)
    lines.append("%-11s %s: AUTO %.3f ms, fastest forced %s + %s %.3f ms (AUTO/fastest %.3f)" %
                 (shape, "PASS" if ok else "MISS", auto, best[0], best[1], forced[best],
                  auto / forced[best]))
    return lines, ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", nargs="+", metavar="SHAPE", help="MxN, rows sharded")
    p.add_argument("--tpla", default="build-gpu/tpla")
    p.add_argument("-g", "--gpus", type=int, default=2)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--gram", default="input", choices=["input", "fp32"])
    p.add_argument("--slack", type=float, default=0.03)
    p.add_argument("--out", default="bench/out/auto_check")
    p.add_argument("--extra", default="", help="more tpla ns flags, one string: --extra='-x host'")
    args = p.parse_args()
    args.extra = shlex.split(args.extra)
    os.makedirs(args.out, exist_ok=True)
    verdicts, failed = [], 0
    for shape in args.shapes:
        lines, ok = check_shape(args, shape)
        print("\n".join(lines), flush=True)
        failed += ok is None
        verdicts.append(ok)
    print("# AUTO check, %d ranks, %s Gram: %d PASS, %d MISS, %d failed" %
          (args.gpus, args.gram, verdicts.count(True), verdicts.count(False), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
