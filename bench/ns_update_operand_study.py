#!/usr/bin/env python3
"""Numerics study (CPU, PyTorch): in what form the Gram iteration rounds its update operand.

tpla's Gram iteration (src/core/ns_gram_iter.c) updates X once per two steps,
X' = (alpha I + W) X with alpha = a_0 a_1. With a half input and an fp32 Gram the s x s
products are TF32 and fp32, and the update operand is rounded once to bf16 for the update GEMM.
Rounded as W, whose eigenvalues are m(sigma) - alpha with m the two steps' map (about -alpha
where the top singular values sit, Muon's alpha 11.9, Polar Express's 34), the rounding costs
~alpha 2^-9 against a result of ~1; rounded as M = W + alpha I (eigenvalues m(sigma), O(1)
there) it does not. This compares, for bf16 inputs and 5 steps, the distance from the float64
iteration of: the X iteration as tpla runs it, the Gram iteration with W rounded (tpla before
session 29) and with M rounded (since), on three spectra and two coefficient sets.

    python3 bench/ns_update_operand_study.py            the table
    python3 bench/ns_update_operand_study.py short      Polar Express at short sides, 6 draws each
"""
import statistics
import sys

import torch

from ns_gram_iteration_study import matrix, tf32  # same spectra, same TF32 rounding

BF = torch.bfloat16
TABLES = {
    "muon": [(3.4445, -4.7750, 2.0315)] * 5,
    "polar_express": [(8.28721201814563, -23.595886519098837, 17.300387312530933),
                      (4.107059111542203, -2.9478499167379106, 0.5448431082926601),
                      (3.9486908534822946, -2.908902115962949, 0.5518191394370137),
                      (3.3184196573706015, -2.488488024314874, 0.51004894012372),
                      (2.300652019954817, -1.6689039845747493, 0.4188073119525673)],
}


def bf(x):
    return x.to(BF).float()


def gram(x):
    """X X^T from bf16 inputs, fp32 accumulation and storage (tpla's fp32 Gram)."""
    return bf(x) @ bf(x).T


def prod(a, b):
    """An s x s product of the fp32 Gram's matrices: TF32 inputs, fp32 result."""
    return tf32(a) @ tf32(b)


def x_iteration(x, table):
    x = bf(x)
    for a, b, c in table:
        g = gram(x)
        x = bf(a * x + bf(b * g + c * prod(g, g)) @ x)
    return x


def gram_iteration(x, table, as_m):
    x, k = bf(x), 0
    while k < len(table):
        g = gram(x)
        eye = torch.eye(g.shape[0])
        a0, b0, c0 = table[k]
        z0 = b0 * g + c0 * prod(g, g)
        if k + 1 < len(table):
            a1, b1, c1 = table[k + 1]
            h = prod(g, z0) + a0 * g
            g1 = prod(z0, h) + a0 * h
            z1 = b1 * g1 + c1 * prod(g1, g1)
            w, alpha, k = prod(z1, z0) + a1 * z0 + a0 * z1, a0 * a1, k + 2
        else:
            w, alpha, k = z0, a0, k + 1
        x = bf(bf(w + alpha * eye) @ x) if as_m else bf(bf(w) @ x + alpha * x)
    return x


def reference(x, table):
    x = x.double()
    for a, b, c in table:
        g = x @ x.T
        x = a * x + (b * g + c * g @ g) @ x
    return x


def main():
    torch.manual_seed(0)
    print("distance from the float64 iteration, bf16 input, fp32 Gram (TF32 products), 5 steps")
    print(f"{'shape':>9s} {'spectrum':8s} {'table':13s} {'X iter':>9s} {'Gram, W':>9s} "
          f"{'Gram, M':>9s}")
    for s, l in [(1, 249), (8, 512), (64, 512), (256, 1024), (512, 2048)]:
        for kind in ("gauss", "decay", "lowrank"):
            if s < 64 and kind != "gauss":
                continue
            x = matrix(kind, s, l) / 1.01  # Polar Express's safety factor, for every table
            for name, table in TABLES.items():
                ref = reference(x, table)
                runs = (x_iteration(x.float(), table), gram_iteration(x.float(), table, False),
                        gram_iteration(x.float(), table, True))
                devs = [float((y.double() - ref).norm() / ref.norm()) for y in runs]
                print(f"{s:>4d}x{l:<4d} {kind:8s} {name:13s} " +
                      " ".join(f"{d:9.2e}" for d in devs))


def short_sides():
    """Polar Express on s x 512 Gaussian inputs, s = 2..64: median / max over six draws."""
    torch.manual_seed(1)
    table = TABLES["polar_express"]
    print("s x 512 gauss, Polar Express: median / max over 6 draws of the distance from float64")
    for s in (2, 4, 8, 16, 32, 64):
        devs = {"X": [], "M": []}
        for _ in range(6):
            x = matrix("gauss", s, 512) / 1.01
            ref = reference(x, table)
            for name, y in (("X", x_iteration(x.float(), table)),
                            ("M", gram_iteration(x.float(), table, True))):
                devs[name].append(float((y.double() - ref).norm() / ref.norm()))
        print(f"  s={s:3d}: " + "   ".join(
            f"{'X iteration' if k == 'X' else 'Gram, M'} {statistics.median(v):.2e} / {max(v):.2e}"
            for k, v in devs.items()))


if __name__ == "__main__":
    if sys.argv[1:] == ["short"]:
        short_sides()
    else:
        main()
