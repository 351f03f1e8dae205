"""checks_fp8.py - the FP8 overlapped GEMMs of tpla.torch on several ranks,
written for both executors as checks.py is (device "cpu": gloo processes via
dist_util.run; "cuda": NCCL under torchrun): every rank quantizes with its
own scales, and the results are compared with float64 products of the
dequantized inputs. Shapes are multiples of 16 (what the CUDA executor's
FP8 GEMMs need). Every rank builds every rank's inputs from seeds, so the
references need no communication.
"""
import torch

import tpla.torch as tt

E4M3 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2


def quantized(shape, seed, dtype=E4M3, spread=4.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * spread).to(dtype)


def dequantized_product(a, scale_a, b, scale_b, transpose_b):
    """(a * scale_a) @ op(b * scale_b) in float64 (CPU), and the same product
    of absolute values (the scale of the rounding errors of a float32 sum)."""
    aa = a.cpu().double() * scale_a
    bb = b.cpu().double() * scale_b
    bb = bb.t() if transpose_b else bb
    return aa @ bb, aa.abs() @ bb.abs()


def assert_close(got, want, bound, rel, roundings=1):
    """|got - want| <= rel * bound + roundings * (rounding of the output type) * |want|."""
    out_eps = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
    err = (got.cpu().double() - want).abs()
    tol = rel * bound + roundings * out_eps[got.dtype] * want.abs() + 1e-6
    assert bool((err <= tol).all()), "max error %.3g (tolerance there %.3g)" % (
        err.max().item(), tol.flatten()[err.argmax()].item())
    return err.max().item()


def _scale(value, dev):
    return torch.tensor(value, dtype=torch.float32, device=dev)


def check_fp8_overlap(rank, world, device):
    comm = tt.Communicator(device=device, timeout=60)
    dev = comm.device
    rel = 1e-5 if comm.device.type == "cpu" else 2e-3  # fp32 sums; cuBLASLt fast accumulation
    k, n = 32, 16
    scale_a = [0.5 + 0.25 * q for q in range(world)]  # every rank quantizes its own way
    scale_b = [1.25 + 0.5 * q for q in range(world)]
    out = {}

    # AllGather+GEMM: rank q's rows (16 (q + 1) of them) with scale_a[q]; each rank its own B
    rows = [16 * (q + 1) for q in range(world)]
    a_parts = [quantized((rows[q], k), 100 + q) for q in range(world)]
    w = quantized((n, k), 200 + rank)  # n x k: transpose_b=True
    d, gathered, scales = tt.ag_gemm(a_parts[rank].to(dev), w.to(dev), comm,
                                     scale_a=_scale(scale_a[rank], dev),
                                     scale_b=_scale(scale_b[rank], dev), out_dtype=torch.float32,
                                     m=sum(rows), return_gathered=True)
    a_deq = torch.cat([a_parts[q].double() * scale_a[q] for q in range(world)])
    want, bound = dequantized_product(a_deq, 1.0, w, scale_b[rank], True)
    out["ag"] = assert_close(d, want, bound, rel)
    assert gathered.dtype == E4M3 and torch.equal(gathered.cpu().view(torch.uint8),
                                                  torch.cat(a_parts).view(torch.uint8))
    assert scales.dtype == torch.float32 and scales.shape == (world,)
    assert scales.cpu().tolist() == scale_a, (scales.cpu().tolist(), scale_a)
    # the same with B stored k x n (the plan transposes it), E5M2 weights, fast accumulation
    w5 = quantized((k, n), 300 + rank, E5M2)
    d = tt.ag_gemm(a_parts[rank].to(dev), w5.to(dev), comm, transpose_b=False,
                   scale_a=_scale(scale_a[rank], dev), scale_b=_scale(scale_b[rank], dev),
                   use_fast_accum=True, m=sum(rows))
    assert d.dtype == torch.bfloat16
    want, bound = dequantized_product(a_deq, 1.0, w5, scale_b[rank], False)
    out["ag_n_bf16"] = assert_close(d, want, bound, rel)

    # GEMM+ReduceScatter: rank q holds A_q (m x k_q) and B_q, the sum is split by rows
    m = 32 * world
    ks = [16 * (q + 1) for q in range(world)]
    a_rs = [quantized((m, ks[q]), 400 + q) for q in range(world)]
    for transpose_b in (True, False):
        b_rs = [quantized((n, ks[q]) if transpose_b else (ks[q], n), 500 + q)
                for q in range(world)]
        d_local = tt.gemm_rs(a_rs[rank].to(dev), b_rs[rank].to(dev), comm,
                             transpose_b=transpose_b, scale_a=_scale(scale_a[rank], dev),
                             scale_b=_scale(scale_b[rank], dev), out_dtype=torch.float32)
        want, bound = 0, 0
        for q in range(world):
            p, b_abs = dequantized_product(a_rs[q], scale_a[q], b_rs[q], scale_b[q], transpose_b)
            want, bound = want + p, bound + b_abs
        lo = sum(tt.even_split(m, world)[:rank])
        rows_here = tt.even_split(m, world)[rank]
        assert d_local.shape == (rows_here, n)
        out["rs_%s" % ("t" if transpose_b else "n")] = assert_close(
            d_local, want[lo:lo + rows_here], bound[lo:lo + rows_here], rel)
        # GEMM+AllReduce: the whole sum on every rank
        d_ar = tt.gemm_ar(a_rs[rank].to(dev), b_rs[rank].to(dev), comm, transpose_b=transpose_b,
                          scale_a=_scale(scale_a[rank], dev), scale_b=_scale(scale_b[rank], dev),
                          out_dtype=torch.float32)
        out["ar_%s" % ("t" if transpose_b else "n")] = assert_close(d_ar, want, bound, rel)
    comm.close()
    return out
