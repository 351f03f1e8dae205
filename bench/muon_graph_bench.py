"""muon_graph_bench.py - a whole Muon step on one GPU, eager and captured in a CUDA graph.

A step orthogonalizes every matrix of the model: tpla.torch.Muon runs them as
one batched plan, the PyTorch anchor (the reference recipe: Nesterov momentum,
ns_torch.py's ns_local in bf16, the update scaled by max(1, rows/cols)^0.5)
one matrix after another. For a transformer of --layers layers of width
--hidden (per layer q, k, v, o: hidden x hidden; MLP: 4 hidden x hidden and
hidden x 4 hidden), this times per step: each optimizer eager, and its step
captured once into a torch.cuda.CUDAGraph and replayed. Wall time of --iters
back-to-back steps between two CUDA events / --iters, median of --rounds
loops after a warm-up; the gradients are fixed random bf16 tensors (the
steps' inputs; the parameters move, as in training).

  python3 bench/muon_graph_bench.py [--hidden 1024] [--layers 8] [--iters 20]
"""
import argparse
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tpla.torch as tt  # noqa: E402
from ns_graph_bench import captured, per_call_us  # noqa: E402
from ns_torch import ns_local  # noqa: E402


def model_params(hidden, layers):
    shapes = [(hidden, hidden)] * 4 + [(4 * hidden, hidden), (hidden, 4 * hidden)]
    params = []
    for _ in range(layers):
        for rows, cols in shapes:
            p = torch.nn.Parameter(torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
                                   * 0.02)
            p.grad = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            params.append(p)
    return params


def torch_muon(params, lr=0.02, momentum=0.95):
    """The anchor's step: the reference recipe, one matrix at a time."""
    bufs = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step():
        for p, buf in zip(params, bufs):
            buf.lerp_(p.grad, 1.0 - momentum)
            u = p.grad.lerp(buf, momentum)
            x = ns_local(u, 5)
            rows, cols = p.shape
            p.add_(x.to(p.dtype), alpha=-lr * math.sqrt(max(1.0, rows / cols)))
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(1234)
    ours = model_params(args.hidden, args.layers)
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    for p, q in zip(ours, theirs):
        q.grad = p.grad.clone()
    opt = tt.Muon(ours, lr=0.02, momentum=0.95)
    steps = (("tpla Muon (one batched plan)", opt.step), ("torch Muon reference",
                                                           torch_muon(theirs)))
    print("# a Muon step on one GPU (%s, torch %s): %d layers of width %d, %d matrices; ms per "
          "step, the wall time of %d back-to-back steps / %d, median of %d rounds"
          % (torch.cuda.get_device_name(), torch.__version__, args.layers, args.hidden,
             len(ours), args.iters, args.iters, args.rounds))
    print("# %-30s %10s %10s %10s" % ("optimizer", "eager", "graph", "graph/eag"))
    results = []
    for name, step in steps:
        for _ in range(3):
            step()
        eager = per_call_us(step, args.iters, args.rounds) / 1e3
        graph = per_call_us(captured(step), args.iters, args.rounds) / 1e3
        results.append((eager, graph))
        print("  %-30s %10.3f %10.3f %10.3f" % (name, eager, graph, graph / eager), flush=True)
    (te, tg), (re, rg) = results
    print("# tpla / torch: eager %.3f, graph %.3f" % (te / re, tg / rg))


if __name__ == "__main__":
    main()
