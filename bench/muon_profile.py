"""muon_profile.py - where a Muon step's GPU time goes: torch.profiler's kernel table of
tpla.torch.Muon steps on one GPU (the model of muon_graph_bench.py), to choose what to speed up.

Steps the optimizer 3 times, then profiles --steps eager steps (CUDA activity) and prints the
kernels by total GPU time, with the step's wall time and the GPU's busy time per step.

  python3 bench/muon_profile.py [--hidden 1024] [--layers 8] [--gram fp32|bf16] [--adamw]
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tpla.torch as tt  # noqa: E402
from muon_graph_bench import adamw_params, model_params  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--gram", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--adamw", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=25)
    args = ap.parse_args()
    torch.manual_seed(1234)
    ps = model_params(args.hidden, args.layers)
    aw = adamw_params(args.hidden, args.layers, 0) if args.adamw else []
    gram = torch.float32 if args.gram == "fp32" else torch.bfloat16
    opt = tt.Muon(ps, lr=0.02, momentum=0.95, ns_gram_dtype=gram, adamw_params=aw,
                  capturable=True)
    for _ in range(3):
        opt.step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start.record()
        for _ in range(args.steps):
            opt.step()
        end.record()
        torch.cuda.synchronize()
    wall = start.elapsed_time(end) / args.steps
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.time_range.elapsed_us() for e in kernels) / 1e3 / args.steps
    print("# Muon step, width %d x %d layers, %d matrices, %d AdamW, %s Gram: wall %.3f ms per "
          "step (profiled), GPU busy %.3f ms, %d GPU activities per step"
          % (args.hidden, args.layers, len(ps), len(aw), args.gram, wall, busy,
             len(kernels) // args.steps))
    table = {}
    for e in kernels:
        t = table.setdefault(e.name[:90], [0, 0.0])
        t[0] += 1
        t[1] += e.time_range.elapsed_us()
    print("# %-90s %7s %10s %8s" % ("kernel", "count", "us/step", "share"))
    for name, (n, us) in sorted(table.items(), key=lambda kv: -kv[1][1])[:args.rows]:
        print("  %-90s %7d %10.1f %7.1f%%" % (name, n // args.steps, us / args.steps,
                                            100.0 * us / 1e3 / args.steps / busy))


if __name__ == "__main__":
    main()
