"""test_arguments.py - the package's arguments checked before they reach the C library
(ctypes would wrap or truncate them), and state a refused call leaves as it was: integers,
beta, timeouts, Muon's settings and steps, the layers' backward under create_graph, Muon's
momentum dtypes. One process, the host executor."""
import copy

import pytest
import torch

import tpla
import tpla.torch as tt
from tpla import _core


def test_ints_timeouts_and_beta_are_checked_before_ctypes():
    """Values a C int cannot hold and floats for ints are refused (ctypes would run
    2**32 + 4 chunks as 4 and 2.9 as 2), beta without out= too (it would scale
    uninitialized memory), and a timeout of 0 is the library's default, not 1 ms."""
    comm = tt.local_communicator(torch.device("cpu"))
    a, w = torch.randn(4, 8), torch.randn(6, 8)
    for bad in (2**32 + 4, 2.9, -1):
        with pytest.raises(tpla.InvalidArgumentError, match="chunks"):
            tt.ag_gemm(a, w, comm, chunks=bad)
    with pytest.raises(tpla.InvalidArgumentError, match="local_rows"):
        tt.gemm_rs(a, w, comm, local_rows=2**64 - 1)
    with pytest.raises(tpla.InvalidArgumentError, match="'m'"):
        tt.ag_gemm(a, w, comm, m=4.5)
    with pytest.raises(tpla.InvalidArgumentError, match="steps"):
        tt.newton_schulz(torch.randn(4, 6), comm, steps=2**32 + 5)
    for op in (tt.ag_gemm, tt.gemm_rs, tt.gemm_ar):
        with pytest.raises(tpla.InvalidArgumentError, match="beta"):
            op(a, w, comm, beta=1.0)
    out = torch.ones(4, 6)
    tt.gemm_ar(a, w, comm, out=out, beta=1.0)
    assert torch.allclose(out, a @ w.t() + 1, atol=1e-5)
    assert _core.config(0).timeout_ms == 0 and _core.config(None).timeout_ms == 0
    assert _core.config(0.0002).timeout_ms == 1 and _core.config(1e300).timeout_ms == 2**62
    for bad in (-1, float("inf"), float("nan"), "5", True):
        with pytest.raises(tpla.InvalidArgumentError, match="timeout"):
            _core.config(bad)
    with pytest.raises(tpla.InvalidArgumentError, match="safety"):  # once a plan per call
        tt.newton_schulz(torch.randn(4, 6), comm, safety=torch.tensor(1.1))
    leaf = torch.zeros(4, 6, requires_grad=True)
    for op in (tt.ag_gemm, tt.gemm_rs, tt.gemm_ar):  # as torch's out= and newton_schulz
        with pytest.raises(tpla.InvalidArgumentError, match="'out' requires grad"):
            op(a, w, comm, out=leaf)
    assert torch.equal(leaf.detach(), torch.zeros(4, 6))


def test_muon_checks_its_settings_before_a_step_moves_anything():
    """Groups given as params keep "use_muon": False; settings a step would refuse are
    refused by the constructor; and a step whose plan cannot be made leaves the momentum
    as it was (the plan is made before the momentum moves)."""
    w = torch.nn.Parameter(torch.randn(8, 4))
    e, b = torch.nn.Parameter(torch.randn(6, 4)), torch.nn.Parameter(torch.randn(4))
    opt = tt.Muon([{"params": [w]}, {"params": [e, b], "use_muon": False, "lr": 1e-3}])
    assert [g["use_muon"] for g in opt.param_groups] == [True, False]
    for kwargs, match in ((dict(ns_dtype=torch.float64), "ns_dtype"),
                          (dict(ns_steps=0), "ns_steps"), (dict(ns_steps=5.5), "ns_steps"),
                          (dict(coefficients=[(3.4, -4.7, 2.0)] * 3), "coefficients"),
                          (dict(scale="orignal"), "scale")):
        with pytest.raises(tpla.InvalidArgumentError, match=match):
            tt.Muon([w], **kwargs)
    opt = tt.Muon([w], ns_steps=7)  # a new plan key: the plan is made at the first step
    w.grad = torch.randn(8, 4)
    before = w.detach().clone()

    def refuse(*args, **kwargs):
        raise tpla.OutOfMemoryError("refused by the test")
    real = _core.NsBatchPlan
    _core.NsBatchPlan = refuse
    try:
        with pytest.raises(tpla.OutOfMemoryError):
            opt.step()
    finally:
        _core.NsBatchPlan = real
    assert "momentum_buffer" not in opt.state[w] and torch.equal(w.detach(), before)
    opt.step()
    assert torch.equal(opt.state[w]["momentum_buffer"], w.grad * (1 - 0.95))


def test_layers_first_derivatives_under_create_graph_and_muon_buffer_dtypes():
    """The layers' backward is once differentiable: first derivatives with create_graph=True
    work (they once raised tpla's not-differentiable error); and a bf16 gradient updates an
    fp32 momentum buffer loaded from a main-grad checkpoint (it once raised torch's dtype
    error)."""
    comm = tt.local_communicator(torch.device("cpu"))
    layer = tt.ColumnParallelLinear(8, 6, comm)
    x = torch.randn(5, 2, 8, requires_grad=True)
    (g,) = torch.autograd.grad((layer(x) ** 2).sum(), x, create_graph=True)
    ref = torch.nn.functional.linear(x, layer.weight, layer.bias)
    (g_ref,) = torch.autograd.grad((ref ** 2).sum(), x)
    assert torch.allclose(g.detach(), g_ref, atol=1e-5)
    w = torch.nn.Parameter(torch.randn(8, 4, dtype=torch.bfloat16))
    saver = tt.Muon([w], use_main_grad=True)
    w.main_grad = torch.randn(8, 4)
    saver.step()
    state = copy.deepcopy(saver.state_dict())
    assert state["state"][0]["momentum_buffer"].dtype == torch.float32
    opt = tt.Muon([w])
    opt.load_state_dict(state)
    w.grad = torch.randn(8, 4, dtype=torch.bfloat16)
    opt.step()
    want = state["state"][0]["momentum_buffer"].lerp(w.grad.float(), 1 - 0.95)
    assert torch.equal(opt.state[w]["momentum_buffer"], want)
