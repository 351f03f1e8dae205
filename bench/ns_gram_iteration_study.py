#!/usr/bin/env python3
"""Numerics study (CPU, PyTorch): Newton-Schulz iterated on the Gram matrix.

For a tall/wide X (s x l, s the short side), the Gram iteration forms G = X X^T
once and then works in s x s only: P_k = a I + b G_k + c G_k^2, R = R P_k,
G_{k+1} = P_k G_k P_k (all polynomials in G_0, so they commute and stay
symmetric), and returns R X. It needs fewer FLOPs than the standard step when
l / s is large (see docs/ALGORITHMS.md), but its rounding errors accumulate in
G instead of being reset by recomputing X X^T every step.

This script compares, for 5 Muon steps, the standard iteration as tpla runs it
(bf16 X, bf16-input GEMMs, fp32 or bf16 Gram) with the Gram iteration whose
s x s products use bf16 inputs and storage (tpla's bf16 Gram), TF32 inputs and
fp32 storage (tpla's fp32 Gram of a half input), or exact arithmetic, with and
without restarts (recomputing X and its Gram before some steps; tpla restarts
every two steps: before steps 2 and 4), on three spectra (Gaussian, log-decaying
to 1e-4, and a low-rank-like one). Reported: the distance from the float64
polynomial iterate, the distance from the exact polar factor (SVD), and the
singular-value range.

    python3 bench/ns_gram_iteration_study.py [s l]      (default 256 1024)
"""
import sys

import torch

BF = torch.bfloat16
MUON = [(3.4445, -4.7750, 2.0315)] * 5


def mm(a, b, out):
    """A GEMM with bf16 inputs, fp32 accumulation, the result rounded to `out`."""
    return (a.to(BF).float() @ b.to(BF).float()).to(out).float()


def tf32(x):
    """Round fp32 to TF32's 10-bit mantissa (nearest)."""
    i = x.float().contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def standard(x, gram):
    """tpla's step: X <- a X + (b A + c A^2) X, A = X X^T in `gram`, X in bf16."""
    x = x.to(BF).float()
    for a, b, c in MUON:
        g = mm(x, x.T, gram)
        p = (b * g + c * mm(g, g, gram)).to(BF).float()
        x = (a * x + mm(p, x, torch.float32)).to(BF).float()
    return x


def gram_iteration(x, prod, store, restarts=()):
    """The Gram iteration with s x s products `prod`, s x s matrices rounded to
    `store`; restart before the listed steps."""
    x0 = x.to(BF).float()
    g, r = mm(x0, x0.T, store), None
    for k, (a, b, c) in enumerate(MUON):
        if k in restarts:
            x0, r = mm(r, x0, BF), None
            g = mm(x0, x0.T, store)
        p = (a * torch.eye(g.shape[0]) + b * g + c * prod(g, g)).to(store).float()
        r = p if r is None else prod(r, p).to(store).float()
        if k < len(MUON) - 1:
            g = prod(p, prod(g, p).to(store).float())
            g = ((g + g.T) / 2).to(store).float()
    return mm(r, x0, BF)


PRODUCTS = {  # name: (product, storage)
    "bf16": (lambda a, b: mm(a, b, torch.float32), BF),
    "tf32": (lambda a, b: tf32(a) @ tf32(b), torch.float32),
    "exact": (lambda a, b: (a.double() @ b.double()).float(), torch.float32),
}


def reference(x):
    x = x.double()
    for a, b, c in MUON:
        g = x @ x.T
        x = a * x + (b * g + c * g @ g) @ x
    return x


def matrix(kind, s, l):
    x = torch.randn(s, l, dtype=torch.float64)
    if kind != "gauss":
        u, _, v = torch.linalg.svd(x, full_matrices=False)
        sig = torch.logspace(0, -4 if kind == "decay" else -8, s, dtype=torch.float64)
        if kind == "lowrank":
            sig[s // 8:] *= 1e-3
        x = u @ torch.diag(sig) @ v
    return x / x.norm()


def main():
    s, l = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (256, 1024)
    torch.manual_seed(0)
    for kind in ("gauss", "decay", "lowrank"):
        x = matrix(kind, s, l)
        u, _, v = torch.linalg.svd(x, full_matrices=False)
        polar, ref = u @ v, reference(x)
        runs = [("standard, fp32 Gram", standard(x.float(), torch.float32)),
                ("standard, bf16 Gram", standard(x.float(), BF))]
        for name in ("bf16", "tf32", "exact"):
            for restarts in ((), (2,), (2, 4)):
                label = f"Gram iteration, {name}" + (f", restart {restarts}" if restarts else "")
                prod, store = PRODUCTS[name]
                runs.append((label, gram_iteration(x.float(), prod, store, restarts)))
        print(f"{kind} {s}x{l}: dev = |Y - Y_float64| / |Y_float64|, polar = |Y - UV^T| / |UV^T|")
        for label, y in runs:
            sv = torch.linalg.svdvals(y.double())
            dev = float((y.double() - ref).norm() / ref.norm())
            pol = float((y.double() - polar).norm() / polar.norm())
            print(f"  {label:40s} dev {dev:.3e}  polar {pol:.3e}  sv [{sv.min():.3f}, {sv.max():.3f}]")


if __name__ == "__main__":
    main()
