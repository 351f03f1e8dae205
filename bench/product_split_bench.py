"""product_split_bench.py - one GPU: the GEMM time one rank of two would spend on a
symmetric s x s product (P = A B, A and B symmetric and commuting, as in Newton-Schulz)
under three ways of splitting it, against one GPU's own way. cuBLAS through torch.mm,
bf16 in, fp32 accumulate, bf16 out; no transfer and no mirror is timed.

  one GPU      the upper triangle by 4 block rows (row i: rows [i t, (i+1) t) times columns
               [i t, s)), 10/16 of the square: what tpla's one-GPU products compute;
  halves       s/2 whole rows (one GEMM, 8/16 of the square): ns_rowsplit.c's split for two
               ranks with pulls (the 2-GPU Gram iteration);
  wide h       rank 0 of a split at row h: its h whole rows (one GEMM);
  corner h     rank 1 of that split: the upper triangle of rows and columns [h, s), by 3
               block rows; with h near 0.31 s both ranks get about 5/16 of the square.

Times are medians over --reps calls after a warm-up, each call timed alone with CUDA events,
operands rotating over 3 sets of A and B (larger than the L2 at s >= 4096).

  python3 bench/product_split_bench.py [--sizes 4096,8192] [--reps 30]
"""
import argparse

import torch


def timed(fn, reps):
    for _ in range(5):
        fn(0)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    for i, (a, b) in enumerate(ev):
        a.record()
        fn(i + 1)
        b.record()
    torch.cuda.synchronize()
    ts = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)
    return ts[len(ts) // 2]


def block_rows(lo, hi, parts, align=128):
    """parts block rows covering [lo, hi), each a multiple of align but the last."""
    step = -(-(hi - lo) // parts // align) * align
    return [(r, min(r + step, hi)) for r in range(lo, hi, step)]


def triangle(sets, outs, rows, s):
    """the upper triangle of `rows` block rows: block row [r0, r1) times columns [r0, s)"""
    def run(i):
        a, b = sets[i % len(sets)]
        for (r0, r1), o in zip(rows, outs):
            torch.mm(a[r0:r1], b[:, r0:], out=o)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    torch.manual_seed(7)
    print("# %s, torch %s, bf16 torch.mm; us, median of %d; FLOP share of the s^3 square"
          % (torch.cuda.get_device_name(), torch.__version__, args.reps))
    print("# %6s %-12s %10s %8s %8s" % ("s", "variant", "us", "share", "TFLOP/s"))
    for s in (int(v) for v in args.sizes.split(",")):
        sets = []
        for _ in range(3):
            g = torch.randn(s, s, device="cuda")
            sym = ((g + g.T) / (2 * s ** 0.5)).bfloat16()
            sets.append((sym, sym @ sym))

        def row(name, rows, tri):
            outs = [torch.empty(r1 - r0, (s - r0) if tri else s, device="cuda",
                                dtype=torch.bfloat16) for r0, r1 in rows]
            if tri:
                fn = triangle(sets, outs, rows, s)
            else:
                def fn(i):
                    a, b = sets[i % len(sets)]
                    for (r0, r1), o in zip(rows, outs):
                        torch.mm(a[r0:r1], b, out=o)
            us = timed(fn, args.reps)
            macs = sum((r1 - r0) * ((s - r0) if tri else s) * s for r0, r1 in rows)
            print("  %6d %-12s %10.1f %8.3f %8.1f" % (s, name, us, macs / s ** 3,
                                                      2 * macs / us * 1e-6))
            return us

        full = row("square", [(0, s)], False)
        one = row("one GPU", block_rows(0, s, 4), True)
        halves = row("halves", [(0, s // 2)], False)
        best = None
        for h in sorted({int(round(f * s / 128)) * 128 for f in (0.28, 0.30, 0.32, 0.34)}):
            wide = row("wide %d" % h, [(0, h)], False)
            corner = row("corner %d" % h, block_rows(h, s, 3), True)
            if best is None or max(wide, corner) < best[0]:
                best = (max(wide, corner), h)
        print("  %6d one GPU / halves %.3f, one GPU / best split (h %d) %.3f, square %.1f us"
              % (s, one / halves, best[1], one / best[0], full))


if __name__ == "__main__":
    main()
