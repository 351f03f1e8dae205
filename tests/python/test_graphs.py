"""test_graphs.py - the package's rules for CUDA graph capture, on the CPU: with
the capture test (tpla.torch._tensors.capturing) patched to say "capturing",
a call that needs a new plan or context raises InvalidUsageError before doing
anything, a call whose plan is cached goes through, a Muon step refuses to
run without its state, with AdamW parameters unless capturable=True, or with
a tensor hyperparameter on another device, and leaves the state as it was.
The captures themselves are checked on GPUs (checks_graphs.py, run by
gpu/run_checks.py); here that check only skips."""
import pytest
import torch

import tpla
import tpla.torch as tt
from tpla.torch import _muon, _tensors


@pytest.fixture
def comm():
    c = tt.Communicator.local("cpu", timeout=60)
    yield c
    c.close()


@pytest.fixture
def capture(monkeypatch):
    """Call capture(True) to make the package believe a capture is under way."""
    def set_capturing(on):
        monkeypatch.setattr(_tensors, "capturing", lambda device: on)
        monkeypatch.setattr(_muon, "capturing", lambda device: on)
    return set_capturing


def test_not_capturing_on_the_cpu():
    assert not _tensors.capturing(torch.device("cpu"))


def test_new_plans_are_refused_cached_ones_run(comm, capture):
    x = torch.randn(12, 8)
    a, w = torch.randn(6, 8), torch.randn(5, 8)
    capture(True)
    with pytest.raises(tpla.InvalidUsageError, match="outside the capture") as e:
        tt.newton_schulz(x, comm)
    assert "newton_schulz" in str(e.value) and "CUDA graph" in str(e.value)
    with pytest.raises(RuntimeError, match="ag_gemm"):  # InvalidUsageError is a RuntimeError
        tt.ag_gemm(a, w, comm)
    assert not comm._plans
    capture(False)
    y = tt.newton_schulz(x, comm)
    d = tt.ag_gemm(a, w, comm)
    capture(True)
    assert torch.equal(tt.newton_schulz(x, comm), y)
    assert torch.equal(tt.ag_gemm(a, w, comm), d)
    d2 = torch.empty(6, 5)
    tt.local_gemm(d2, a, w, comm, transpose_b=True)  # no plan
    with pytest.raises(tpla.InvalidUsageError, match="outside the capture"):
        tt.newton_schulz(x[:, :4], comm)  # another shape: another plan
    with pytest.raises(tpla.InvalidUsageError, match="clear_plans"):
        comm.clear_plans()
    with pytest.raises(tpla.InvalidUsageError, match="tpla context"):
        tt.Communicator.local("cpu")
    assert len(comm._plans) == 2


def test_muon_capture_rules(comm, capture):
    p = torch.nn.Parameter(torch.randn(16, 8))
    q = torch.nn.Parameter(torch.randn(8, 8))
    b = torch.nn.Parameter(torch.randn(8))
    for t in (p, q, b):
        t.grad = torch.randn_like(t)
    opt = tt.Muon([p, q], comm=comm)
    capture(True)
    with pytest.raises(tpla.InvalidUsageError, match="momentum buffers for 2"):
        opt.step()
    assert not opt.state and not comm._plans
    capture(False)
    opt.step()
    capture(True)
    state = {k: v.clone() for k, v in opt.state[p].items()}
    opt.step()  # everything made: runs
    assert not torch.equal(opt.state[p]["momentum_buffer"], state["momentum_buffer"])
    q.grad = None  # another set of parameters with gradients: another plan
    with pytest.raises(tpla.InvalidUsageError, match="batched Newton-Schulz plan"):
        opt.step()
    capture(False)
    mixed = tt.Muon([q], comm=comm, adamw_params=[b])  # q has no gradient: AdamW only
    mixed.step()
    before = b.detach().clone()
    capture(True)
    with pytest.raises(tpla.InvalidUsageError, match="AdamW"):
        mixed.step()
    assert mixed.state[b]["step"] == 1 and torch.equal(b.detach(), before)

    capture(False)  # capturable=True: AdamW's step count on the device, so it captures
    able = tt.Muon([q], comm=comm, adamw_params=[b], capturable=True, adamw_lr=torch.tensor(1e-3))
    with pytest.raises(tpla.InvalidUsageError, match="AdamW state on the device for 1"):
        capture(True)
        able.step()
    assert not able.state
    capture(False)
    able.step()
    capture(True)
    able.step()
    assert torch.is_tensor(able.state[b]["step"]) and float(able.state[b]["step"]) == 2.0
    # a tensor hyperparameter elsewhere than the parameters: its value would be frozen
    able.param_groups[1]["lr"] = torch.tensor(1e-3, device="meta")
    with pytest.raises(tpla.InvalidUsageError, match="lr is a tensor on meta"):
        able.step()
    assert float(able.state[b]["step"]) == 2.0


def test_main_grad_is_not_made_in_a_capture(comm, capture):
    layer = tt.ColumnParallelLinear(8, 6, comm, accumulate_main_grad=True)
    x = torch.randn(4, 1, 8, requires_grad=True)
    layer(x).sum().backward()  # plans and main_grad made
    layer.weight.main_grad = None
    capture(True)
    with pytest.raises(tpla.InvalidUsageError, match="main_grad"):
        layer(x).sum().backward()


def test_gpu_check_skips_on_the_cpu():
    import checks_graphs
    assert "skipped" in checks_graphs.check_graphs(0, 1, "cpu")
