#!/usr/bin/env python3
"""Numerics study (CPU, PyTorch): how the Gram iteration's segment forms its update operand.

Two steps map X to M X with M = P_1 P_0, P_k = a_k I + Z_k. tpla's Gram iteration
(src/core/ns_gram_iter.c) stores Z_0, Z_1 and W = Z_0 Z_1 + a_1 Z_0 + a_0 Z_1, M = W + alpha I,
alpha = a_0 a_1. An fp32 Gram of a half input rounds M once to the input dtype (session 29); a
bf16 Gram stores W as bf16 GEMM results and updates X' = W X + alpha X. W's eigenvalues are about
-alpha where the result is O(1) (Muon 11.9, Polar Express 34), so its bf16 rounding costs
~alpha 2^-9 against ~1. Forms compared (distance from the float64 iteration, bf16 input, 5 steps,
both Gram dtypes):
  tpla       as above
  factors    P_0 stored for Z_0 throughout (H = G P_0, G_1 = P_0 H), P_1, M = P_0 P_1
  diagonals  Z_0, H, G_1, Z_1 as tpla, then a_k added to Z_k's diagonals and M = P_0 P_1
  fp32 W     Z_0, H, G_1, Z_1 as tpla, W computed and kept in fp32, M rounded once

    python3 bench/ns_segment_operand_study.py          the table (3 spectra, 2 tables, 4 shapes)
    python3 bench/ns_segment_operand_study.py short    Polar Express at short sides, 6 draws each
"""
import statistics
import sys

import torch

from ns_gram_iteration_study import matrix, tf32
from ns_update_operand_study import TABLES, reference

BF = torch.bfloat16


def bf(x):
    return x.to(BF).float()


def mul(a, b, gram):
    """An s x s product of stored Gram-dtype matrices, fp32 accumulation: bf16 inputs as they
    are, fp32 ones through TF32 (a half input's fp32 Gram may use it)."""
    return a @ b if gram == "bf16" else tf32(a) @ tf32(b)


def store(x, gram):
    """A GEMM's epilogue result, rounded to the Gram dtype."""
    return bf(x) if gram == "bf16" else x.float()


def x_iteration(x, table, gram):
    x = bf(x)
    for a, b, c in table:
        g = store(bf(x) @ bf(x).T, gram)
        if gram == "bf16":
            p = bf(c * (g @ g) + b * g)  # one GEMM, C = g in its epilogue
        else:  # fp32, cast to bf16 for the update
            p = b * g + c * mul(g, g, gram)
        x = bf(bf(p) @ x + a * x)
    return x


def gram_iteration(x, table, gram, form):
    """The Gram iteration, its segment's operand in one of FORMS."""
    x, k = bf(x), 0
    while k < len(table):
        g = store(bf(x) @ bf(x).T, gram)
        eye = torch.eye(g.shape[0])
        a0, b0, c0 = table[k]
        z0 = store(c0 * mul(g, g, gram) + b0 * g, gram)
        if k + 1 == len(table):  # a one-step segment
            x, k = bf(bf(z0 + a0 * eye) @ x) if form != "tpla" or gram != "bf16" else \
                bf(z0 @ x + a0 * x), k + 1
            continue
        a1, b1, c1 = table[k + 1]
        if form == "factors":  # P_0 for Z_0 throughout
            p0 = store(z0 + a0 * eye, gram)
            g1 = store(mul(p0, store(mul(g, p0, gram), gram), gram), gram)
            p1 = store(store(c1 * mul(g1, g1, gram) + b1 * g1, gram) + a1 * eye, gram)
            x = bf(bf(store(mul(p0, p1, gram), gram)) @ x)
        else:
            h = store(mul(g, z0, gram) + a0 * g, gram)
            g1 = store(mul(z0, h, gram) + a0 * h, gram)
            z1 = store(c1 * mul(g1, g1, gram) + b1 * g1, gram)
            if form == "diagonals":  # P_k = Z_k + a_k I, diagonals only, M = P_0 P_1
                m = store(mul(store(z0 + a0 * eye, gram), store(z1 + a1 * eye, gram), gram), gram)
                x = bf(bf(m) @ x)
            elif form == "fp32 W":  # W in fp32 from the stored Z_k, M rounded once
                w = mul(z0, z1, gram) + a1 * z0 + a0 * z1
                x = bf(bf(w + a0 * a1 * eye) @ x)
            elif gram == "bf16":  # tpla: W stored, X' = W X + alpha X
                w = store(store(mul(z0, z1, gram) + a1 * z0, gram) + a0 * z1, gram)
                x = bf(w @ x + a0 * a1 * x)
            else:  # tpla since session 29: M = W + alpha I rounded once
                w = store(store(mul(z0, z1, gram) + a1 * z0, gram) + a0 * z1, gram)
                x = bf(bf(w + a0 * a1 * eye) @ x)
        k += 2
    return x


FORMS = ("tpla", "factors", "diagonals", "fp32 W")


def distance(y, ref):
    return float((y.double() - ref).norm() / ref.norm())


def runs(x, table, gram):
    return [x_iteration(x.float(), table, gram)] + [
        gram_iteration(x.float(), table, gram, form) for form in FORMS]


def main():
    torch.manual_seed(0)
    print("distance from the float64 iteration, bf16 input, 5 steps")
    print(f"{'shape':>9s} {'spectrum':8s} {'table':13s} {'gram':4s} {'X iter':>9s} " +
          " ".join(f"{f:>9s}" for f in FORMS))
    for s, l in [(64, 512), (256, 1024), (512, 2048), (1024, 4096)]:
        for kind in ("gauss", "decay", "lowrank"):
            if s < 64 and kind != "gauss":
                continue
            x = matrix(kind, s, l) / 1.01  # Polar Express's safety factor, for every table
            for name, table in TABLES.items():
                ref = reference(x, table)
                for gram in ("bf16", "fp32"):
                    devs = [distance(y, ref) for y in runs(x, table, gram)]
                    print(f"{s:>4d}x{l:<4d} {kind:8s} {name:13s} {gram:4s} " +
                          " ".join(f"{d:9.2e}" for d in devs), flush=True)


def short_sides():
    """Polar Express on s x 512 Gaussian inputs, s = 2..64: median / max over six draws."""
    torch.manual_seed(1)
    table = TABLES["polar_express"]
    print("s x 512 gauss, Polar Express: median / max over 6 draws of the distance from float64")
    for s in (2, 4, 8, 16, 32, 64):
        draws = [matrix("gauss", s, 512) / 1.01 for _ in range(6)]
        for gram in ("bf16", "fp32"):
            devs = list(zip(*[[distance(y, reference(x, table)) for y in runs(x, table, gram)]
                              for x in draws]))
            print(f"  s={s:3d} {gram}: " + "   ".join(
                f"{label} {statistics.median(v):.2e} / {max(v):.2e}"
                for label, v in zip(("X",) + FORMS, devs)), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["short"]:
        short_sides()
    else:
        main()
