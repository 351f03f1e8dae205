"""overlap_torch.py - PyTorch anchors for `tpla ag-gemm`, `tpla gemm-rs`, `tpla gemm-ar`.

For each shape of DESIGN.md (bf16), on every rank of a torchrun job:
  gemm    one torch.matmul of the local problem (AG: the gathered M x K times
          K x N; RS/AR: M x K_local times K_local x N)
  comm    the NCCL collective of the same bytes (all_gather_into_tensor,
          reduce_scatter_tensor, all_reduce)
  serial  the collective, then the matmul (AG), or the matmul, then the collective
  fused   torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter
          (symmetric memory; no fused op exists for GEMM+AllReduce)
Each is the median over --iters calls after --warmup, each timed alone with
CUDA events, inputs rotated over enough sets to exceed twice the L2; the
table shows the slowest rank. Shapes: AG (M global rows, K, N per rank);
RS/AR (M, K per rank, N).

  torchrun --nproc_per_node=2 bench/overlap_torch.py --json out/torch_overlap.jsonl
  torchrun --nproc_per_node=2 bench/overlap_torch.py --ops ag --shapes 8192x8192x4096

NVLink multicast stays off: the script sets TORCH_SYMM_MEM_DISABLE_MULTICAST=1
and NCCL_NVLS_ENABLE=0 before anything initializes, and refuses to run when
the environment asks for the opposite.
"""
import os
import sys

# ---- environment check: before torch initializes NCCL or symmetric memory ----
_REQUIRED = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0"}
for _name, _value in _REQUIRED.items():
    _have = os.environ.get(_name)
    if _have is not None and _have != _value:
        sys.exit(f"overlap_torch.py: {_name}={_have}, but NVLink multicast must stay off "
                 f"({_name}={_value}); unset it or set it to {_value}")
    os.environ[_name] = _value

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

AG_SHAPES = "8192x8192x4096,16384x8192x14336,32768x8192x4096,16384x8192x1024"
RS_SHAPES = "8192x4096x8192,16384x14336x8192,16384x1024x8192"
L2_BYTES = 60 << 20  # H200; only decides how many input sets rotate


def parse_shapes(text):
    out = []
    for s in text.split(","):
        m, k, n = (int(v) for v in s.lower().split("x"))
        out.append((m, k, n))
    return out


def timed(fn, nsets, warmup, iters):
    """Median microseconds of fn(i) called alone, i rotating over the sets."""
    for i in range(warmup):
        fn(i % nsets)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn((warmup + i) % nsets)
        stops[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in zip(starts, stops))


def slowest(us):
    t = torch.tensor([us], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def sets_for(set_bytes):
    return max(1, min(8, -(-2 * L2_BYTES // set_bytes)))


def bench_ag(shape, world, rank, group_name, args):
    m, k, n = shape
    rows = m // world
    nsets = sets_for(rows * k * 2 + k * n * 2)
    a = [torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
    b = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
    full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
    full.normal_()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

    def gemm(i):
        torch.matmul(full, b[i], out=out)

    def comm(i):
        dist.all_gather_into_tensor(full, a[i])

    def serial(i):
        dist.all_gather_into_tensor(full, a[i])
        torch.matmul(full, b[i], out=out)

    def fused(i):
        torch.ops.symm_mem.fused_all_gather_matmul(a[i], [b[i]], 0, group_name)

    return run_all(gemm, comm, serial, fused, nsets, args, bytes_moved=(m - rows) * k * 2)


def bench_rs(shape, world, rank, group_name, args, allreduce=False):
    m, k, n = shape
    nsets = sets_for(m * k * 2 + k * n * 2)
    a = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
    b = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
    part = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m // world, n, device="cuda", dtype=torch.bfloat16)

    def gemm(i):
        torch.matmul(a[i], b[i], out=part)

    def comm(i):
        if allreduce:
            dist.all_reduce(part)
        else:
            dist.reduce_scatter_tensor(out, part)

    def serial(i):
        gemm(i)
        comm(i)

    def fused(i):
        torch.ops.symm_mem.fused_matmul_reduce_scatter(a[i], b[i], "sum", 0, group_name)

    moved = (m - m // world) * n * 2 * (2 if allreduce else 1)
    return run_all(gemm, comm, serial, None if allreduce else fused, nsets, args, moved)


def fp8_pair(rows, k, n, nsets):
    """FP8 operands as torch._scaled_mm takes them: A row-major (rows x k),
    B column-major (k x n, i.e. an n x k row-major tensor transposed)."""
    f8 = torch.float8_e4m3fn
    a = [torch.randn(rows, k, device="cuda").to(f8) for _ in range(nsets)]
    b = [torch.randn(n, k, device="cuda").to(f8).t() for _ in range(nsets)]
    return a, b


def bench_ag_fp8(shape, world, rank, group_name, args):
    m, k, n = shape
    rows = m // world
    nsets = sets_for(rows * k + k * n)
    a, b = fp8_pair(rows, k, n, nsets)
    full = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    fast = args.accum == "fast"

    def gemm(i):
        torch._scaled_mm(full, b[i], one, one, out_dtype=torch.bfloat16, use_fast_accum=fast)

    def comm(i):
        dist.all_gather_into_tensor(full.view(torch.uint8), a[i].view(torch.uint8))

    def serial(i):
        comm(i)
        gemm(i)

    def fused(i):
        torch.ops.symm_mem.fused_all_gather_scaled_matmul(
            a[i], [b[i]], one, [one], 0, group_name, [None], [None], [torch.bfloat16],
            [fast])

    return run_all(gemm, comm, serial, fused, nsets, args, bytes_moved=(m - rows) * k)


def bench_rs_fp8(shape, world, rank, group_name, args, allreduce=False):
    m, k, n = shape
    nsets = sets_for(m * k + k * n)
    a, b = fp8_pair(m, k, n, nsets)
    part = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m // world, n, device="cuda", dtype=torch.bfloat16)
    one = torch.ones((), device="cuda")
    fast = args.accum == "fast"

    def gemm(i):
        torch._scaled_mm(a[i], b[i], one, one, out_dtype=torch.bfloat16, use_fast_accum=fast,
                         out=part)

    def comm(i):
        if allreduce:
            dist.all_reduce(part)
        else:
            dist.reduce_scatter_tensor(out, part)

    def serial(i):
        gemm(i)
        comm(i)

    def fused(i):
        torch.ops.symm_mem.fused_scaled_matmul_reduce_scatter(
            a[i], b[i], one, one, "sum", 0, 0, group_name, [m, n], None, None, torch.bfloat16,
            fast)

    moved = (m - m // world) * n * 2 * (2 if allreduce else 1)
    return run_all(gemm, comm, serial, None if allreduce else fused, nsets, args, moved)


def run_all(gemm, comm, serial, fused, nsets, args, bytes_moved):
    res = {}
    for name, fn in (("gemm", gemm), ("comm", comm), ("serial", serial), ("fused", fused)):
        if fn is None:
            res[name + "_us"] = None
            continue
        try:
            res[name + "_us"] = slowest(timed(fn, nsets, args.warmup, args.iters))
        except Exception as e:  # e.g. symmetric memory unavailable: report, go on
            res[name + "_us"] = None
            res[name + "_error"] = f"{type(e).__name__}: {e}"[:200]
    res["bytes_moved"] = bytes_moved
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="ag,rs,ar", help="comma list of ag, rs, ar")
    ap.add_argument("--ag-shapes", default=AG_SHAPES)
    ap.add_argument("--rs-shapes", default=RS_SHAPES, help="also used for ar")
    ap.add_argument("--shapes", default=None, help="MxKxN,... for every op in --ops")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default=None, help="append one JSON object per line")
    ap.add_argument("--fp8", action="store_true",
                    help="E4M3 inputs (torch._scaled_mm, bf16 out; AG gathers FP8 bytes)")
    ap.add_argument("--accum", default="split", choices=["split", "fast"],
                    help="FP8 accumulation: use_fast_accum False (split) or True (fast)")
    args = ap.parse_args()

    dist.init_process_group("nccl")
    world, rank = dist.get_world_size(), dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    group_name = dist.group.WORLD.group_name
    try:  # needed before PyTorch 2.9, deprecated (a no-op warning) after
        from torch.distributed._symmetric_memory import enable_symm_mem_for_group
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            enable_symm_mem_for_group(group_name)
    except ImportError:
        pass
    torch.manual_seed(1234 + rank)
    if rank == 0:
        kind = f"e4m3 ({args.accum} accumulation)" if args.fp8 else "bf16"
        print(f"# PyTorch {torch.__version__} overlap anchors, {world} GPUs, {kind}, "
              f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
              f"TORCH_SYMM_MEM_DISABLE_MULTICAST={os.environ['TORCH_SYMM_MEM_DISABLE_MULTICAST']} "
              f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}")
        print("# times in us, median of %d after %d warm-up, slowest rank; eff = max(gemm, "
              "comm) / fused" % (args.iters, args.warmup))
        print("#%8s %6s %6s %6s %10s %10s %10s %10s %6s" %
              ("op", "M", "K", "N", "gemm", "comm", "serial", "fused", "eff"))
    for op in args.ops.split(","):
        text = args.shapes or (args.ag_shapes if op == "ag" else args.rs_shapes)
        for shape in parse_shapes(text):
            ag, rs = (bench_ag_fp8, bench_rs_fp8) if args.fp8 else (bench_ag, bench_rs)
            if op == "ag":
                r = ag(shape, world, rank, group_name, args)
            else:
                r = rs(shape, world, rank, group_name, args, allreduce=(op == "ar"))
            r.update({"op": {"ag": "ag-gemm", "rs": "gemm-rs", "ar": "gemm-ar"}[op],
                      "M": shape[0], "K": shape[1], "N": shape[2], "world": world,
                      "torch": torch.__version__,
                      "dtype": "e4m3" if args.fp8 else "bf16",
                      "accum": args.accum if args.fp8 else None})
            if rank == 0:
                f = r["fused_us"]
                eff = max(r["gemm_us"] or 0, r["comm_us"] or 0) / f if f else float("nan")

                def show(v):
                    return "%10.1f" % v if v is not None else "%10s" % "n/a"
                print(" %8s %6d %6d %6d %s %s %s %s %6.2f" %
                      (r["op"], *shape, show(r["gemm_us"]), show(r["comm_us"]),
                       show(r["serial_us"]), show(f), eff), flush=True)
                for key in ("gemm_error", "comm_error", "serial_error", "fused_error"):
                    if key in r:
                        print(f"#   {key}: {r[key]}", flush=True)
                if args.json:
                    with open(args.json, "a") as out:
                        out.write(json.dumps(r) + "\n")
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
