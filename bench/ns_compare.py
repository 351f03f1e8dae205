"""ns_compare.py - the Newton-Schulz comparison of issue #3: joins `tpla ns --json`
rows and bench/ns_torch.py rows (JSON lines, from the same run) into one table
per GPU count, with a PASS/MISS per target:

  1 GPU   tpla <= 0.8x the PyTorch Muon reference at 8192x8192 and 4096x14336,
          with an error no worse than PyTorch's by more than 10%;
  2 GPUs  tpla <= 0.65x the better PyTorch variant (Gram all-reduce, or gather
          + NS on every rank) for each shape, and >= 1.8x faster than tpla on
          1 GPU for 8192x8192 and 16384x4096;
  4, 8    (issue #7) the same columns, no targets: docs/PERFORMANCE.md compares
          them with bench/predict_tp.py's predictions.

The error compared is polar_rel (against the exact polar factor U V^T) where
both sides have it, else orth_max (max |Y Y^T - I|). tpla's float64 check rows
(--check, from `tpla ns --svd-max=...`) replace the error columns of the
timing rows of the same shape and Gram dtype. Every tpla Gram variant gets
its own row and verdicts, and the summary judges each (the fp32 Gram is the default;
the PyTorch reference forms its Gram in bf16, as tpla's bf16 Gram variant does).

  python3 bench/ns_compare.py --out bench/out            (the files run_ns.sh writes)
  python3 bench/ns_compare.py --tpla t1.jsonl t2.jsonl --torch p1.jsonl p2.jsonl
  python3 bench/ns_compare.py --out bench/out --markdown  (rows for docs/PERFORMANCE.md)
Exit status: 0 (the verdicts are information, not a failure), 2 on bad input.
"""
import argparse
import glob
import json
import math
import os
import sys

ONE_GPU_SHAPES = ["4096x4096", "4096x14336", "8192x8192", "16384x16384"]
TWO_GPU_SHAPES = ["8192x8192", "16384x4096", "4096x14336", "14336x4096"]
ONE_GPU_TARGET = {"8192x8192": 0.8, "4096x14336": 0.8}      # time ratio to PyTorch
ERROR_SLACK = 1.10                                           # error at most +10%
TWO_GPU_TARGET = 0.65                                        # time ratio to best PyTorch
SPEEDUP_TARGET = {"8192x8192": 1.8, "16384x4096": 1.8}       # over tpla on 1 GPU


def algo_of(t):
    """The algorithm a tpla row ran, with "+gram" when it ran the Gram iteration."""
    algo = t.get("algorithm", "?")
    return algo + "+gram" if t.get("iteration") == "gram" else algo

def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    sys.exit(f"ns_compare: {path}:{n}: not JSON ({e})")
    return rows


def num(v):
    """A finite float, or None."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt(v, spec):
    return format(v, spec) if v is not None else "n/a"


def mib(row):
    """The plan's workspace in MiB (the largest over the ranks)."""
    b = num(row.get("ws_bytes"))
    return fmt(b / 1048576.0 if b is not None else None, ".1f")


def error_pair(t, p):
    """(metric, tpla, torch) of the first error both sides have."""
    for key in ("polar_rel", "orth_max"):
        a, b = num(t.get(key)), num(p.get(key)) if p else None
        if a is not None and b is not None:
            return key, a, b
    return None, None, None


def unique(items):
    return list(dict.fromkeys(items))


def fp32_first(items):
    """tpla rows in a stable order, the default (fp32 Gram) first."""
    return sorted(items, key=lambda kv: (kv[0][2] != "fp32", kv[0][2]))


def verdict(ok, text):
    return ("PASS " if ok else "MISS ") + text


def index_tpla(rows, checks):
    """(shape, gpus, gram) -> row; later rows win; float64 check errors merged in."""
    out = {}
    for r in rows:
        out[(r["shape"], int(r["gpus"]), r.get("gram", "fp32"))] = dict(r)
    for c in checks:
        key = (c["shape"], int(c["gpus"]), c.get("gram", "fp32"))
        if c.get("errsrc") != "f64":
            continue
        target = out.get(key)
        if target is None:       # a check without a timing row: keep its errors only
            target = out[key] = dict(c, time_ms=float("nan"), tflops=float("nan"))
        target["polar_rel"], target["orth_max"] = c.get("polar_rel"), c.get("orth_max")
        target["errsrc"] = "f64"
    return out


def tpla_ms(row):
    """The slowest rank's median (tmax_ms; time_ms, rank 0's, in logs without it)."""
    return num(row.get("tmax_ms", row.get("time_ms")))


def index_torch(rows):
    return {(r["shape"], int(r["gpus"]), r["variant"]): r for r in rows}


def one_gpu_table(tpla, torch, shapes, summary, md):
    head = ("shape", "gram", "algo", "tpla_ms", "torch_ms", "ratio", "TFLOP/s", "ws_MiB", "err",
            "tpla_err", "torch_err", "errsrc", "verdict")
    rows = []
    for shape in shapes:
        p = torch.get((shape, 1, "torch_1gpu"))
        for (s, g, gram), t in fp32_first(tpla.items()):
            if s != shape or g != 1:
                continue
            tm, pm = tpla_ms(t), num(p.get("time_ms")) if p else None
            ratio = tm / pm if tm is not None and pm else None
            metric, te, pe = error_pair(t, p)
            text = "-"
            if shape in ONE_GPU_TARGET and ratio is not None:
                goal = ONE_GPU_TARGET[shape]
                t_ok = ratio <= goal
                e_ok = te <= ERROR_SLACK * pe if metric else None
                detail = f"time {ratio:.2f}x (<= {goal}x)"
                if metric and pe > 0:
                    detail += f", {metric} {te / pe - 1:+.0%} (<= +10%)"
                elif metric:
                    detail += f", {metric} {te:.3e} vs 0"
                else:
                    detail += ", no error to compare"
                text = verdict(t_ok and e_ok is not False, detail)
                summary.append((f"1 GPU {shape} ({gram} Gram)", text))
            rows.append((shape, gram, algo_of(t), fmt(tm, ".3f"), fmt(pm, ".3f"),
                         fmt(ratio, ".2f"), fmt(num(t.get("tflops")), ".0f"), mib(t),
                         metric or "-", fmt(te, ".3e"), fmt(pe, ".3e"),
                         t.get("errsrc", "?"), text))
        if p is not None and not any(r[0] == shape for r in rows):
            rows.append((shape, "-", "-", "n/a", fmt(num(p.get("time_ms")), ".3f"), "n/a", "n/a",
                         "n/a", "-", "n/a", fmt(num(p.get("polar_rel")), ".3e"), "-",
                         "no tpla row"))
    print_table("1 GPU: tpla ns vs PyTorch Muon NS5 (torch_1gpu)", head, rows, md)


def multi_gpu_table(tpla, torch, shapes, P, summary, md):
    """P GPUs, rows sharded; issue #3's targets at P = 2 only."""
    head = ("shape", "gram", "algo", "tpla_ms", "gram_ar_ms", "gather_ms", "ratio", "vs_torch",
            "1gpu_ms", "speedup", "vs_1gpu", "ws_MiB", "orth_max")
    rows = []
    targets = P == 2
    for shape in shapes:
        ar = num(torch.get((shape, P, "torch_gram_ar"), {}).get("time_ms"))
        ga = num(torch.get((shape, P, "torch_gather"), {}).get("time_ms"))
        best = min([v for v in (ar, ga) if v is not None], default=None)
        for (s, g, gram), t in fp32_first(tpla.items()):
            if s != shape or g != P:
                continue
            tm = tpla_ms(t)
            one = tpla_ms(tpla.get((shape, 1, gram), {}))
            ratio = tm / best if tm is not None and best else None
            speed = one / tm if tm and one is not None else None
            v1 = v2 = "-"
            if targets and ratio is not None and shape in TWO_GPU_SHAPES:
                v1 = verdict(ratio <= TWO_GPU_TARGET, f"{ratio:.2f}x (<= {TWO_GPU_TARGET}x)")
            if targets and shape in SPEEDUP_TARGET and speed is not None:
                goal = SPEEDUP_TARGET[shape]
                v2 = verdict(speed >= goal, f"{speed:.2f}x (>= {goal}x)")
            elif targets and shape in SPEEDUP_TARGET:
                v2 = "n/a (no 1-GPU tpla row)"
            if targets and shape in TWO_GPU_SHAPES:
                summary.append((f"2 GPUs {shape} ({gram} Gram) vs PyTorch", v1))
                if shape in SPEEDUP_TARGET:
                    summary.append((f"2 GPUs {shape} ({gram} Gram) vs tpla 1 GPU", v2))
            rows.append((shape, gram, algo_of(t), fmt(tm, ".3f"), fmt(ar, ".3f"),
                         fmt(ga, ".3f"), fmt(ratio, ".2f"), v1, fmt(one, ".3f"),
                         fmt(speed, ".2f"), v2, mib(t), fmt(num(t.get("orth_max")), ".3e")))
    print_table(f"{P} GPUs, rows sharded: tpla ns -g {P} vs PyTorch (torch_gram_ar, "
                "torch_gather)" + ("" if targets else "; no targets (issue #7)"), head, rows, md)


def print_table(title, head, rows, md):
    print(f"\n## {title}\n")
    if not rows:
        print("(no rows)")
        return
    if md:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(str(c) for c in r) + " |")
        return
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for r in (head,) + tuple(rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="directory with tpla_*.jsonl, tpla_check*.jsonl, torch_*.jsonl")
    ap.add_argument("--tpla", nargs="*", default=[], help="tpla ns --json files (timing)")
    ap.add_argument("--check", nargs="*", default=[], help="tpla ns --json files (f64 errors)")
    ap.add_argument("--torch", nargs="*", default=[], help="bench/ns_torch.py --json files")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    args = ap.parse_args()
    tpla_files, check_files, torch_files = list(args.tpla), list(args.check), list(args.torch)
    if args.out:
        found = sorted(glob.glob(os.path.join(args.out, "*.jsonl")))
        check_files += [f for f in found if os.path.basename(f).startswith("tpla_check")]
        tpla_files += [f for f in found if os.path.basename(f).startswith("tpla_")
                       and f not in check_files]
        torch_files += [f for f in found if os.path.basename(f).startswith("torch_")]
    if not tpla_files and not torch_files:
        sys.exit("ns_compare: no input (give --out DIR or --tpla/--torch files)")
    tpla = index_tpla(load(tpla_files), load(check_files))
    torch = index_torch(load(torch_files))
    summary = []
    print("# Newton-Schulz, tpla vs PyTorch (same run); times are medians in ms, ratio = "
          "tpla / PyTorch")
    print(f"# tpla: {', '.join(tpla_files) or 'none'}; float64 checks: "
          f"{', '.join(check_files) or 'none'}; PyTorch: {', '.join(torch_files) or 'none'}")
    # the DESIGN.md shapes first, then any other shape in the files (no targets there);
    # a 1-GPU row of a 2-GPU shape is the speed-up baseline, shown in the 2-GPU table
    two = unique(TWO_GPU_SHAPES + [s for (s, g, _) in list(tpla) + list(torch) if g > 1])
    one = unique(ONE_GPU_SHAPES + [s for (s, g, _) in list(tpla) + list(torch)
                                   if g == 1 and s not in two])
    one_gpu_table(tpla, torch, one, summary, args.markdown)
    counts = sorted({2} | {g for (_, g, _) in list(tpla) + list(torch) if g > 1})
    for P in counts:
        multi_gpu_table(tpla, torch, two, P, summary, args.markdown)
    print("\n## Targets, per Gram dtype\n")
    for what, text in summary:
        print(f"  {what:46s} {text}")
    missing = [s for s in ONE_GPU_TARGET
               if not any(w.startswith(f"1 GPU {s} ") for w, _ in summary)]
    missing += [s for s in TWO_GPU_SHAPES
                if not any(w.startswith(f"2 GPUs {s} ") and w.endswith("vs PyTorch")
                           for w, _ in summary)]
    if missing:
        print(f"  not judged (a tpla or PyTorch row is missing): {', '.join(sorted(set(missing)))}")
    passed = sum(t.startswith("PASS") for _, t in summary)
    print(f"\n# {passed} PASS, {sum(t.startswith('MISS') for _, t in summary)} MISS, "
          f"{len(summary) - passed - sum(t.startswith('MISS') for _, t in summary)} n/a")


if __name__ == "__main__":
    main()
