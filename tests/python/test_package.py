"""test_package.py - the tpla package in one process: error translation (the
C status and tpla_last_error() reach Python as the right tpla.Error
subclass), struct layouts against a C compiler, the library search and its
failure message, local Newton-Schulz (every preset) against a float64
NumPy reference, local overlapped GEMMs, a local FP8 GEMM, bad inputs, and
`pip install`."""
import copy
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch

import tpla
import tpla.torch as tt
from tpla import _core, _lib
from refs import CUBIC, MUON, MUON5, ns_numpy, schedule

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def test_error_classes_and_c_messages():
    assert issubclass(tpla.InvalidArgumentError, tpla.Error)
    assert issubclass(tpla.InvalidArgumentError, ValueError)
    assert issubclass(tpla.TimeoutError, TimeoutError)
    assert issubclass(tpla.OutOfMemoryError, MemoryError)
    with _core.Context.single_host() as ctx:
        a = torch.zeros(3, 4)
        d = torch.zeros(3, 5)
        with pytest.raises(tpla.InvalidArgumentError) as e:  # inner sizes differ
            ctx.gemm(tt._tensors.matrix(d, "t", "d"), tt._tensors.matrix(a, "t", "a"),
                     _lib.OP_N, tt._tensors.matrix(a, "t", "b"), _lib.OP_N)
        assert e.value.status == 1 and e.value.status_name == "TPLA_ERROR_INVALID_ARGUMENT"
        assert e.value.detail.startswith("tpla_gemm: argument 'b'"), e.value.detail
        assert "inner sizes differ" in str(e.value)
        with pytest.raises(tpla.InvalidArgumentError, match="root"):
            ctx.broadcast(a.data_ptr(), 4, _lib.FLOAT32, 3)
    with pytest.raises(tpla.InvalidUsageError, match="closed"):
        ctx.barrier()
    assert _core.status_string(9) == "TPLA_ERROR_TIMEOUT"
    err = tpla._errors.error_for(99, "x")
    assert type(err) is tpla.Error and err.status == 99


STRUCTS = {
    "tpla_matrix_t": _lib.Matrix, "tpla_config_t": _lib.Config,
    "tpla_features_t": _lib.Features, "tpla_unique_id_t": _lib.UniqueId,
    "tpla_gemm_args_t": _lib.GemmArgs, "tpla_ns_desc_t": _lib.NsDesc,
    "tpla_overlap_args_t": _lib.OverlapArgs, "tpla_ag_gemm_desc_t": _lib.AgGemmDesc,
    "tpla_gemm_rs_desc_t": _lib.GemmRsDesc, "tpla_gemm_ar_desc_t": _lib.GemmArDesc,
    "tpla_overlap_info_t": _lib.OverlapInfo, "tpla_counters_t": _lib.Counters,
    "tpla_fp8_scaling_t": _lib.Fp8Scaling,
}


def run_c(body):
    """Compile and run a C program (stdio.h, stddef.h and tpla.h included; `body`, a list of
    statements, is main's); returns its output lines. Skips without a C compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "tpla.h"', 'int main(void) {']
    lines += body + ["return 0; }"]
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        subprocess.check_call([cc, "-I", os.path.join(REPO, "include"), src, "-o", exe])
        return list(filter(None, subprocess.check_output([exe]).decode().split("\n")))


def test_struct_layouts_match_the_header():
    body = []
    for cname, cls in STRUCTS.items():
        body.append('printf("%s sizeof() %%zu\\n", sizeof(%s));' % (cname, cname))
        for f, _ in cls._fields_:
            body.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, f, cname, f))
    got = {}
    for line in run_c(body):
        name, field, value = line.split()
        got[(name, field)] = int(value)
    import ctypes
    for cname, cls in STRUCTS.items():
        assert got[(cname, "sizeof()")] == ctypes.sizeof(cls), cname
        for f, _ in cls._fields_:
            assert got[(cname, f)] == getattr(cls, f).offset, (cname, f)


def test_library_not_found_says_what_to_do():
    env = dict(os.environ, TPLA_LIBRARY="/nonexistent/libtpla.so")
    code = ("import tpla\ntry:\n    tpla.library_path()\nexcept tpla.LibraryNotFoundError as e:\n"
            "    print('OK', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.startswith("OK"), out.stderr
    assert "TPLA_LIBRARY" in out.stdout and "/nonexistent/libtpla.so" in out.stdout


def test_library_search_leaves_sanitizer_builds_out(tmp_path, monkeypatch):
    # a repository whose newest build is an ASan one: loading it into this interpreter
    # would abort the process (review 95), so the search skips it
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "tpla.h").write_text("")
    (tmp_path / "python" / "tpla").mkdir(parents=True)
    for name, sanitize in (("build-plain", "OFF"), ("build-asan", "ON"), ("build-asan1", "1")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "CMakeCache.txt").write_text("TPLA_SANITIZE:BOOL=%s\n" % sanitize)
        (tmp_path / name / "libtpla.so").write_text("")
    for name in ("build-asan", "build-asan1"):
        os.utime(tmp_path / name / "libtpla.so", (2e9, 2e9))  # the newest
    monkeypatch.delenv("TPLA_LIBRARY", raising=False)
    monkeypatch.setattr(_lib, "__file__", str(tmp_path / "python" / "tpla" / "_lib.py"))
    found, explicit = _lib._candidates()
    assert not explicit
    assert [str(p) for p in found[:-2]] == [str(tmp_path / "build-plain" / "libtpla.so")]


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


def test_bad_inputs():
    x = torch.randn(6, 4)
    with pytest.raises(tpla.InvalidArgumentError, match="torch.Tensor"):
        tt.newton_schulz(x.numpy())
    with pytest.raises(tpla.InvalidArgumentError, match="must be an int"):
        tt.newton_schulz(x, steps=2.0)
    with pytest.raises(tpla.InvalidArgumentError, match="expanded|strides"):
        tt.newton_schulz(torch.randn(1, 4).expand(6, 4))
    with pytest.raises(tpla.InvalidArgumentError, match="requires grad"):
        p = torch.randn(6, 4, requires_grad=True)
        tt.newton_schulz(p.detach(), out=p)
    with pytest.raises(tpla.InvalidArgumentError, match="algorithm"):
        tt.newton_schulz(x, algorithm="fast")
    with pytest.raises(tpla.InvalidArgumentError, match="momentum"):
        tt.Muon([torch.nn.Parameter(x)], momentum=1.5)


def test_library_writes_bump_the_version_counter():
    """A tensor the library wrote in place is seen as modified by autograd, as after a
    torch in-place op: a backward that saved its old values raises."""
    comm = tt.local_communicator("cpu")
    x = torch.randn(6, 4)
    w = torch.randn(6, 4, requires_grad=True)
    loss = (x * w).sum()  # saves x for backward
    tt.newton_schulz(x, out=x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    a, b = torch.randn(5, 3), torch.randn(4, 3)
    d = torch.zeros(5, 4)
    before = d._version
    tt.gemm_ar(a, b, comm, out=d)
    tt.local_gemm(d, a, b, comm, transpose_b=True, beta=1.0)
    assert d._version >= before + 2
    with torch.inference_mode():  # no version counter there: still works
        assert tt.ag_gemm(torch.randn(5, 3), b, comm).shape == (5, 4)
    # not differentiable: refused rather than silently without a gradient
    w = b.clone().requires_grad_(True)
    with pytest.raises(tpla.InvalidArgumentError, match="argument 'b' requires grad"):
        tt.ag_gemm(a, w, comm)
    with pytest.raises(tpla.InvalidArgumentError, match="argument 'x' requires grad"):
        tt.newton_schulz(torch.randn(6, 4, requires_grad=True))
    with torch.no_grad():
        assert tt.gemm_ar(a, w, comm).shape == (5, 4)


def test_muon_groups_state_and_devices():
    """add_param_group makes a working Muon group; a bf16 model's fp32 momentum (main_grad)
    survives a state_dict round trip in fp32; a parameter on another device is refused."""
    g = torch.Generator().manual_seed(3)
    p1 = torch.nn.Parameter(torch.randn(8, 4, generator=g))
    p2 = torch.nn.Parameter(torch.randn(6, 5, generator=g))
    opt = tt.Muon([p1], ns_dtype=torch.float32)
    opt.add_param_group({"params": [p2]})
    p1.grad, p2.grad = torch.randn(8, 4, generator=g), torch.randn(6, 5, generator=g)
    before = p2.detach().clone()
    opt.step()
    assert not torch.equal(p2, before)
    with pytest.raises(tpla.InvalidArgumentError, match="1-D parameter"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.randn(3))]})

    q = torch.nn.Parameter(torch.randn(8, 4, generator=g).bfloat16())
    first = tt.Muon([q], use_main_grad=True)
    q.main_grad = torch.randn(8, 4, generator=g)
    first.step()
    second = tt.Muon([q], use_main_grad=True)
    second.load_state_dict(first.state_dict())
    assert second.state[q]["momentum_buffer"].dtype == torch.float32
    assert torch.equal(second.state[q]["momentum_buffer"], first.state[q]["momentum_buffer"])
    second.step()

    m = torch.nn.Parameter(torch.empty(8, 4, device="meta"))
    m.grad = torch.empty(8, 4, device="meta")
    with pytest.raises(tpla.InvalidArgumentError, match="share one device"):
        tt.Muon([p1, m]).step()


def test_muon_steps_match_a_float64_reference():
    """Two Muon groups (momentum 0.9 with Nesterov, lr 0.02, weight decay 0.1; momentum 0.5
    without, lr 0.05), matrices of five shapes (scales 1, sqrt(2), 2), one of them bf16:
    three steps give the recipe computed in float64 (ns_numpy), parameters and momentum
    buffers."""
    g = torch.Generator().manual_seed(51)
    shapes = [(8, 4), (6, 6), (12, 3), (4, 8), (10, 5)]
    dtypes = [torch.float32] * 2 + [torch.bfloat16] + [torch.float32] * 2
    init = [torch.randn(s, generator=g).to(dt) for s, dt in zip(shapes, dtypes)]
    grads = [[torch.randn(s, generator=g).to(dt) for s, dt in zip(shapes, dtypes)]
             for _ in range(3)]
    hyper = [(0.9, True, 0.02, 0.1)] * 3 + [(0.5, False, 0.05, 0.0)] * 2
    ps = [torch.nn.Parameter(t.clone()) for t in init]
    opt = tt.Muon(ps[:3], lr=0.02, momentum=0.9, weight_decay=0.1, ns_dtype=torch.float32)
    opt.add_param_group(dict(params=ps[3:], lr=0.05, momentum=0.5, nesterov=False,
                             weight_decay=0.0))
    want = [t.double().numpy() for t in init]
    bufs = [np.zeros(s) for s in shapes]

    def bf16(a):
        return torch.from_numpy(a).bfloat16().double().numpy()

    for gs in grads:
        for p, gr in zip(ps, gs):
            p.grad = gr.clone()
        opt.step()
        for i, (m, nesterov, lr, wd) in enumerate(hyper):
            r = bf16 if dtypes[i] == torch.bfloat16 else (lambda a: a)  # the stored values
            gr = gs[i].double().numpy()
            bufs[i] = r(m * bufs[i] + (1 - m) * gr)
            u = r((1 - m) * gr + m * bufs[i]) if nesterov else bufs[i]
            scale = max(1.0, shapes[i][0] / shapes[i][1]) ** 0.5
            want[i] = r(r(want[i] * (1 - lr * wd)) - lr * scale * ns_numpy(u, schedule(MUON, 5)))
    for i, p in enumerate(ps):
        # the bf16 parameter (an fp32 update added to it), rounded as the reference rounds
        # it: one bf16 ulp apart where a rounding falls the other way
        half = p.dtype == torch.bfloat16
        np.testing.assert_allclose(p.detach().double().numpy(), want[i],
                                   rtol=2 ** -8 if half else 0, atol=4e-6,
                                   err_msg="parameter %d" % i)
        np.testing.assert_allclose(opt.state[p]["momentum_buffer"].double().numpy(), bufs[i],
                                   rtol=2 ** -8 if half else 1e-6, atol=1e-6,
                                   err_msg="momentum %d" % i)


def test_muon_tensor_hyperparameters_and_capturable_adamw():
    """lr, weight_decay, momentum as 0-dim tensors give the float hyperparameters' steps
    (to rounding), AdamW with capturable=True (its step count a tensor) gives
    torch.optim.AdamW's, a scheduler's in-place lr reaches the next step, and the step
    count survives a state_dict round trip as a tensor."""
    g = torch.Generator().manual_seed(21)
    shapes = [(8, 4), (6, 5), (7,)]
    init = [torch.randn(s, generator=g) for s in shapes]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(3)]

    def make(tensors, capturable):
        ps = [torch.nn.Parameter(t.clone()) for t in init]
        h = (lambda v: torch.tensor(v)) if tensors else (lambda v: v)
        opt = tt.Muon(ps[:2], lr=h(0.02), momentum=h(0.9), weight_decay=h(0.01),
                      ns_dtype=torch.float32, adamw_params=ps[2:], adamw_lr=h(1e-3),
                      adamw_weight_decay=h(0.1), capturable=capturable)
        return ps, opt

    ref_ps = [torch.nn.Parameter(init[2].clone())]
    ref = torch.optim.AdamW(ref_ps, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    runs = [make(False, False), make(True, False), make(True, True)]
    for step in range(3):
        for ps, opt in runs:
            for p, gr in zip(ps, grads[step]):
                p.grad = gr.clone()
            opt.step()
        ref_ps[0].grad = grads[step][2].clone()
        ref.step()
    (plain, _), (tens, _), (capt, capt_opt) = runs
    for i in range(3):
        torch.testing.assert_close(tens[i], plain[i], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(capt[i], plain[i], rtol=1e-6, atol=1e-7)
    assert not torch.equal(plain[0], init[0])
    for ps in (plain, tens, capt):
        torch.testing.assert_close(ps[2], ref_ps[0], rtol=1e-6, atol=1e-7)
    step = capt_opt.state[capt[2]]["step"]
    assert torch.is_tensor(step) and step.dtype == torch.float32 and float(step) == 3.0

    # capturable is the optimizer's, not the state_dict's: a count saved as a number (by a
    # non-capturable optimizer) becomes a device tensor at the next step, and goes on
    second_ps = [torch.nn.Parameter(t.detach().clone()) for t in plain]
    second = tt.Muon(second_ps[:2], ns_dtype=torch.float32, adamw_params=second_ps[2:],
                     capturable=True)
    second.load_state_dict(copy.deepcopy(runs[0][1].state_dict()))  # torch would alias
    assert second.state[second_ps[2]]["step"] == 3 and second.capturable
    for p, gr in zip(second_ps, grads[0]):
        p.grad = gr.clone()
    second.step()
    loaded = second.state[second_ps[2]]["step"]
    assert torch.is_tensor(loaded) and loaded.dtype == torch.float32 and float(loaded) == 4.0

    lr = capt_opt.param_groups[0]["lr"]
    sched = torch.optim.lr_scheduler.LambdaLR(capt_opt, lambda k: 0.5)  # fill_s the tensors
    assert capt_opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(0.01)
    plain_opt = runs[0][1]
    plain_opt.param_groups[0]["lr"], plain_opt.param_groups[1]["lr"] = 0.01, 5e-4
    before = capt[0].detach().clone()
    for ps, opt in ((capt, capt_opt), (plain, plain_opt)):
        for p, gr in zip(ps, grads[0]):
            p.grad = gr.clone()
        opt.step()
    for i in range(3):
        torch.testing.assert_close(capt[i], plain[i], rtol=1e-6, atol=1e-7)
    assert not torch.equal(capt[0], before)
    del sched

    w = [torch.nn.Parameter(torch.randn(4, 4))]
    with pytest.raises(tpla.InvalidArgumentError, match="Muon group's lr .* 0-dim floating"):
        tt.Muon(w, lr=torch.tensor([0.02]))
    with pytest.raises(tpla.InvalidArgumentError, match="Muon momentum .* shape \\(2,\\)"):
        tt.Muon(w, momentum=torch.tensor([0.9, 0.9]))
    with pytest.raises(tpla.InvalidArgumentError,
                       match="AdamW group's weight_decay .* torch.int64"):
        tt.Muon(w, adamw_params=[torch.nn.Parameter(torch.randn(4))],
                adamw_weight_decay=torch.tensor(1))


def test_muon_adamw_many_parameters_match_torch():
    """AdamW over many parameters at once (two groups, fp32 and bf16, shapes 1-D to 3-D,
    a parameter skipped at one step so the step counts differ within a group) gives
    torch.optim.AdamW's parameters and state: numbers, a tensor lr, and capturable=True."""
    g = torch.Generator().manual_seed(41)
    shapes = [(7,), (3, 5), (16,), (2, 3, 4), (5,), (6,)]
    dtypes = [torch.float32] * 4 + [torch.bfloat16, torch.float32]
    init = [torch.randn(s, generator=g).to(dt) for s, dt in zip(shapes, dtypes)]
    init[4] = init[4] * 0.01  # bf16 steps of 2^-14 there: lr 1e-3 moves it
    grads = [[torch.randn(s, generator=g).to(dt) for s, dt in zip(shapes, dtypes)]
             for _ in range(4)]
    for gs in grads:
        gs[5] = gs[5] * 1e-8  # sqrt(v) near eps: eps's place shows
    second = {1, 2}  # the other group's members (lr 2e-3, no decay)

    def run(make):
        ps = [torch.nn.Parameter(t.clone()) for t in init]
        opt = make([p for i, p in enumerate(ps) if i not in second],
                   [p for i, p in enumerate(ps) if i in second])
        for step, gs in enumerate(grads):
            for i, (p, gr) in enumerate(zip(ps, gs)):
                p.grad = None if (step == 1 and i == 3) else gr.clone()
            opt.step()
        return ps, opt

    def torch_adamw(first, other):
        return torch.optim.AdamW([dict(params=first), dict(params=other, lr=2e-3,
                                                           weight_decay=0.0)],
                                 lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                 foreach=False)

    def tpla_adamw(tensor_lr, capturable):
        h = (lambda v: torch.tensor(v)) if tensor_lr else (lambda v: v)

        def make(first, other):
            opt = tt.Muon([torch.nn.Parameter(torch.randn(4, 4, generator=g))],
                          ns_dtype=torch.float32, adamw_params=first, adamw_lr=h(1e-3),
                          adamw_weight_decay=0.1, capturable=capturable)
            opt.add_param_group(dict(params=other, use_muon=False, lr=h(2e-3),
                                     weight_decay=0.0))
            return opt
        return make

    ref, ref_opt = run(torch_adamw)
    for tensor_lr, capturable in ((False, False), (True, False), (True, True)):
        ps, opt = run(tpla_adamw(tensor_lr, capturable))
        for i, (p, r) in enumerate(zip(ps, ref)):
            # bf16: foreach and single-tensor ops may round a product 1 ulp apart
            tol = dict(rtol=2e-2, atol=1e-5) if r.dtype == torch.bfloat16 else \
                dict(rtol=2e-6, atol=1e-7)
            torch.testing.assert_close(p, r, **tol, msg=lambda m: "param %d: %s" % (i, m))
            assert not torch.equal(p, init[i])
            st, rst = opt.state[p], ref_opt.state[r]
            assert float(st["step"]) == float(rst["step"]) == (3 if i == 3 else 4)
            assert torch.is_tensor(st["step"]) == capturable
            torch.testing.assert_close(st["exp_avg_sq"], rst["exp_avg_sq"], **tol)


def test_muon_gram_dtype_reaches_the_plan():
    """ns_gram_dtype=bf16 gives newton_schulz's bf16-Gram result (bit for bit, on the
    host executor), not the default fp32 Gram's; another dtype is refused by name."""
    g = torch.Generator().manual_seed(31)
    init, grad = torch.randn(24, 16, generator=g), torch.randn(24, 16, generator=g)
    steps = {}
    for gram in (torch.float32, torch.bfloat16):
        p = torch.nn.Parameter(init.clone())
        p.grad = grad.clone()
        tt.Muon([p], lr=0.1, momentum=0.9, ns_gram_dtype=gram).step()
        steps[gram] = p.detach()
    u = grad.lerp(torch.zeros_like(grad).lerp_(grad, 0.1), 0.9)  # Muon's first Nesterov step
    x = tt.newton_schulz(u.bfloat16(), gram_dtype=torch.bfloat16)
    assert torch.equal(steps[torch.bfloat16], init.clone().add_(x.float(), alpha=-0.1 * 1.5 ** 0.5))
    assert not torch.equal(steps[torch.bfloat16], steps[torch.float32])
    with pytest.raises(tpla.InvalidArgumentError, match="ns_gram_dtype"):
        tt.Muon([torch.nn.Parameter(init.clone())], ns_gram_dtype=torch.float16)


def test_muon_refused_step_changes_nothing():
    """A step that Muon refuses (a tensor-parallel shard without a communicator) raises
    before AdamW or any momentum buffer moves: a retry would apply them twice."""
    g = torch.Generator().manual_seed(9)
    plain = torch.nn.Parameter(torch.randn(8, 4, generator=g))
    shard = tt.mark_tensor_parallel(torch.nn.Parameter(torch.randn(4, 6, generator=g)), 0, (4, 4))
    bias = torch.nn.Parameter(torch.randn(4, generator=g))
    for p in (plain, shard, bias):
        p.grad = torch.randn(p.shape, generator=g)
    opt = tt.Muon([plain, shard], adamw_params=[bias], ns_dtype=torch.float32)
    before = [p.detach().clone() for p in (plain, shard, bias)]
    with pytest.raises(tpla.InvalidArgumentError, match="tensor-parallel shard"):
        opt.step()
    assert not opt.state, "a refused step left state behind"
    assert all(torch.equal(p, b) for p, b in zip((plain, shard, bias), before))


def test_clear_plans():
    comm = tt.Communicator.local("cpu")
    for rows in (5, 6, 7):
        tt.newton_schulz(torch.randn(rows, 4), comm=comm)
    plans = list(comm._plans.values())
    assert len(plans) == 3 and comm.workspace_bytes() > comm.context.workspace_bytes()
    comm.clear_plans()
    assert not comm._plans
    # destroyed, not just forgotten (the context's set held them alive before)
    assert all(not p.handle for p in plans) and not comm.context._plans
    assert tt.newton_schulz(torch.randn(5, 4), comm=comm).shape == (5, 4)
    comm.close()
    comm.clear_plans()  # closed: nothing to do


def test_clear_plans_frees_window_groups():
    """A window group's SERIAL plan is refused while OVERLAP plans live in it: after
    clear_plans none does."""
    comm = tt.Communicator.local("cpu")
    a, b = torch.randn(8, 4), torch.randn(6, 4)
    tt.ag_gemm(a, b, comm, transpose_b=True, mode="overlap", window_group=1)
    with pytest.raises(tpla.InvalidArgumentError, match="window_group 1 holds OVERLAP"):
        tt.ag_gemm(a, b, comm, transpose_b=True, mode="serial", window_group=1)
    comm.clear_plans()
    assert tt.ag_gemm(a, b, comm, transpose_b=True, mode="serial", window_group=1).shape == (8, 6)
    comm.close()


def test_descriptor_defaults_match_the_header_init_macros():
    """new() of every sized struct holds its *_INIT macro's values (scalar fields)."""
    import ctypes
    scalars = (ctypes.c_int, ctypes.c_int64, ctypes.c_size_t, ctypes.c_float, ctypes.c_uint64)
    sized = {c: cls for c, cls in STRUCTS.items() if issubclass(cls, _lib._Sized)}
    body = []
    for cname, cls in sized.items():
        macro = "TPLA_" + cname[len("tpla_"):-len("_t")].upper() + "_INIT"
        body.append("{ %s v = %s;" % (cname, macro))
        for f, t in cls._fields_:
            if t in scalars:
                body.append('printf("%s %s %%.9g\\n", (double)v.%s);' % (cname, f, f))
        body.append("}")
    checked = 0
    for line in run_c(body):
        cname, field, value = line.split()
        got = getattr(sized[cname].new(), field)
        assert got == pytest.approx(float(value), rel=1e-6), (cname, field)
        checked += 1
    assert checked > 40


def test_errors_pickle_as_themselves():
    import pickle
    for e in (tpla.RemoteError("peer 1 left"), tpla.Error("odd", 42)):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and back.status == e.status and str(back) == str(e)


def test_batch_execute_needs_every_matrix():
    comm = tt.Communicator.local("cpu")
    ctx = comm.context
    descs = [_lib.NsDesc.new(local_rows=4, local_cols=3, dtype=_lib.FLOAT32) for _ in range(3)]
    plan = _core.NsBatchPlan(ctx, descs)
    x = torch.randn(4, 3)
    view = _lib.Matrix(x.data_ptr(), 4, 3, 3, _lib.FLOAT32)
    with pytest.raises(tpla.InvalidArgumentError, match="1 matrices for a plan of 3"):
        plan.execute([view])
    with pytest.raises(tpla.InvalidArgumentError, match="2 values for 1 ranks"):
        ctx.allgather_rows(x.data_ptr(), x.data_ptr(), [4, 4])
    comm.close()


def test_pip_install_bundles_the_library():
    pytest.importorskip("setuptools")
    lib = tpla.library_path()
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TPLA_LIBRARY=lib)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--target", d, os.path.join(REPO, "python")],
                       env=env, check=True, capture_output=True, cwd=d)
        env = {k: v for k, v in os.environ.items() if k not in ("TPLA_LIBRARY", "PYTHONPATH")}
        env["PYTHONPATH"] = d
        code = "import tpla; print(tpla.library_path()); print(tpla.version())"
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=d, capture_output=True,
                             text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(os.path.join(d, "tpla", "libtpla.so")), out.stdout
    shutil.rmtree(os.path.join(REPO, "python", "build"), ignore_errors=True)
    shutil.rmtree(os.path.join(REPO, "python", "tpla.egg-info"), ignore_errors=True)

