"""test_muon.py - tpla.torch.Muon in one process: parameter groups, state and devices,
steps against a float64 reference, tensor hyperparameters and the capturable AdamW for the
other parameters, many parameters against torch's AdamW, the Gram dtype reaching the plan,
and a refused step that changes nothing."""
import copy

import numpy as np
import pytest
import torch

import tpla
import tpla.torch as tt
from refs import MUON, ns_numpy, schedule


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
