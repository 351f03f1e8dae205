"""ns_steep_check.py - Polar Express with a bf16 Gram on low-stable-rank inputs (one dominant
singular value over a floor at 1/kappa of it, as a momentum matrix), through
tpla.torch.newton_schulz on one device: iteration "auto" (the X iteration since session 36's
rule, docs/ALGORITHMS.md), "gram" (what AUTO took before) and "x", and the Gram iteration with
an fp32 Gram. Prints, per shape and kappa, each variant's distance from the exact polar factor
U V^T of the constructed input (5 steps do not reach it: compare the variants with each other)
and whether the result is finite.

    TPLA_LIBRARY=build-gpu/libtpla.so python3 bench/ns_steep_check.py [--device cuda]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import torch  # noqa: E402

import tpla.torch as tt  # noqa: E402


def low_stable_rank(s, l, kappa, gen, device):
    u, _ = torch.linalg.qr(torch.randn(s, s, generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(l, s, generator=gen, dtype=torch.float64))
    sigma = torch.full((s,), 1.0 / kappa, dtype=torch.float64)
    sigma[0] = 1.0
    sigma *= 1.0 + 0.05 * torch.randn(s, generator=gen, dtype=torch.float64)
    x = (u * sigma) @ v.T
    return x.to(device), (u @ v.T).to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", default="16x64,256x1024,1024x4096")
    ap.add_argument("--kappas", default="8,10,14")
    ap.add_argument("--draws", type=int, default=3)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(1234)
    variants = [("auto, bf16 Gram", "auto", torch.bfloat16), ("gram, bf16 Gram", "gram", torch.bfloat16),
                ("x, bf16 Gram", "x", torch.bfloat16), ("gram, fp32 Gram", "gram", torch.float32)]
    print("# %s, Polar Express, 5 steps, bf16 input; distance from U V^T (max over %d draws), "
          "non-finite results" % (args.device, args.draws))
    print("# %10s %6s" % ("shape", "kappa") + "".join(" %22s" % v[0] for v in variants))
    bad = 0
    for shape in args.shapes.split(","):
        s, l = (int(t) for t in shape.split("x"))
        for kappa in (float(k) for k in args.kappas.split(",")):
            worst = [0.0] * len(variants)
            nonfinite = [0] * len(variants)
            for _ in range(args.draws):
                x, polar = low_stable_rank(s, l, kappa, gen, args.device)
                xb = x.to(torch.bfloat16)
                for i, (_, it, gdt) in enumerate(variants):
                    y = tt.newton_schulz(xb, steps=5, coefficients="polar_express",
                                         gram_dtype=gdt, iteration=it).double()
                    if args.device == "cuda":
                        torch.cuda.synchronize()
                    if not torch.isfinite(y).all():
                        nonfinite[i] += 1
                        worst[i] = float("inf")
                        continue
                    d = (torch.linalg.norm(y - polar) / torch.linalg.norm(polar)).item()
                    worst[i] = max(worst[i], d)
            print("  %10s %6g" % (shape, kappa) +
                  "".join(" %14.3e (%d inf)" % (w, n) for w, n in zip(worst, nonfinite)))
            # AUTO must never give a non-finite result, nor be far from the X iteration's
            bad += nonfinite[0] > 0 or worst[0] > 2.0 * worst[2]
    print("# rows where AUTO is non-finite or over 2x the X iteration's distance: %d" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
