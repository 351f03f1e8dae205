"""checks.py - the distributed checks of the tpla Python package, written once
for both executors: each function runs on every rank of an initialized
torch.distributed group (gloo processes on a CPU in CI, via dist_util.run;
NCCL under torchrun on GPUs, via gpu/run_checks.py) with device "cpu" or
"cuda", asserts real properties against independent references (refs.py)
and returns a small dict of measurements.
"""
import os

import numpy as np
import torch
import torch.distributed as dist

import tpla
import tpla.torch as tt
from refs import (CUBIC, MUON, MUON5, RefMuon, gather_cols, gather_rows, ns_numpy, schedule,
                  seeded)


def _tol(dtype):
    return {torch.float32: 2e-5, torch.bfloat16: 6e-2, torch.float16: 1e-2}[dtype]


def _shard(x, dim, sizes, rank):
    off = sum(sizes[:rank])
    return x.narrow(dim, off, sizes[rank])


def _raises(cls, fn, *needles):
    try:
        fn()
    except cls as e:
        for n in needles:
            assert n in str(e), "message %r lacks %r" % (str(e), n)
        return e
    raise AssertionError("expected %s" % cls.__name__)


# ---- communicator -----------------------------------------------------------------

def check_communicator(rank, world, device):
    with tt.Communicator(device=device, timeout=60) as comm:
        assert (comm.rank, comm.world_size) == (dist.get_rank(), world)
        assert comm.device.type == device
        assert comm.executor == ("cuda" if device == "cuda" else "host")
        comm.barrier()
        c0 = comm.counters()
        buf = torch.full((1000,), float(rank + 1), device=comm.device)
        comm.context.allreduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), 0, comm.stream())
        assert torch.all(buf == world * (world + 1) / 2), buf[:4]
        assert comm.counters()["allreduces"] == c0["allreduces"] + 1
    _raises(tpla.InvalidUsageError, lambda: comm.context, "after close")
    if device == "cpu" and world > 1:  # the segment's name went once every rank attached
        assert comm.shm_name and not os.path.exists("/dev/shm/" + comm.shm_name)
    return {}


def check_peer_exit(rank, world, device):
    """The last rank exits without a word: the others get RemoteError quickly
    (well within the 60 s timeout), not a hang."""
    import time
    comm = tt.Communicator(device=device, timeout=60)
    x = seeded((12, 8), 3, device=comm.device)
    tt.newton_schulz(x, comm)  # a working group first
    if rank == world - 1:
        os._exit(0)
    t0 = time.monotonic()
    e = _raises(tpla.RemoteError, lambda: tt.newton_schulz(x, comm), "exited or died")
    elapsed = time.monotonic() - t0
    assert elapsed < 10, "noticed after %.1f s" % elapsed
    _raises(tpla.RemoteError, lambda: comm.barrier(), "broken")
    comm.close()
    return {"noticed_after_s": elapsed, "message": e.detail}


# ---- Newton-Schulz ---------------------------------------------------------------

def check_ns_numerics(rank, world, device):
    comm = tt.Communicator(device=device, timeout=60)
    worst = {}
    cases = [  # (global shape, shard dim, uneven, dtype, coefficients, steps, reference)
        ((48, 32), 0, False, torch.float32, "muon", 5, schedule(MUON, 5)),
        ((30, 64), 0, True, torch.float32, "muon5", 5, MUON5),
        ((40, 28), 1, True, torch.float32, "cubic", 8, schedule(CUBIC, 8)),
        ((36, 36), 1, False, torch.float32, [list(t) for t in MUON5[:3]], 3, MUON5[:3]),
        ((64, 48), 0, True, torch.bfloat16, "muon", 5, schedule(MUON, 5)),
    ]
    for i, (shape, dim, uneven, dtype, coef, steps, table) in enumerate(cases):
        x = seeded(shape, 100 + i, dtype=dtype, device=comm.device)
        n = shape[dim]
        k = n // (2 * world)  # uneven: small shards after a large first one
        sizes = ([n - (world - 1) * k] + [k] * (world - 1)) if uneven else \
            tt.even_split(n, world)
        assert sum(sizes) == n
        local = _shard(x, dim, sizes, rank).contiguous()
        y = tt.newton_schulz(local, comm, steps=steps, coefficients=coef, shard_dim=dim,
                             shard_sizes=sizes)
        assert y.dtype == dtype and y.shape == local.shape
        got = gather_rows(y) if dim == 0 else gather_cols(y)
        want = ns_numpy(x.double().cpu().numpy(), table)
        err = np.abs(got - want).max() / np.abs(want).max()
        worst[str(i)] = float(err)
        assert err < _tol(dtype), "case %d %s: relative max error %.3g" % (i, shape, err)
    # in place, and a row-strided view (columns of a wider buffer)
    x = seeded((24, 40), 7, device=comm.device)
    local = _shard(x, 0, tt.even_split(24, world), rank)
    wide = torch.zeros(local.shape[0], 50, device=comm.device)
    view = wide[:, 5:45]
    view.copy_(local)
    ref = tt.newton_schulz(local.contiguous(), comm)
    out = tt.newton_schulz(view, comm, out=view)
    assert out.data_ptr() == view.data_ptr()
    assert torch.equal(view, ref), "strided in-place result differs"
    assert torch.all(wide[:, :5] == 0) and torch.all(wide[:, 45:] == 0), "wrote outside the view"
    # gram_sum="collective" (what CUDA graphs can capture on two ranks): the default's bits,
    # the fp32 sum of the ranks' partial Grams rounded once either way
    x = seeded((32, 24), 9, device=comm.device)
    local = _shard(x, 0, tt.even_split(32, world), rank).contiguous()
    auto = tt.newton_schulz(local, comm, algorithm="gram_allreduce")
    collective = tt.newton_schulz(local, comm, algorithm="gram_allreduce", gram_sum="collective")
    assert torch.equal(auto, collective), "gram_sum='collective' changed the result"
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(local, comm, gram_sum="nccl"),
            "argument 'gram_sum'")
    worst["batch"] = _ns_batch(comm, rank, world)
    worst["group_bytes"] = _ns_workspace_group(comm, rank, world)
    comm.close()
    return worst


def _ns_workspace_group(comm, rank, world):
    """Plans of two shapes in one workspace_group: their results alone, bit for bit, in
    interleaved calls; the group holds less than the two plans alone."""
    shapes = ((40, 96), (72, 48))
    xs = [_shard(seeded(s, 20 + i, device=comm.device), 0, tt.even_split(s[0], world),
                 rank).contiguous() for i, s in enumerate(shapes)]
    want = [tt.newton_schulz(x, comm) for x in xs]
    for x, w in list(zip(xs, want)) * 2:
        assert torch.equal(tt.newton_schulz(x, comm, workspace_group=5), w), \
            "a workspace group member differs from its plan alone"
    ours = [(k, p) for k, p in comm._plans.items()
            if k[0] == "ns" and k[1] in [tuple(x.shape) for x in xs]]
    alone = sum(p.workspace_bytes for k, p in ours if k[-1] == 0)
    grouped = max(p.workspace_bytes for k, p in ours if k[-1] == 5)
    assert len(ours) == 4 and grouped < alone, (len(ours), grouped, alone)
    return grouped


def _ns_batch(comm, rank, world):
    """A batch (..., rows, cols) of shards, one batched plan (small matrices run as groups):
    each matrix equals the reference and itself alone; in place on a strided batch."""
    sizes = tt.even_split(40, world)
    xs = seeded((2, 3, 40, 24), 11, device=comm.device)
    local = _shard(xs, 2, sizes, rank).contiguous()
    ys = tt.newton_schulz(local, comm, shard_sizes=sizes)
    assert ys.shape == local.shape
    worst = 0.0
    for i in range(2):
        for j in range(3):
            want = ns_numpy(xs[i, j].double().cpu().numpy(), schedule(MUON, 5))
            err = np.abs(gather_rows(ys[i, j]) - want).max() / np.abs(want).max()
            worst = max(worst, float(err))
            assert err < _tol(torch.float32), "batch matrix (%d, %d): error %.3g" % (i, j, err)
            alone = tt.newton_schulz(local[i, j].contiguous(), comm, shard_sizes=sizes)
            apart = float((ys[i, j] - alone).abs().max() / alone.abs().max())
            assert apart < _tol(torch.float32), "batch matrix (%d, %d) vs alone: %.3g" % (
                i, j, apart)
    buf = torch.zeros((2, 6) + tuple(local.shape[2:]), device=comm.device)
    view = buf[:, ::2]
    view.copy_(local)
    assert tt.newton_schulz(view, comm, out=view, shard_sizes=sizes).data_ptr() == \
        view.data_ptr()
    assert torch.equal(view, ys), "the batch in place on a strided view differs"
    assert torch.all(buf[:, 1::2] == 0), "wrote between the batch's matrices"
    empty = tt.newton_schulz(local[:0], comm, shard_sizes=sizes)
    assert empty.shape == local[:0].shape
    return worst


def check_ns_errors(rank, world, device):
    comm = tt.Communicator(device=device, timeout=30)
    dev = comm.device
    x = seeded((8, 6), 1, device=dev)
    # the C library's message comes through (every rank rejects: no collective mismatch)
    e = _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x.double(), comm),
                "tpla_ns_plan_create", "fp64")
    assert e.status == 1 and e.status_name == "TPLA_ERROR_INVALID_ARGUMENT"
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x, comm, steps=0),
            "tpla_ns_plan_create", "steps")
    _raises(tpla.InvalidArgumentError,
            lambda: tt.newton_schulz(x, comm, steps=4, coefficients=MUON5), "3 * steps")
    same = x.expand(2, 8, 6)  # a batch whose matrices share memory, written in place
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(same, comm, out=same),
            "tpla_ns_batch_execute", "overlaps")
    # checks made in Python
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x.int(), comm), "int32")
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x[0], comm), "2-D")
    buf = seeded((3, 8, 8), 2, device=dev)  # a batch's out that shifts onto its x
    _raises(tpla.InvalidArgumentError,
            lambda: tt.newton_schulz(buf[:, :, 0:6], comm, out=buf[:, :, 1:7]), "'out' overlaps")
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x.t(), comm), "strides")
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x, comm, coefficients="nope"),
            "unknown preset")
    _raises(tpla.InvalidArgumentError,
            lambda: tt.newton_schulz(x, comm, coefficients=[(1.0, 2.0)]), "expected 3")
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x, comm, shard_dim=2),
            "shard_dim")
    _raises(tpla.InvalidArgumentError,
            lambda: tt.newton_schulz(x, comm, out=torch.empty(8, 7, device=dev)), "'out'")
    _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x, comm, shard_sizes=[1]),
            "shard_sizes")
    if world > 1:
        # ranks disagree on the non-sharded size: REMOTE everywhere, naming the field
        bad = seeded((8, 6 if rank == 0 else 5), 2, device=dev)
        _raises(tpla.RemoteError, lambda: tt.newton_schulz(bad, comm), "disagree")
        _raises(tpla.InvalidArgumentError, lambda: tt.newton_schulz(x, comm, algorithm="local"),
                "tpla_ns_plan_create")
        # one rank rejects its own call: it gets INVALID_ARGUMENT, the others REMOTE
        if rank == world - 1:
            _raises(tpla.InvalidArgumentError,
                    lambda: tt.newton_schulz(x, comm, gram_dtype=torch.float64), "gram_dtype")
        else:
            _raises(tpla.RemoteError, lambda: tt.newton_schulz(x, comm, gram_dtype=torch.float32),
                    "rank %d" % (world - 1))
    # and the communicator still works
    y = tt.newton_schulz(x, comm)
    assert torch.isfinite(y).all()
    comm.close()
    return {}


# ---- overlapped GEMMs ---------------------------------------------------------------

def check_overlap_ops(rank, world, device):
    comm = tt.Communicator(device=device, timeout=60)
    dev = comm.device
    k, n, m = 24, 10, 17
    rows = [5 + 3 * r for r in range(world)]
    a_full = seeded((sum(rows), k), 11, device=dev)
    w = seeded((n, k), 12 + rank, device=dev)  # each rank multiplies by its own B
    bias = seeded((n,), 13, device=dev)
    a_local = _shard(a_full, 0, rows, rank).contiguous()
    c0 = comm.counters()
    d, g = tt.ag_gemm(a_local, w, comm, bias=bias, m=sum(rows), return_gathered=True)
    assert torch.allclose(d, a_full @ w.t() + bias, atol=1e-4, rtol=1e-4)
    assert g is not None and torch.equal(g, a_full), "gathered view differs from AG(A)"
    c1 = comm.counters()
    assert c1["allgathers"] == c0["allgathers"] + 1 and c1["gathered_views"] >= 1
    # GEMM+ReduceScatter: A is m x k_r, B k_r x n (not transposed), even split
    kr = 6 + rank
    a = seeded((m, kr), 20 + rank, device=dev)
    b = seeded((kr, n), 30 + rank, device=dev)
    d_local = tt.gemm_rs(a, b, comm, transpose_b=False)
    parts = [None] * world
    dist.all_gather_object(parts, (a.cpu().double(), b.cpu().double()))
    full = sum(pa @ pb for pa, pb in parts)
    split = tt.even_split(m, world)
    want = _shard(full, 0, split, rank)
    assert d_local.shape == want.shape
    assert torch.allclose(d_local.double().cpu(), want, atol=1e-4, rtol=1e-4)
    # uneven slices chosen by the caller, with beta accumulation
    lr = [m - (world - 1) * 2] + [2] * (world - 1)
    out = torch.ones(lr[rank], n, device=dev)
    tt.gemm_rs(a, b, comm, transpose_b=False, local_rows=lr[rank], out=out, beta=1.0)
    assert torch.allclose(out.double().cpu(), _shard(full, 0, lr, rank) + 1, atol=1e-4)
    # GEMM+AllReduce
    d_ar = tt.gemm_ar(a, b, comm, transpose_b=False)
    assert torch.allclose(d_ar.double().cpu(), full, atol=1e-4, rtol=1e-4)
    # bf16 in, fp32 out
    d16 = tt.ag_gemm(a_local.bfloat16(), w.bfloat16(), comm, out_dtype=torch.float32)
    assert d16.dtype == torch.float32
    assert torch.allclose(d16, a_full.bfloat16().float() @ w.bfloat16().float().t(), atol=2e-2)
    # the three in one window group (one set of buffers), interleaved, twice
    for _ in range(2):
        dg, gg = tt.ag_gemm(a_local, w, comm, bias=bias, m=sum(rows), return_gathered=True,
                            window_group=1)
        assert torch.allclose(dg, a_full @ w.t() + bias, atol=1e-4, rtol=1e-4)
        assert gg is not None and torch.equal(gg, a_full)
        dr = tt.gemm_rs(a, b, comm, transpose_b=False, window_group=1)
        assert torch.allclose(dr.double().cpu(), want, atol=1e-4, rtol=1e-4)
        da = tt.gemm_ar(a, b, comm, transpose_b=False, window_group=1)
        assert torch.allclose(da.double().cpu(), full, atol=1e-4, rtol=1e-4)
    # every member reports the group's bytes now, also the ones made before it grew
    members = [p for k, p in comm._plans.items() if getattr(p, "group", None) == ("overlap", 1)]
    assert len(members) == 3
    assert len({p.info["workspace_bytes"] for p in members}) == 1
    assert all(p.info["workspace_bytes"] == p.workspace_bytes for p in members)
    _raises(tpla.InvalidArgumentError,
            lambda: tt.gemm_ar(a, b, comm, transpose_b=False, mode="serial", window_group=1),
            "window_group 1")
    # the plain gather, and errors
    g2 = tt.allgather_rows(a_local, comm, rows=rows)
    assert torch.equal(g2, a_full)
    _raises(tpla.InvalidArgumentError, lambda: tt.ag_gemm(a_local, w[:, :5], comm),
            "tpla_ag_gemm")
    _raises(tpla.InvalidArgumentError, lambda: tt.ag_gemm(a_local, w, comm, bias=bias[:3]),
            "bias")
    comm.close()
    return {}


# ---- tensor-parallel layers -------------------------------------------------------

def _mlp_reference(s, b, fin, hid, fout, seed, dtype, dev):
    torch.manual_seed(seed)
    l1 = torch.nn.Linear(fin, hid).to(dtype=dtype, device=dev)
    l2 = torch.nn.Linear(hid, fout).to(dtype=dtype, device=dev)
    x = seeded((s, b, fin), seed + 1, dtype=dtype, device=dev).requires_grad_(True)
    return l1, l2, x


def check_layers_vs_linear(rank, world, device):
    comm = tt.Communicator(device=device, timeout=60)
    dev = comm.device
    s, b, fin, hid, fout = 10, 3, 16, 24, 12  # s = 10 splits unevenly over 3 ranks
    l1, l2, x = _mlp_reference(s, b, fin, hid, fout, 5, torch.float32, dev)
    y_ref = l2(torch.nn.functional.gelu(l1(x)))
    g = seeded(y_ref.shape, 9, device=dev)
    (y_ref * g).sum().backward()

    col = tt.ColumnParallelLinear(fin, hid, comm)
    row = tt.RowParallelLinear(hid, fout, comm)
    col.load_full(l1.weight, l1.bias)
    row.load_full(l2.weight, l2.bias)
    seq = tt.even_split(s, world)
    x_local = _shard(x.detach(), 0, seq, rank).clone().requires_grad_(True)
    c0 = comm.counters()
    y = row(torch.nn.functional.gelu(col(x_local)))
    c1 = comm.counters()
    assert y.shape == (seq[rank], b, fout)
    assert torch.allclose(y, _shard(y_ref.detach(), 0, seq, rank), atol=1e-5, rtol=1e-4)
    (y * _shard(g, 0, seq, rank)).sum().backward()
    c2 = comm.counters()
    assert torch.allclose(x_local.grad, _shard(x.grad, 0, seq, rank), atol=1e-5, rtol=1e-4)
    o, h = col.out_offset, col.out_local
    assert torch.allclose(col.weight.grad, l1.weight.grad[o:o + h], atol=1e-4, rtol=1e-4)
    assert torch.allclose(col.bias.grad, l1.bias.grad[o:o + h], atol=1e-4, rtol=1e-4)
    i, w = row.in_offset, row.in_local
    assert torch.allclose(row.weight.grad, l2.weight.grad[:, i:i + w], atol=1e-4, rtol=1e-4)
    assert torch.allclose(row.bias.grad, l2.bias.grad, atol=1e-4, rtol=1e-4)
    # forward: one AG+GEMM and one GEMM+RS; backward: the row layer's AG(dy) is
    # gathered once and reused for its wgrad, the column layer gathers x again
    fwd = {k: c1[k] - c0[k] for k in c0}
    bwd = {k: c2[k] - c1[k] for k in c0}
    assert fwd["allgathers"] == 1 and fwd["reduce_scatters"] == 1, fwd
    assert bwd["allgathers"] == 2 and bwd["reduce_scatters"] == 1, bwd
    assert bwd["gathered_views"] == 1 and row.fallback_gathers == 0, bwd
    # fp32 main-grad accumulation from bf16 layers: two backward passes add up
    colm = tt.ColumnParallelLinear(fin, hid, comm, dtype=torch.bfloat16,
                                   accumulate_main_grad=True)
    rowm = tt.RowParallelLinear(hid, fout, comm, dtype=torch.bfloat16, accumulate_main_grad=True)
    colm.load_full(l1.weight.bfloat16(), l1.bias.bfloat16())
    rowm.load_full(l2.weight.bfloat16(), l2.bias.bfloat16())
    xb = x_local.detach().bfloat16()
    for _ in range(2):
        yb = rowm(torch.nn.functional.gelu(colm(xb)))
        (yb.float() * _shard(g, 0, seq, rank)).sum().backward()
    assert colm.weight.grad is None and colm.weight.main_grad.dtype == torch.float32
    want = 2 * l1.weight.grad[o:o + h]
    rel = (colm.weight.main_grad - want).abs().max() / want.abs().max()
    assert rel < 5e-2, "column main_grad relative error %.3g" % rel
    want = 2 * l2.weight.grad[:, i:i + w]
    rel = (rowm.weight.main_grad - want).abs().max() / want.abs().max()
    assert rel < 5e-2, "row main_grad relative error %.3g" % rel
    comm.close()
    return {"forward": fwd, "backward": bwd}


def check_layer_init(rank, world, device):
    """The layers' own initialization, each rank seeded differently: the ranks' parts
    make up the full weights one rank draws from rank 0's seed (distinct shards, one
    replicated bias), within nn.Linear's bound; a strided input works as nn.Linear's."""
    comm = tt.Communicator(device=device, timeout=60)
    dev = comm.device
    fin, hid, fout = 24, 37, 20  # 37 splits unevenly
    torch.manual_seed(1234 + rank)
    col, row = tt.ColumnParallelLinear(fin, hid, comm), tt.RowParallelLinear(hid, fout, comm)
    parts = [None] * world
    dist.all_gather_object(parts, [t.detach().cpu() for t in (col.weight, col.bias,
                                                                row.weight, row.bias)])
    torch.manual_seed(1234)  # rank 0's seed, on one rank
    with tt.Communicator.local(dev) as one:
        col1, row1 = tt.ColumnParallelLinear(fin, hid, one), tt.RowParallelLinear(hid, fout, one)
        full = [t.detach().cpu() for t in (col1.weight, col1.bias, row1.weight, row1.bias)]
    assert torch.equal(torch.cat([p[0] for p in parts]), full[0])
    assert torch.equal(torch.cat([p[1] for p in parts]), full[1])
    assert torch.equal(torch.cat([p[2] for p in parts], dim=1), full[2])
    assert all(torch.equal(p[3], full[3]) for p in parts), "replicated bias differs"
    assert torch.unique(full[0], dim=0).shape[0] == hid, "repeated rows in the full weight"
    assert full[0].abs().max() <= fin ** -0.5 and full[2].abs().max() <= hid ** -0.5
    # a permuted (not row-major) input, as nn.Linear takes it
    s_local = tt.even_split(10, world)[rank]
    x = seeded((fin, 3, s_local), 3, device=dev).permute(2, 1, 0)  # [s_local, 3, fin]
    assert not x.is_contiguous()
    assert torch.equal(col(x), col(x.contiguous()))
    comm.close()


# ---- Muon ---------------------------------------------------------------------------

def check_muon_vs_reference(rank, world, device):
    """tt.Muon equals the reference Muon, with either Newton-Schulz iteration."""
    return {it: _muon_vs_reference(rank, world, device, it) for it in ("x", "gram")}


def _muon_vs_reference(rank, world, device, ns_iteration):
    comm = tt.Communicator(device=device, timeout=60)
    dev = comm.device
    # replicated matrices, one conv-like; the repeated shapes run as groups (ns_group.c)
    shapes = [(32, 16), (24, 40), (8, 4, 3, 3), (2, 50), (32, 16), (32, 16), (24, 40)]
    ref_p = [seeded(s, 40 + i, device=dev).requires_grad_(True) for i, s in enumerate(shapes)]
    ref_bias = seeded((7,), 49, device=dev).requires_grad_(True)
    tp_full = seeded((30, 20), 50, device=dev)  # sharded by rows over the ranks
    ref_tp = tp_full.clone().requires_grad_(True)
    sizes = tt.even_split(30, world)
    off = sum(sizes[:rank])
    tp = tp_full[off:off + sizes[rank]].clone().requires_grad_(True)
    tt.mark_tensor_parallel(tp, 0, sizes)
    mine = [p.detach().clone().requires_grad_(True) for p in ref_p]
    bias = ref_bias.detach().clone().requires_grad_(True)
    ref = RefMuon(ref_p + [ref_tp], lr=0.02, weight_decay=0.01, adamw_params=[ref_bias])
    opt = tt.Muon(mine + [tp], lr=0.02, weight_decay=0.01, ns_dtype=torch.float32, comm=comm,
                  adamw_params=[bias], ns_iteration=ns_iteration)
    for step in range(3):
        for i, (p, q) in enumerate(zip(ref_p + [ref_bias], mine + [bias])):
            grad = seeded(p.shape, 1000 * step + i, device=dev)
            p.grad, q.grad = grad.clone(), grad.clone()
        grad = seeded((30, 20), 1000 * step + 99, device=dev)
        ref_tp.grad, tp.grad = grad.clone(), grad[off:off + sizes[rank]].clone()
        ref.step()
        opt.step()
    worst = 0.0
    for p, q in zip(ref_p + [ref_bias], mine + [bias]):
        worst = max(worst, float((p - q).abs().max()))
    worst = max(worst, float((ref_tp[off:off + sizes[rank]] - tp).abs().max()))
    assert worst < 2e-5, "parameters differ from the reference Muon by %.3g" % worst
    # the batched plan spread whole matrices (or ran them distributed): all ranks agree
    flat = torch.cat([q.detach().flatten() for q in mine])
    every = gather_rows(flat[None, :])
    assert np.all(every == every[0]), "replicated parameters diverged between ranks"
    _raises(tpla.InvalidArgumentError, lambda: tt.Muon([bias], comm=comm), "adamw_params")
    _raises(tpla.InvalidArgumentError, lambda: tt.Muon(mine, comm=comm, ns_iteration="y"),
            "ns_iteration")
    if world > 1:  # a shard orthogonalized alone would be wrong: refused
        _raises(tpla.InvalidArgumentError, lambda: tt.Muon([tp], comm=None).step(), "shard")
    comm.close()
    return {"max_abs_diff": worst}


def _decay(opt, base, t, steps):
    """Linear learning-rate decay to zero (both runs), so the end is not noise."""
    for g, lr in zip(opt.param_groups, base):
        g["lr"] = lr * (1.0 - t / steps)


def compare_losses(got, want):
    """(largest difference of the curves relative to the initial loss,
    relative difference of the means of the last 10% of the steps)."""
    curve = max(abs(a - b) for a, b in zip(got, want)) / want[0]
    tail = max(1, len(want) // 10)
    end_got, end_want = sum(got[-tail:]) / tail, sum(want[-tail:]) / tail
    return curve, abs(end_got - end_want) / end_want


def train_mlp(rank, world, device, steps, ns_dtype=torch.float32, dtype=torch.float32,
              use_tpla=True, seed=0, sizes=(96, 32, 64, 16)):
    """Losses of a two-layer MLP (ColumnParallel -> gelu -> RowParallel) trained
    with tpla's Muon under tensor parallelism (use_tpla) or, as the reference,
    the same model as nn.Linear layers with RefMuon on one rank. The batch is
    the 'sequence' dimension, split over the ranks."""
    dev = torch.device(device) if device == "cpu" else torch.device("cuda",
                                                                    torch.cuda.current_device())
    n, fin, hid, fout = sizes
    x = seeded((n, 1, fin), seed + 1, dtype=dtype, device=dev)
    teacher = seeded((fin, fout), seed + 2, dtype=dtype, device=dev, scale=fin ** -0.5)
    y = torch.tanh(x @ teacher) + 0.1 * seeded((n, 1, fout), seed + 3, dtype=dtype, device=dev)
    l1, l2, _ = _mlp_reference(1, 1, fin, hid, fout, seed + 4, dtype, dev)
    losses = []
    if not use_tpla:
        opt = RefMuon([l1.weight, l2.weight], lr=0.02, ns_dtype=ns_dtype,
                      adamw_params=[l1.bias, l2.bias], adamw_lr=3e-3)
        base = [g["lr"] for g in opt.param_groups]
        for t in range(steps):
            _decay(opt, base, t, steps)
            loss = ((l2(torch.nn.functional.gelu(l1(x))) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses
    comm = tt.Communicator(device=dev, timeout=120)
    col = tt.ColumnParallelLinear(fin, hid, comm, dtype=dtype)
    row = tt.RowParallelLinear(hid, fout, comm, dtype=dtype)
    col.load_full(l1.weight, l1.bias)
    row.load_full(l2.weight, l2.bias)
    opt = tt.Muon([col.weight, row.weight], lr=0.02, ns_dtype=ns_dtype, comm=comm,
                  adamw_params=[col.bias, row.bias], adamw_lr=3e-3)
    seq = tt.even_split(n, world)
    xl, yl = _shard(x, 0, seq, rank), _shard(y, 0, seq, rank)
    base = [g["lr"] for g in opt.param_groups]
    for t in range(steps):
        _decay(opt, base, t, steps)
        local = ((row(torch.nn.functional.gelu(col(xl))) - yl) ** 2).sum() / (n * fout)
        opt.zero_grad()
        local.backward()
        opt.step()
        total = local.detach().double().reshape(1)
        if world > 1:
            total = torch.tensor([float(local.detach())], dtype=torch.float64, device=dev)
            dist.all_reduce(total)
        losses.append(float(total))
    comm.close()
    return losses


def check_mlp_training(rank, world, device, steps=40):
    got = train_mlp(rank, world, device, steps)
    want = train_mlp(rank, world, device, steps, use_tpla=False)
    assert got[-1] < 0.5 * got[0], "did not train: %s" % got[::10]
    curve, end = compare_losses(got, want)
    tol = 1e-3 if device == "cpu" else 2e-2
    assert curve < tol and end < tol, "loss curves differ: %.3g, at the end %.3g" % (curve, end)
    return {"first": got[0], "last": got[-1], "curve_rel_diff": curve, "end_rel_diff": end}


ALL = [check_communicator, check_ns_numerics, check_ns_errors, check_overlap_ops,
       check_layers_vs_linear, check_layer_init, check_muon_vs_reference, check_mlp_training]


def run_all(rank, world, device, names=None):
    """Run the checks named (default all); returns {name: (ok, info or error)}."""
    unknown = set(names or ()) - {fn.__name__ for fn in ALL}
    if unknown:  # a misspelt name would run nothing and pass
        raise ValueError("no such check: %s" % ", ".join(sorted(unknown)))
    out = {}
    for fn in ALL:
        if names and fn.__name__ not in names:
            continue
        try:
            out[fn.__name__] = (True, fn(rank, world, device))
        except Exception as e:  # report every check; the caller decides
            import traceback
            out[fn.__name__] = (False, "%s\n%s" % (e, traceback.format_exc()))
        if world > 1:
            dist.barrier()
    return out


if os.environ.get("TPLA_CHECKS_VERBOSE"):
    print("checks: tpla from", tpla.__file__)
