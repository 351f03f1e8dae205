#!/usr/bin/env python3
"""Newton-Schulz's distance from the float64 iteration on one GPU, X against Gram iteration.

For Gaussian inputs of a half dtype (bf16, or fp16 with --dtype fp16), 5 Muon steps and the fp32
Gram (the default): ||Y - Y64|| / ||Y64|| with Y64 the same polynomial iterated in float64 on the
GPU, for both iterations (--safety: the normalization's factor, 1 by default). TPLA_LIBRARY picks
the library, so an A/B is two invocations. One JSON
line per shape and iteration. Written for session 29's update operand of the Gram iteration
(M = W + alpha I, src/core/ns_gram_iter.c, bench/ns_update_operand_study.py); session 37 used it
for the fp16 copies of the s x s products' operands (ns_products HALF, src/core/ns.h) against
TF32.

    PYTHONPATH=python TPLA_LIBRARY=build-gpu/libtpla.so python3 bench/ns_update_operand_gpu.py
"""
import argparse
import json
import os

import torch

import tpla.torch as tt

MUON = (3.4445, -4.7750, 2.0315)
SHAPES = [(1024, 4096), (2048, 8192), (4096, 14336), (16384, 4096)]


def reference(x, steps=5, eps=1e-7, safety=1.0):
    """The Muon polynomial in float64 on the short side's Gram, as tpla normalizes."""
    y = x.double()
    tall = y.shape[0] > y.shape[1]
    if tall:
        y = y.T
    y = y / (safety * y.norm() + eps)
    a, b, c = MUON
    for _ in range(steps):
        g = y @ y.T
        y = a * y + (b * g + c * g @ g) @ y
    return y.T if tall else y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--safety", type=float, default=1.0)
    args = ap.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    gen = torch.Generator("cuda").manual_seed(29)
    lib = os.environ.get("TPLA_LIBRARY", "(default)")
    for m, n in SHAPES:
        x = torch.randn(m, n, device="cuda", generator=gen).to(dtype)
        ref = reference(x, safety=args.safety)
        for it in ("x", "gram"):
            y = tt.newton_schulz(x, None, steps=5, coefficients="muon", iteration=it,
                                 gram_dtype=torch.float32, safety=args.safety)
            dev = float((y.double() - ref).norm() / ref.norm())
            print(json.dumps({"lib": lib, "dtype": str(dtype), "safety": args.safety,
                              "shape": f"{m}x{n}", "iteration": it, "dev": dev}), flush=True)


if __name__ == "__main__":
    main()
