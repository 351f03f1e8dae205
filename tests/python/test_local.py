"""test_local.py - the tpla package's computations on one host rank: local
Newton-Schulz (every preset, both iterations, batches, half precision) against a float64
NumPy reference and the scalar polynomial on the singular values, local overlapped GEMMs,
a local FP8 GEMM with scales and amax, workspace groups, and torch.compile around tpla."""
import numpy as np
import pytest
import torch

import tpla
import tpla.torch as tt
from tpla import _core, _lib
from refs import CUBIC, MUON, MUON5, ns_numpy, schedule

# Polar Express, degree 5 (arXiv:2505.16932), typed in again; safety 1.01
PE = [(8.28721201814563, -23.595886519098837, 17.300387312530933),
      (4.107059111542203, -2.9478499167379106, 0.5448431082926601),
      (3.9486908534822946, -2.908902115962949, 0.5518191394370137),
      (3.3184196573706015, -2.488488024314874, 0.51004894012372),
      (2.300652019954817, -1.6689039845747493, 0.4188073119525673),
      (1.891301407787398, -1.2679958271945868, 0.37680408948524835),
      (1.8750014808534479, -1.2500016453999487, 0.3750001645474248),
      (1.875, -1.25, 0.375)]


def polar_express_table(steps, s=float(np.float32(1.01))):
    out = []
    for k in range(steps):
        a, b, c = PE[min(k, len(PE) - 1)]
        d = s if k < len(PE) - 1 else 1.0
        out.append((a / d, b / d ** 3, c / d ** 5))
    return out



@pytest.mark.parametrize("coefficients,steps,table,safety", [
    ("muon", 5, schedule(MUON, 5), 1.0),
    ("muon5", 7, schedule(MUON5, 7), 1.0),
    ("cubic", 12, schedule(CUBIC, 12), 1.0),
    ("polar_express", 8, None, 1.01),
    ([(3.0, -3.2, 1.2), (2.0, -1.5, 0.5)], 2, [(3.0, -3.2, 1.2), (2.0, -1.5, 0.5)], 1.0),
])
def test_local_newton_schulz_matches_numpy(coefficients, steps, table, safety):
    x = torch.randn(50, 30, generator=torch.Generator().manual_seed(3))
    y = tt.newton_schulz(x, steps=steps, coefficients=coefficients)
    table = table or polar_express_table(steps)
    want = ns_numpy(x.double().numpy(), table, safety=float(np.float32(safety)))
    err = np.abs(y.double().numpy() - want).max() / np.abs(want).max()
    assert err < 2e-5, err
    assert torch.equal(x, torch.randn(50, 30, generator=torch.Generator().manual_seed(3)))


@pytest.mark.parametrize("shape,coefficients,steps", [
    ((80, 30), "muon", 5), ((30, 80), "polar_express", 8), ((40, 40), "cubic", 3)])
def test_gram_iteration_is_the_same_map(shape, coefficients, steps):
    """iteration="gram" applies the steps to the Gram matrix between updates of
    X: the same polynomial map as the X iteration, to fp32 rounding."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    y = tt.newton_schulz(x, steps=steps, coefficients=coefficients, iteration="gram")
    table = schedule(CUBIC, steps) if coefficients == "cubic" else (
        schedule(MUON, steps) if coefficients == "muon" else polar_express_table(steps))
    safety = 1.01 if coefficients == "polar_express" else 1.0
    want = ns_numpy(x.double().numpy(), table, safety=float(np.float32(safety)))
    err = np.abs(y.double().numpy() - want).max() / np.abs(want).max()
    assert err < 2e-5, err
    with pytest.raises(tpla.InvalidArgumentError, match="argument 'iteration'"):
        tt.newton_schulz(x, iteration="chebyshev")


@pytest.mark.parametrize("shape,picks", [((120, 30), "gram"), ((30, 120), "gram"),
                                          ((40, 40), "x")])
def test_auto_iteration_is_the_models_pick(shape, picks):
    """iteration="auto" (the default) runs what the cost model picks for the
    host executor: the Gram iteration for rectangular X, the X iteration for
    square X; bit for bit the forced iteration's result."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(6))
    assert torch.equal(tt.newton_schulz(x), tt.newton_schulz(x, iteration=picks))
    other = "x" if picks == "gram" else "gram"
    assert not torch.equal(tt.newton_schulz(x), tt.newton_schulz(x, iteration=other))


def test_batch_plan_reports_each_matrix_iteration():
    """A batched plan says which iteration each matrix runs: AUTO's pick as
    the single plan's above, a forced one as asked."""
    ctx = _core.Context.single_host(timeout_s=20)
    shapes = [(120, 30, "auto"), (40, 40, "auto"), (40, 40, "gram"), (120, 30, "x")]
    descs = [_lib.NsDesc.new(shard=_lib.SHARD_ROWS, local_rows=m, local_cols=n,
                             dtype=_lib.FLOAT32, steps=5, eps=1e-7, gram_dtype=_lib.FLOAT32,
                             iteration=_lib.NS_ITERATION[it]) for m, n, it in shapes]
    plan = _core.NsBatchPlan(ctx, descs)
    assert plan.iterations == ["gram", "x", "gram", "x"]
    ctx.close()


@pytest.mark.parametrize("iteration", ["x", "gram"])
def test_local_batch_equals_each_matrix(iteration):
    """A batch (2, 3, 24, 40) in one process: the batched plan's groups (one
    rank: every matrix whole) equal each matrix alone bit for bit (the host
    executor loops the same kernels), into a new tensor and in place; out with
    another layout works."""
    x = torch.randn(2, 3, 24, 40, generator=torch.Generator().manual_seed(8))
    y = tt.newton_schulz(x, iteration=iteration)
    for i in range(2):
        for j in range(3):
            assert torch.equal(y[i, j], tt.newton_schulz(x[i, j], iteration=iteration))
    twisted = torch.empty(3, 2, 24, 40).transpose(0, 1)  # batch dims permuted
    assert torch.equal(tt.newton_schulz(x, out=twisted, iteration=iteration), y)
    inplace = x.clone()
    tt.newton_schulz(inplace, out=inplace, iteration=iteration)
    assert torch.equal(inplace, y)


def test_local_half_precision_and_polar_quality():
    x = torch.randn(64, 96, generator=torch.Generator().manual_seed(4))
    for dtype, tol in ((torch.float16, 1e-2), (torch.bfloat16, 6e-2)):
        y = tt.newton_schulz(x.to(dtype))
        assert y.dtype == dtype
        want = ns_numpy(x.to(dtype).double().numpy(), schedule(MUON, 5))
        assert np.abs(y.double().numpy() - want).max() / np.abs(want).max() < tol
    # each step maps every singular value through a s + b s^3 + c s^5
    sigma = torch.linalg.svdvals(x.double())
    sigma = sigma / (sigma.norm() + 1e-7)
    for a, b, c in schedule(MUON, 5):
        a, b, c = (float(np.float32(v)) for v in (a, b, c))
        sigma = a * sigma + b * sigma ** 3 + c * sigma ** 5
    got = torch.linalg.svdvals(tt.newton_schulz(x).double())
    assert torch.allclose(got, sigma.sort(descending=True).values, atol=2e-5)


def test_local_overlap_ops_and_local_gemm():
    comm = tt.local_communicator("cpu")
    a = torch.randn(7, 5)
    w = torch.randn(3, 5)
    assert torch.allclose(tt.ag_gemm(a, w, comm), a @ w.t(), atol=1e-5)
    assert torch.allclose(tt.gemm_rs(a, w, comm), a @ w.t(), atol=1e-5)
    assert torch.allclose(tt.gemm_ar(a, w.t().contiguous(), comm, transpose_b=False),
                          a @ w.t(), atol=1e-5)
    d = torch.ones(5, 5)
    tt.local_gemm(d, a.bfloat16(), a.bfloat16(), comm, transpose_a=True, beta=1.0)
    assert torch.allclose(d, 1 + a.bfloat16().float().t() @ a.bfloat16().float(), atol=1e-3)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without float8 dtypes")
def test_local_fp8_gemm_with_scales_and_amax():
    """tpla_gemm on FP8 tensors (host emulation): scales, amax, an E4M3 output."""
    g = torch.Generator().manual_seed(5)
    a = (torch.randn(7, 16, generator=g) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(5, 16, generator=g) * 4).to(torch.float8_e5m2)  # E4M3 x E5M2
    f = torch.tensor([0.5, 3.0, -1.0, 0.125], dtype=torch.float32)  # a, b scale, amax, d scale
    at = [f.data_ptr() + 4 * i for i in range(4)]

    def m(t, name):
        return tt._tensors.matrix(t, "test", name)
    want = 1.5 * (a.double() @ b.double().t())
    with _core.Context.single_host() as ctx:
        d = torch.zeros(7, 5)
        ctx.gemm(m(d, "d"), m(a, "a"), _lib.OP_N, m(b, "b"), _lib.OP_T,
                 fp8=_lib.Fp8Scaling(a_scale=at[0], b_scale=at[1], d_amax=at[2]))
        assert torch.allclose(d.double(), want, rtol=1e-5, atol=1e-4)
        assert abs(f[2].item() - want.abs().max().item()) <= 1e-5 * want.abs().max().item()
        d8 = torch.empty(7, 5, dtype=torch.float8_e4m3fn)
        ctx.gemm(m(d8, "d"), m(a, "a"), _lib.OP_N, m(b, "b"), _lib.OP_T,
                 fp8=_lib.Fp8Scaling(a_scale=at[0], b_scale=at[1], d_scale=at[3]))
        scaled = (want * 0.125).clamp(-448, 448)  # saturation
        assert ((d8.double() - scaled).abs() <= scaled.abs() * 2 ** -4 + 2 ** -10).all()
        with pytest.raises(tpla.InvalidArgumentError, match="only for FP8 inputs"):
            ctx.gemm(m(d, "d"), m(a.float(), "a"), _lib.OP_N, m(b.float(), "b"), _lib.OP_T,
                     fp8=_lib.Fp8Scaling(a_scale=at[0]))
        with pytest.raises(tpla.NotSupportedError, match="Blackwell"):
            ctx.gemm(m(d, "d"), m(a, "a"), _lib.OP_N, m(b, "b"), _lib.OP_T,
                     fp8=_lib.Fp8Scaling(scale_mode=_lib.FP8_SCALE_MXFP8))


def test_workspace_group_shares_one_workspace():
    """Plans of several shapes in one workspace group give their results
    alone, bit for bit, and hold one workspace at the largest one's size."""
    comm = tt.local_communicator(torch.device("cpu"))
    shapes = ((12, 40), (48, 64), (30, 20))
    xs = [torch.randn(*s, generator=torch.Generator().manual_seed(9)) for s in shapes]
    want = [tt.newton_schulz(x, comm) for x in xs]
    held = comm.workspace_bytes()
    for _ in range(2):  # calls of the members, each after another's
        for x, w in zip(xs, want):
            assert torch.equal(tt.newton_schulz(x, comm, workspace_group=3), w)
    ours = [(k, p) for k, p in comm._plans.items() if k[0] == "ns" and k[1] in shapes]
    alone = [p.workspace_bytes for k, p in ours if k[-1] == 0]
    grouped = [p.workspace_bytes for k, p in ours if k[-1] == 3]
    assert len(alone) == len(grouped) == 3
    assert set(grouped) == {max(alone)} and max(alone) > min(alone)
    assert comm.workspace_bytes() == held + max(alone)  # the group counted once
    for bad in (-1, 1.5, True, 2**31, 2**32 + 3):  # 2**32 + 3 would wrap to group 3 in C
        with pytest.raises(tpla.InvalidArgumentError, match="workspace_group"):
            tt.newton_schulz(xs[0], comm, workspace_group=bad)
    a, w = torch.randn(4, 8), torch.randn(6, 8)
    for bad in (-2, 2**32 + 1):
        with pytest.raises(tpla.InvalidArgumentError, match="window_group"):
            tt.ag_gemm(a, w, comm, window_group=bad)
    with pytest.raises(tpla.InvalidArgumentError, match="0 for a batch"):
        tt.newton_schulz(torch.randn(2, 6, 4), comm, workspace_group=1)


def test_torch_compile_breaks_around_tpla():
    """Under torch.compile the tpla calls are graph breaks: a Newton-Schulz step and a
    column- then row-parallel MLP give the eager loss and gradients."""
    torch._dynamo.reset()
    comm = tt.local_communicator(torch.device("cpu"))
    torch.manual_seed(4)
    col = tt.ColumnParallelLinear(48, 80, comm)
    row = tt.RowParallelLinear(80, 48, comm)
    x = torch.randn(24, 48)

    def step(x):
        return row(torch.relu(col(x))).square().sum() + tt.newton_schulz(x * 0.5).sum()

    grads = []
    for fn in (step, torch.compile(step, backend="eager")):
        loss = fn(x)
        loss.backward()
        grads.append((loss.detach(), col.weight.grad.clone(), row.weight.grad.clone()))
        col.weight.grad = row.weight.grad = None
    for eager, compiled in zip(*grads):
        assert torch.allclose(eager, compiled, rtol=1e-6, atol=1e-6)
