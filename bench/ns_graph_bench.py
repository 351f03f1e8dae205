"""ns_graph_bench.py - what CUDA graph capture saves Newton-Schulz on small matrices.

A Muon step orthogonalizes one matrix per layer, many of them small: there
each NS call is a few dozen short kernels, and the host's launches, not the
GPU, can set the pace. This times, on one GPU in one process, per call:
  tpla eager    tpla.torch.newton_schulz, calls back to back on the stream,
                with its default fp32 Gram and with a bf16 Gram (the
                reference's precision), the cost model's iteration, and
                (bf16 Gram) each iteration forced: x, and gram ("gramit");
  tpla graph    the same call captured once into a torch.cuda.CUDAGraph,
                replayed back to back;
  torch eager   the PyTorch Muon reference (bench/ns_torch.py's ns_local);
  torch graph   that function captured and replayed the same way.
Each is the wall time of a loop of --iters calls between two CUDA events,
divided by --iters (so host gaps count), median of --rounds loops after a
warm-up; 5 steps, Muon coefficients, bf16, the same random input for all
variants (small matrices stay in L2 whichever runs). Prints a table with
the ratios graph / eager and graph / the reference's graph.

  python3 bench/ns_graph_bench.py [--shapes 256x256,1024x1024] [--iters 200]
"""
import argparse
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tpla.torch as tt  # noqa: E402
from ns_torch import ns_local  # noqa: E402


def per_call_us(fn, iters, rounds, before_round=None):
    """Median over rounds of (wall time of `iters` back-to-back calls) / iters;
    before_round() (if given) is enqueued before each round's start event."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(rounds):
        if before_round is not None:
            before_round()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / iters)
    return statistics.median(times)


def captured(fn):
    """fn warmed up on a side stream, then captured; returns the replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="256x256,512x512,1024x1024,1024x4096,2048x2048,4096x4096")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    torch.manual_seed(1234)
    print("# CUDA graphs and Newton-Schulz on one GPU (%s, torch %s): us per call, the wall "
          "time of %d back-to-back calls / %d, median of %d rounds; 5 steps, Muon, bf16 input"
          % (torch.cuda.get_device_name(), torch.__version__, args.iters, args.iters,
             args.rounds))
    print("# %10s %-16s %10s %10s %9s %12s" % ("shape", "variant", "eager", "graph",
                                                "graph/eag", "graph/torch"))
    for shape in args.shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        x = torch.randn(m, n, device="cuda").bfloat16()
        out = torch.empty_like(x)
        variants = (  # the PyTorch reference last: the others are compared with its graph
            ("tpla_gram_fp32", lambda: tt.newton_schulz(x, out=out)),
            ("tpla_gram_bf16", lambda: tt.newton_schulz(x, out=out, gram_dtype=x.dtype)),
            ("tpla_bf16_x", lambda: tt.newton_schulz(x, out=out, gram_dtype=x.dtype,
                                                     iteration="x")),
            ("tpla_bf16_gramit", lambda: tt.newton_schulz(x, out=out, gram_dtype=x.dtype,
                                                          iteration="gram")),
            ("torch", lambda: ns_local(x, 5)))
        rows = []
        for name, fn in variants:
            for _ in range(3):
                fn()
            rows.append((name, per_call_us(fn, args.iters, args.rounds),
                         per_call_us(captured(fn), args.iters, args.rounds)))
        torch.cuda.synchronize()
        anchor = rows[-1][2]
        for name, eager, graph in rows:
            print("  %10s %-16s %10.1f %10.1f %9.3f %12.3f" % (
                shape, name, eager, graph, graph / eager, graph / anchor), flush=True)


if __name__ == "__main__":
    main()
