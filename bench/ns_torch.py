"""ns_torch.py - PyTorch anchors for the Newton-Schulz benchmark.

Times the Muon reference (5 quintic steps, bf16, normalization by the
Frobenius norm) on one GPU, and on several GPUs the two distributed variants
a PyTorch user would write for a row-sharded matrix:
  gram_allreduce  all-reduce of the column Gram X^T X (sum of local Grams),
                  then X_p <- a X_p + X_p (b G + c G^2) locally;
  gather          all-gather the shards, run the 1-GPU NS on every rank,
                  keep the own rows.
Reports the median time (CUDA events) and the error against the exact polar
factor (SVD in fp32) in the same units as `tpla ns`.

  python3 bench/ns_torch.py --shapes 4096x4096,8192x8192              # 1 GPU
  torchrun --nproc_per_node=2 bench/ns_torch.py --shapes 8192x8192     # 2 GPUs
Writes one JSON object per line to --json (append) and a '#' table to stdout.
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist

MUON = (3.4445, -4.7750, 2.0315)


def ns_local(x, steps, coeffs=MUON, eps=1e-7):
    """Muon NS on one GPU: iterate on the Gram of the short side; x may be a
    batch (..., m, n), as in the reference zeropower_via_newtonschulz5."""
    a, b, c = coeffs
    y = x.bfloat16()
    tall = y.size(-2) > y.size(-1)  # of each matrix, not of a batch
    if tall:
        y = y.mT
    y = y / (y.norm(dim=(-2, -1), keepdim=True) + eps)  # per matrix of a batch (..., m, n)
    for _ in range(steps):
        g = y @ y.mT
        p = b * g + c * (g @ g)
        y = a * y + p @ y
    return y.mT if tall else y


def ns_gram_allreduce(xp, steps, coeffs=MUON, eps=1e-7):
    """Row-sharded X: all-reduce the column Gram each step (n x n)."""
    a, b, c = coeffs
    y = xp.bfloat16()
    sq = (y.float() ** 2).sum()
    dist.all_reduce(sq)
    y = y / (sq.sqrt() + eps).to(y.dtype)
    for _ in range(steps):
        g = y.mT @ y
        dist.all_reduce(g)
        p = b * g + c * (g @ g)
        y = a * y + y @ p
    return y


def ns_gather(xp, steps, rows, offset, coeffs=MUON):
    world = dist.get_world_size()
    parts = [torch.empty_like(xp) for _ in range(world)]
    dist.all_gather(parts, xp.contiguous())
    full = torch.cat(parts, dim=0)
    return ns_local(full, steps, coeffs)[offset:offset + rows]


def polar_errors(x_in, y):
    """Relative Frobenius error of y against U V^T, and max |Y Y^T - I| on
    the short side (both in fp32)."""
    x = x_in.float()
    u, _, vh = torch.linalg.svd(x, full_matrices=False)
    polar = u @ vh
    yf = y.float()
    rel = ((yf - polar).norm() / polar.norm()).item()
    short = yf if yf.shape[0] <= yf.shape[1] else yf.mT
    eye = torch.eye(short.shape[0], device=y.device)
    orth = (short @ short.mT - eye).abs().max().item()
    return rel, orth


def time_ms(fn, inputs, warmup, iters):
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(inputs[i % len(inputs)])
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def ns_flops(m, n, steps):
    """Reference FLOPs of NS (DESIGN.md): 4 s^2 l + 2 s^3 per step."""
    s, l = min(m, n), max(m, n)
    return steps * (4 * s * s * l + 2 * s ** 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096,4096x14336,8192x8192,16384x16384")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--error-max-dim", type=int, default=8192,
                    help="skip the SVD error check above this dimension (0: never check)")
    args = ap.parse_args()

    distributed = "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1
    rank, world = 0, 1
    if distributed:
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dev = torch.device("cuda")
    rows_out = []
    if rank == 0:
        print(f"# PyTorch {torch.__version__} NS anchors, {world} GPU(s), {args.steps} steps, "
              "Muon coefficients, bf16; time = median of %d after %d warm-up" %
              (args.iters, args.warmup))
        print("#%11s %6s %-15s %10s %9s %9s %9s" %
              ("shape", "gpus", "variant", "time_ms", "TFLOP/s", "polar_rel", "orth_max"))
    for shape in args.shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        gen = torch.Generator(device=dev).manual_seed(1234)
        # rotate 3 inputs so repeated runs do not live in L2
        full_inputs = [torch.randn(m, n, device=dev, generator=gen, dtype=torch.float32)
                       .bfloat16() for _ in range(3)]
        if not distributed:
            variants = {"torch_1gpu": lambda x: ns_local(x, args.steps)}
            inputs = full_inputs
            offset, rows = 0, m
        else:
            rows = m // world + (1 if rank < m % world else 0)
            offset = rank * (m // world) + min(rank, m % world)
            inputs = [x[offset:offset + rows].contiguous() for x in full_inputs]
            variants = {
                "torch_gram_ar": lambda x: ns_gram_allreduce(x, args.steps),
                "torch_gather": lambda x: ns_gather(x, args.steps, rows, offset),
            }
        for name, fn in variants.items():
            ms = time_ms(fn, inputs, args.warmup, args.iters)
            if distributed:  # the slowest rank's median, as tpla's tmax_ms
                t = torch.tensor([ms], device=dev)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                ms = t.item()
            rel = orth = float("nan")
            if max(m, n) <= args.error_max_dim:
                y = fn(inputs[0])
                if distributed:
                    parts = [torch.empty(m // world + (1 if r < m % world else 0), n,
                                         device=dev, dtype=y.dtype) for r in range(world)]
                    dist.all_gather(parts, y.contiguous())
                    y = torch.cat(parts, dim=0)
                if rank == 0:
                    rel, orth = polar_errors(full_inputs[0], y)
            if rank == 0:
                tflops = ns_flops(m, n, args.steps) / (ms * 1e-3) / 1e12
                print(" %11s %6d %-15s %10.3f %9.1f %9.4f %9.4f" %
                      (shape, world, name, ms, tflops, rel, orth), flush=True)
                rows_out.append(dict(shape=shape, gpus=world, variant=name, time_ms=ms,
                                     tflops=tflops, polar_rel=rel, orth_max=orth))
        del full_inputs, inputs
        torch.cuda.empty_cache()
    if rank == 0 and args.json:
        with open(args.json, "a") as f:
            for r in rows_out:
                f.write(json.dumps(r) + "\n")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
