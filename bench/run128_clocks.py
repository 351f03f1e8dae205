"""run128_clocks.py - run 128's analysis: match nvidia-smi's 100-ms samples (smi.csv) to
each invocation's host start/end (marks.txt) and print, per invocation and busy GPU, the
samples at >= 50% utilization: SM clock (median, min), power (median, max), GPU and memory
temperature (max), and the clock-event reasons seen (nvidia-smi's bit mask, OR of them).
Usage: python3 bench/run128_clocks.py LOGDIR"""
import datetime
import os
import statistics
import sys

d = sys.argv[1]
marks, windows = {}, []
for line in open(os.path.join(d, "marks.txt")):
    t, kind, name, rnd = line.split()
    key = (name, rnd)
    if kind == "start":
        marks[key] = float(t)
    else:
        windows.append((name, rnd, marks[key], float(t)))

samples = []
for line in list(open(os.path.join(d, "smi.csv")))[1:]:
    f = [x.strip() for x in line.split(",")]
    if len(f) < 10 or not f[2].endswith("MHz"):
        continue
    t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f")
    t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
    samples.append((t, int(f[1]), int(f[2].split()[0]), float(f[4].split()[0]),
                    int(f[6]), int(f[7]), int(f[8].split()[0]), int(f[9], 16)))

print("%-6s %-3s %3s %5s %9s %8s %9s %8s %5s %5s %s" % (
    "run", "rnd", "gpu", "n", "sm_med", "sm_min", "W_med", "W_max", "Tgpu", "Tmem", "reasons"))
for name, rnd, t0, t1 in windows:
    gpus = [1] if name == "gpu1" else [0, 1] if name in ("two", "sqtwo") else [0]
    for g in gpus:
        s = [x for x in samples if t0 <= x[0] <= t1 and x[1] == g and x[6] >= 50]
        if not s:
            print("%-6s %-3s %3d %5d (no busy samples)" % (name, rnd, g, 0))
            continue
        mask = 0
        for x in s:
            mask |= x[7]
        print("%-6s %-3s %3d %5d %9.0f %8d %9.1f %8.1f %5d %5d 0x%x" % (
            name, rnd, g, len(s), statistics.median(x[2] for x in s), min(x[2] for x in s),
            statistics.median(x[3] for x in s), max(x[3] for x in s), max(x[4] for x in s),
            max(x[5] for x in s), mask))
