#!/usr/bin/env python3
"""bench/gpu_mutate.py - mutation testing of the GPU tests on a GPU machine.

Each mutant (a JSON list: id, file, old, new, why, tests) is one small bug put
into a copy of the tree: `old` must occur exactly once in `file`. For each, the
listed CTest tests are rebuilt in the copy's existing build directory
(incrementally), run through ctest, and the file restored. A mutant is
"caught" when a test fails, "SURVIVED" when every test passed, "skipped" when
every test skipped (no GPU, or too few), "build-fail" when it did not compile.
The unmutated tests are run first: a mutant means nothing where they fail.

usage: gpu_mutate.py MUTANTS.json TREE BUILD_DIR LOG_DIR [--timeout S] [--only ID,...]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def ctest(build, tests, timeout, log):
    """Run the tests; returns (passed, failed, skipped) names."""
    regex = "^(" + "|".join(tests) + ")$"
    with open(log, "w") as f:
        subprocess.run(["ctest", "--test-dir", build, "-R", regex, "--timeout", str(timeout),
                        "--output-on-failure"], stdout=f, stderr=subprocess.STDOUT)
    passed, failed, skipped = [], [], []
    for line in open(log, errors="replace"):
        if " Test " not in line or "#" not in line:
            continue
        name = line.split(":", 1)[1].split()[0] if ":" in line else ""
        if name not in tests:
            continue
        if "Passed" in line:
            passed.append(name)
        elif "Skipped" in line or "Not Run" in line:
            skipped.append(name)
        else:
            failed.append(name)
    missing = [t for t in tests if t not in passed + failed + skipped]
    return passed, failed + missing, skipped


def build(build_dir, tests, log):
    with open(log, "w") as f:
        r = subprocess.run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 4),
                            "--target"] + tests, stdout=f, stderr=subprocess.STDOUT)
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mutants")
    ap.add_argument("tree")
    ap.add_argument("build")
    ap.add_argument("logs")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    mutants = json.load(open(a.mutants))
    if a.only:
        keep = set(a.only.split(","))
        mutants = [m for m in mutants if m["id"] in keep]
    os.makedirs(a.logs, exist_ok=True)

    every = sorted({t for m in mutants for t in m["tests"]})
    if not build(a.build, every, os.path.join(a.logs, "baseline_build.log")):
        print("baseline build failed")
        return 2
    p, f, s = ctest(a.build, every, a.timeout, os.path.join(a.logs, "baseline.log"))
    print(f"baseline: {len(p)} passed, {len(f)} failed {f}, {len(s)} skipped", flush=True)
    bad = set(f)

    rows = []
    for m in mutants:
        path = os.path.join(a.tree, m["file"])
        text = open(path).read()
        n = text.count(m["old"])
        t0 = time.time()
        if n != 1:
            rows.append((m["id"], m["file"], f"not-applied ({n} matches)", ""))
            continue
        tests = [t for t in m["tests"] if t not in bad]
        try:
            open(path, "w").write(text.replace(m["old"], m["new"]))
            if not tests:
                verdict, detail = "no-baseline", "its tests fail unmutated"
            elif not build(a.build, tests, os.path.join(a.logs, f"{m['id']}_build.log")):
                verdict, detail = "build-fail", ""
            else:
                p, f, s = ctest(a.build, tests, a.timeout, os.path.join(a.logs, f"{m['id']}.log"))
                if f:
                    verdict, detail = "caught", "by " + ",".join(f)
                elif p:
                    verdict, detail = "SURVIVED", "passed " + ",".join(p)
                else:
                    verdict, detail = "skipped", ",".join(s)
        finally:
            open(path, "w").write(text)
        rows.append((m["id"], m["file"], verdict, f"{detail} ({time.time() - t0:.0f} s)"))
        print(" ".join(rows[-1]), flush=True)

    print("\n| mutant | file | verdict | detail |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    counts = {}
    for r in rows:
        counts[r[2].split(" ")[0]] = counts.get(r[2].split(" ")[0], 0) + 1
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
