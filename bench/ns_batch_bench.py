"""ns_batch_bench.py - Newton-Schulz of a batch of equal matrices on one GPU.

Optimizers orthogonalize many matrices of one shape (every layer's q, k,
v, o; stacked experts). tpla.torch.newton_schulz takes a batch (B, m, n)
through one batched plan, which runs small matrices together with
strided-batched GEMMs (src/core/ns_group.c). This times, in one process, per
batch:
  tpla batch     newton_schulz on the (B, m, n) tensor (default fp32 Gram,
                 and the bf16 Gram: the reference's precision);
  tpla loop      newton_schulz on each of the B matrices in turn (bf16 Gram);
  torch batch    PyTorch's reference recipe on the (B, m, n) tensor
                 (bench/ns_torch.py's ns_local: batched matmuls, per-matrix
                 norm), the anchor.
Each eager and captured once into a torch.cuda.CUDAGraph; the wall time of
--iters back-to-back calls between two CUDA events / --iters, median of
--rounds loops after a warm-up (bench/ns_graph_bench.py's timing). 5 steps,
Muon coefficients, bf16 random input. Also the orthogonality error of
matrix 0, max |Q Q^T - I| over the short side, for each variant.

  python3 bench/ns_batch_bench.py [--batches 16x1024x1024,8x1024x4096]
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tpla.torch as tt  # noqa: E402
from ns_graph_bench import captured, per_call_us  # noqa: E402
from ns_torch import ns_local  # noqa: E402


def orth_error(q):
    q = q.float()
    if q.shape[0] > q.shape[1]:
        q = q.mT
    return float((q @ q.mT - torch.eye(q.shape[0], device=q.device)).abs().max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="32x512x512,16x1024x1024,8x1024x4096,8x4096x1024,"
                                         "4x2048x2048,2x4096x4096")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.manual_seed(1234)
    print("# Newton-Schulz of a batch on one GPU (%s, torch %s): us per batch, the wall time of "
          "%d back-to-back calls / %d, median of %d rounds; 5 steps, Muon, bf16 input"
          % (torch.cuda.get_device_name(), torch.__version__, args.iters, args.iters,
             args.rounds))
    print("# %14s %-16s %10s %10s %12s %12s" % ("batch", "variant", "eager", "graph",
                                                  "graph/torch", "orth_max"))
    for spec in args.batches.split(","):
        b, m, n = (int(v) for v in spec.split("x"))
        x = torch.randn(b, m, n, device="cuda").bfloat16()
        out = torch.empty_like(x)
        variants = (  # the PyTorch reference last: the others are compared with its graph
            ("tpla_batch_fp32", lambda: tt.newton_schulz(x, out=out)),
            ("tpla_batch_bf16", lambda: tt.newton_schulz(x, out=out, gram_dtype=x.dtype)),
            ("tpla_loop_bf16", lambda: [tt.newton_schulz(x[i], out=out[i], gram_dtype=x.dtype)
                                        for i in range(b)]),
            ("torch_batch", lambda: out.copy_(ns_local(x, 5))))
        rows = []
        for name, fn in variants:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            err = orth_error(out[0])
            rows.append((name, per_call_us(fn, args.iters, args.rounds),
                         per_call_us(captured(fn), args.iters, args.rounds), err))
        torch.cuda.synchronize()
        anchor = rows[-1][2]
        for name, eager, graph, err in rows:
            print("  %14s %-16s %10.1f %10.1f %12.3f %12.4f" % (spec, name, eager, graph,
                                                               graph / anchor, err), flush=True)


if __name__ == "__main__":
    main()
