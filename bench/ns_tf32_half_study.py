#!/usr/bin/env python3
"""Numerics study (CPU, PyTorch): TF32 in the Gram iteration's s x s products of an fp16 input.

With a half input and an fp32 Gram, tpla's s x s products may use TF32 (src/core/ns_iter.c,
ns_gram_iter.c). TF32 keeps 10 mantissa bits: 8x finer than bf16's 7, but only as fine as fp16's.
This compares, for fp16 inputs (uniform entries, s x max(318, 2s)), 5 steps, the Gram iteration's
distance from the float64 iteration with TF32 and with exact fp32 products; run 197's GPU fuzz
case (318x2 fp16, Polar Express) is the s = 2 row's kind.

    python3 bench/ns_tf32_half_study.py
"""
import statistics

import torch

from ns_gram_iteration_study import tf32
from ns_update_operand_study import TABLES, reference

HALF = torch.float16


def half(x):
    return x.to(HALF).float()


def gram_iteration(x, table, prod):
    """tpla's Gram iteration with an fp32 Gram (session 29's M operand); products `prod`."""
    x, k = half(x), 0
    while k < len(table):
        g = half(x) @ half(x).T
        eye = torch.eye(g.shape[0])
        a0, b0, c0 = table[k]
        z0 = c0 * prod(g, g) + b0 * g
        if k + 1 < len(table):
            a1, b1, c1 = table[k + 1]
            h = prod(g, z0) + a0 * g
            g1 = prod(z0, h) + a0 * h
            z1 = c1 * prod(g1, g1) + b1 * g1
            m, k = prod(z0, z1) + a1 * z0 + a0 * z1 + a0 * a1 * eye, k + 2
        else:
            m, k = z0 + a0 * eye, k + 1
        x = half(half(m) @ x)
    return x


PRODUCTS = {"tf32": lambda a, b: tf32(a) @ tf32(b), "fp32": lambda a, b: a @ b}


def main():
    print("fp16 input, fp32 Gram, Gram iteration, 5 steps: median / max distance from float64")
    for name in ("polar_express", "muon"):
        for s in (2, 4, 8, 16, 32, 64, 128, 256):
            torch.manual_seed(5)
            devs = {p: [] for p in PRODUCTS}
            for _ in range(60 if s <= 64 else 12):
                x = torch.rand(s, max(318, 2 * s), dtype=torch.float64) * 2 - 1
                x = x / x.norm() / 1.01
                ref = reference(x, TABLES[name])
                for p, prod in PRODUCTS.items():
                    y = gram_iteration(x.float(), TABLES[name], prod)
                    devs[p].append(float((y.double() - ref).norm() / ref.norm()))
            print(f"{name:13s} s={s:3d}  " + "   ".join(
                f"{p} {statistics.median(v):.1e} / {max(v):.1e}" for p, v in devs.items()),
                flush=True)


if __name__ == "__main__":
    main()
