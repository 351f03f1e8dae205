"""checks_graphs.py - tpla.torch under CUDA graph capture (torch.cuda.graph), for
gpu/run_checks.py (torchrun, 1 or 2 ranks, the CUDA executor; on the CPU the
check returns {"skipped": ...}).

Each operation is called once eagerly on a side stream (PyTorch's documented
warm-up; the call makes the plan), captured into a CUDAGraph, then, for ROUNDS
rounds, fed new inputs copied into the captured tensors, replayed, and compared
bit for bit with an eager call on the same inputs and with a float64 reference:
the local GEMM (tt.local_gemm), an AllGather+GEMM (tt.ag_gemm with transport
SENDRECV, and its gathered view), Newton-Schulz (tt.newton_schulz, bf16,
256 x 512 per rank, rows sharded) and a Muon step (parameters and momentum
buffers after a replay against an eager step from the same state).
The tensor-parallel layers: a bf16 MLP (ColumnParallelLinear 512 -> 1024, gelu,
RowParallelLinear 1024 -> 512; 256 sequence rows per rank) graphed, forward and
backward, by torch.cuda.make_graphed_callables (its own warm-up makes the plans
and main_grad; capture_error_mode where it takes one), against an identical
eager MLP on the same inputs and output gradients: output, input gradient and
parameter gradients bit for bit, or with accumulate_main_grad the weights'
main_grad accumulated over the rounds; the output against float64. SENDRECV,
with weight.grad and with main_grad; on one rank the default options too.
A captured Muon(capturable=True) step with AdamW parameters and tensor lr and
weight decay, the lr tensors changed in place between replays, against eager
steps bit for bit; eagerly, bf16 parameters under tensor hyperparameters
against the same numbers (within one bf16 rounding).
Refusals, each an InvalidUsageError raised before anything was enqueued: a
call that needs a new plan, Muon steps without state or with AdamW parameters
of a non-capturable optimizer (the package's guards); the PEER transport (the C
library): an AllGather+GEMM with the default transport where AUTO chose PEER
between two ranks (GPUs that map each other; one rank's PEER plan has no flags
and is captured), and on 2 ranks NS summing its Grams by pulls, after which an
NS plan made with gram_sum="collective" is captured. Every rank makes the same
calls in the same order.
"""
import contextlib
import gc
import inspect
import os

import numpy as np
import torch

import tpla
import tpla.torch as tt
from refs import MUON, ns_numpy, schedule, seeded
from tpla import _lib

ROUNDS = 3
BF16 = torch.bfloat16
# capture_error_mode: "thread_local" checks every CUDA call of the capturing thread (all
# of tpla's calls and the package's) but not other threads' (torch's NCCL watchdog);
# TPLA_CHECK_CAPTURE_MODE=global runs the stricter default of torch.cuda.graph.
MODE = os.environ.get("TPLA_CHECK_CAPTURE_MODE", "thread_local")


@contextlib.contextmanager
def _env(name, value):
    """os.environ[name] = value (None: unset) inside, restored after."""
    saved = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def _warm_up(fn):
    """fn() eagerly on a side stream (torch.cuda.graph's documented warm-up)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = fn()
    torch.cuda.current_stream().wait_stream(s)
    return out


def _capture(fn):
    """(graph, what fn returned while captured)."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode=MODE):
        out = fn()
    return g, out


def _refused(fn, *needles):
    """fn() inside a capture must raise tpla.InvalidUsageError before enqueuing anything
    (the capture then ends cleanly); returns the message."""
    g = torch.cuda.CUDAGraph()
    node = torch.zeros(1, device="cuda")
    try:
        with torch.cuda.graph(g, capture_error_mode=MODE):
            node.add_(1)  # so that the graph is not empty
            fn()
    except tpla.InvalidUsageError as e:
        for n in needles:
            assert n in str(e), "message %r lacks %r" % (str(e), n)
        msg = str(e)
    else:
        raise AssertionError("the capture was not refused (expected InvalidUsageError with %s)"
                             % (needles,))
    del g
    torch.cuda.synchronize()  # the context still works: later checks use it
    return msg


def _rel(got, want):
    got = got.double().cpu().numpy() if torch.is_tensor(got) else got
    return float(np.abs(got - want).max() / np.abs(want).max())


# ---- the local GEMM ----------------------------------------------------------------

def _check_gemm(comm):
    dev = comm.device
    m, k, n = 256, 512, 384
    a = seeded((m, k), 900, dtype=BF16, device=dev)
    b = seeded((k, n), 901, dtype=BF16, device=dev)
    d = torch.empty(m, n, dtype=torch.float32, device=dev)  # bf16 in, fp32 out
    _warm_up(lambda: tt.local_gemm(d, a, b, comm))
    g, _ = _capture(lambda: tt.local_gemm(d, a, b, comm))
    worst = 0.0
    for r in range(ROUNDS):
        a.copy_(seeded((m, k), 910 + r, dtype=BF16, device=dev))
        b.copy_(seeded((k, n), 920 + r, dtype=BF16, device=dev))
        g.replay()
        eager = tt.local_gemm(torch.empty_like(d), a, b, comm)
        assert torch.equal(d, eager), "round %d: the replayed GEMM differs from the eager one" % r
        err = _rel(d, (a.double() @ b.double()).cpu().numpy())
        assert err < 1e-4, "round %d: relative error %.3g against float64" % (r, err)
        worst = max(worst, err)
    return worst


# ---- AllGather+GEMM -------------------------------------------------------------------

def _new_plan(comm, fn):
    """fn()'s result and the one plan it added to comm's cache."""
    before = set(comm._plans)
    out = fn()
    new = [p for key, p in comm._plans.items() if key not in before]
    assert len(new) == 1, "expected one new plan, got %d" % len(new)
    return out, new[0]


def _check_ag_gemm(comm, rank, world):
    """Returns ({measurements}, whether the default transport is PEER: the ranks' GPUs
    map each other)."""
    dev = comm.device
    lr, k, n = 128, 256, 192
    a_local = torch.empty(lr, k, dtype=BF16, device=dev)
    w = torch.empty(n, k, dtype=BF16, device=dev)  # n x k: transpose_b (each rank its own)

    def fill(r):
        a_full = seeded((lr * world, k), 700 + r, dtype=BF16, device=dev)
        a_local.copy_(a_full[rank * lr:(rank + 1) * lr])
        w.copy_(seeded((n, k), 800 + 10 * r + rank, dtype=BF16, device=dev))
        return a_full

    def call(opts, **kw):
        return lambda: tt.ag_gemm(a_local, w, comm, **opts, **kw)

    def warm_up(opts):  # makes the plan: its info
        fill(0)
        _, plan = _new_plan(comm, lambda: _warm_up(call(opts, return_gathered=True)))
        return {"transport": plan.info["transport"], "mode": plan.info["mode"]}

    def rounds(opts):
        g, (d, gathered) = _capture(call(opts, return_gathered=True))
        worst = 0.0
        for r in range(ROUNDS):
            a_full = fill(r + 1)
            g.replay()
            if gathered is not None:  # a view of the plan's buffer, refilled by the replay
                assert torch.equal(gathered, a_full), "round %d: gathered view differs" % r
            eager = call(opts)()
            assert torch.equal(d, eager), "round %d: the replayed AG+GEMM differs from eager" % r
            err = _rel(d, (a_full.double() @ w.double().t()).cpu().numpy())
            assert err < 1e-2, "round %d: relative error %.3g against float64" % (r, err)
            worst = max(worst, err)
        return {"rel_err": worst, "gathered_view": gathered is not None}

    out = {}
    sendrecv = dict(mode="overlap", transport="sendrecv")  # capturable
    out["sendrecv"] = warm_up(sendrecv)
    out["sendrecv"].update(rounds(sendrecv))
    # the defaults: transport AUTO is PEER where every pair of the ranks' GPUs map each
    # other (one rank too, as the C library decides it), which refuses a captured stream
    # when there are peers (one rank has no flags to replay)
    out["default"] = warm_up({})
    peer = out["default"]["transport"] == _lib.TRANSPORT["peer"] and world > 1
    if peer:
        _refused(call({}), "tpla_ag_gemm", "CUDA graph", "SENDRECV")
        out["default"]["refused"] = True
    else:
        out["default"].update(rounds({}))
    return out, peer


# ---- Newton-Schulz --------------------------------------------------------------------

def _ns_rounds(comm, rank, world, x, **kw):
    """Warm up (making the plan), capture, replay ROUNDS times against eager calls
    and the float64 reference; the worst relative error."""
    rows, cols = x.shape

    def fill(seed):
        full = seeded((rows * world, cols), seed, dtype=BF16, device=x.device)  # every rank
        x.copy_(full[rank * rows:(rank + 1) * rows])
        return full

    fill(500)
    _warm_up(lambda: tt.newton_schulz(x, comm, **kw))
    g, y = _capture(lambda: tt.newton_schulz(x, comm, **kw))
    worst = 0.0
    for r in range(ROUNDS):
        full = fill(501 + r)
        g.replay()
        eager = tt.newton_schulz(x, comm, **kw)
        assert torch.equal(y, eager), "round %d: the replayed NS differs from the eager one" % r
        want = ns_numpy(full.double().cpu().numpy(), schedule(MUON, 5))
        err = _rel(y, want[rank * rows:(rank + 1) * rows])
        assert err < 6e-2, "round %d: relative max error %.3g against float64" % (r, err)
        worst = max(worst, err)
    return worst


def _check_ns(comm, rank, world, peer):
    x = torch.empty(256, 512, dtype=BF16, device=comm.device)  # this rank's rows
    out = {}
    # a call that needs a new plan: refused by the package, on every rank alike
    _refused(lambda: tt.newton_schulz(x[:, :128], comm), "newton_schulz",
             "outside the capture")
    if world == 1:
        out["rel_err"] = _ns_rounds(comm, rank, world, x)
        return out
    # 2 ranks: a distributed Gram, summed by copy-engine pulls where the GPUs map
    # each other (the default at 2 ranks): the library refuses the capture
    kw = dict(algorithm="gram_allreduce")
    if peer:
        x.copy_(seeded((256, 512), 600 + rank, dtype=BF16, device=comm.device))
        with _env("TPLA_NS_GRAM_SUM", "pull"):
            _warm_up(lambda: tt.newton_schulz(x, comm, **kw))
        _refused(lambda: tt.newton_schulz(x, comm, **kw), "tpla_ns_execute", "CUDA graph",
                 "TPLA_NS_GRAM_SUM_COLLECTIVE")
        out["pulls_refused"] = True
    else:  # no pulls without PEER: capturable as it is
        out["rel_err_default"] = _ns_rounds(comm, rank, world, x, **kw)
    # NCCL's all-reduce instead: a plan of its own (gram_sum is in the cache key)
    out["rel_err_collective"] = _ns_rounds(comm, rank, world, x, gram_sum="collective", **kw)
    return out


# ---- Muon -----------------------------------------------------------------------------

def _replays_match_eager(g, opt, params, state, prepare, what):
    """For ROUNDS rounds: prepare(r) (new gradients, hyperparameters), replay g, then restore
    params and state and step opt eagerly: every tensor must equal the replay's bit for bit.
    Returns the largest change of a parameter in a replay (which must be nonzero)."""
    moved = 0.0
    tensors = params + state
    for r in range(ROUNDS):
        prepare(r)
        before = [t.detach().clone() for t in tensors]
        g.replay()
        replayed = [t.detach().clone() for t in tensors]
        with torch.no_grad():
            for t, b in zip(tensors, before):
                t.copy_(b)
        opt.step()  # eagerly, from the same state
        for i, (t, want) in enumerate(zip(tensors, replayed)):
            assert torch.equal(t, want), "%s %d: tensor %d differs from the replay" % (what, r, i)
        moved = max(moved, max(float((t.detach() - b).abs().max())
                               for t, b in zip(params, before)))
    assert moved > 0, "%s: the captured step changed no parameter" % what
    return moved


def _check_muon(comm, rank, world):
    dev = comm.device
    # replicated (one conv-like); the repeated shape runs as a group (ns_group.c)
    shapes = [(128, 256), (192, 64), (32, 16, 3, 3), (128, 256), (128, 256)]
    params = [torch.nn.Parameter(seeded(s, 60 + i, device=dev)) for i, s in enumerate(shapes)]
    sizes = tt.even_split(96, world)  # a tensor-parallel shard: rows of 96 x 80
    tp = torch.nn.Parameter(seeded((sizes[rank], 80), 70 + rank, device=dev))
    tt.mark_tensor_parallel(tp, 0, sizes)
    params.append(tp)
    grads = [torch.empty_like(p) for p in params]  # static gradients
    for p, gr in zip(params, grads):
        p.grad = gr

    def fill(r):
        for i, gr in enumerate(grads):
            gr.copy_(seeded(gr.shape, 3000 + 100 * r + 10 * i + rank, device=dev))

    # steps refused before they change anything: no state yet (Python's guard)
    fresh = tt.Muon(params, comm=comm)
    _refused(fresh.step, "Muon.step", "momentum buffers", "outside the capture")
    assert not fresh.state, "a refused step left state behind"
    opt = tt.Muon(params, lr=0.02, weight_decay=0.01, comm=comm)
    fill(0)
    _warm_up(opt.step)  # a batch plan never pulls
    g, _ = _capture(opt.step)
    bufs = [opt.state[p]["momentum_buffer"] for p in params]
    moved = _replays_match_eager(g, opt, params, bufs, lambda r: fill(r + 1), "round")
    del g
    # AdamW's step count is a Python number: a captured step with AdamW parameters is refused
    bias = torch.nn.Parameter(seeded((64,), 80, device=dev))
    bias.grad = seeded((64,), 81, device=dev)
    mixed = tt.Muon([torch.nn.Parameter(seeded((8, 8), 82, device=dev))], comm=comm,
                    adamw_params=[bias])  # its Muon parameter has no gradient: AdamW only
    mixed.step()
    _refused(mixed.step, "Muon.step", "AdamW", "capturable=True")
    assert mixed.state[bias]["step"] == 1, "a refused step counted"
    return {"max_step": moved, "scheduled": _check_muon_scheduled(comm, rank, params, bias)}


def _check_muon_scheduled(comm, rank, params, bias):
    """capturable=True with AdamW parameters and lr / weight decay as device tensors: the
    captured step replays what an eager step does after the lr tensors are changed in place
    (as torch's schedulers do), bit for bit; returns the largest change of a replay."""
    dev = comm.device
    lr, adamw_lr = torch.tensor(0.02, device=dev), torch.tensor(1e-3, device=dev)
    opt = tt.Muon(params, lr=lr, weight_decay=torch.tensor(0.01, device=dev), comm=comm,
                  adamw_params=[bias], adamw_lr=adamw_lr, capturable=True)
    bias.grad = seeded(bias.shape, 90, device=dev)
    everything = params + [bias]
    grads = [p.grad for p in everything]
    _warm_up(opt.step)
    g, _ = _capture(opt.step)
    state = [t for p in everything for t in opt.state[p].values() if torch.is_tensor(t)]

    def schedule(r):
        for i, gr in enumerate(grads):
            gr.copy_(seeded(gr.shape, 5000 + 100 * r + 10 * i + rank, device=dev))
        lr.fill_(0.02 / (r + 2))  # a schedule, written in place
        adamw_lr.fill_(1e-3 / (r + 2))

    moved = _replays_match_eager(g, opt, everything, state, schedule, "scheduled round")
    return {"max_step": moved, "bf16_tensor_vs_number": _tensor_vs_number_bf16(dev)}


def _tensor_vs_number_bf16(dev):
    """bf16 parameters (Muon and AdamW), eagerly: lr, momentum and weight decay as CUDA
    0-dim tensors against the same numbers. A CUDA kernel may round a
    0-dim tensor operand to the parameter's dtype: a bf16 decay factor 1 - 0.002 becomes
    1 - 2^-8 (0.4% a step where the number path loses the 0.2% to rounding), a bf16 momentum
    0.9 becomes 0.8984 (the gradient's weight 1.6% off). So over ten steps the parameters
    and the momentum buffers of the two must agree to within one bf16 rounding of each
    element plus half of one of the tensor's largest."""
    def run(h):
        ps = [torch.nn.Parameter(seeded(s, 95 + i, device=dev).bfloat16())
              for i, s in enumerate([(64, 48), (48,)])]
        opt = tt.Muon(ps[:1], lr=h(0.02), momentum=h(0.9), weight_decay=h(0.1),
                      adamw_params=ps[1:], adamw_lr=h(1e-3), adamw_weight_decay=h(2.0),
                      capturable=True)
        for r in range(10):
            for i, p in enumerate(ps):
                p.grad = seeded(p.shape, 700 + 10 * r + i, device=dev).bfloat16()
            opt.step()
        return ps + [opt.state[ps[0]]["momentum_buffer"]]

    numbers = run(lambda v: v)
    tensors = run(lambda v: torch.tensor(v, device=dev))
    worst = 0.0
    for a, b in zip(tensors, numbers):
        a, b = a.detach().float(), b.detach().float()
        # one bf16 rounding of each element, plus half of one of the tensor's largest (the
        # benign roundings of lr, 1 - momentum and lr wd to bf16, up to 0.1%, stay well
        # inside; the harmful ones add 0.4% a step or 1.6% of the gradient's weight)
        tol = b.abs() * 2.0 ** -7 + b.abs().max() * 2.0 ** -8
        worst = max(worst, float(((a - b).abs() / tol).max()))
    assert worst <= 1.0, ("tensor hyperparameters moved bf16 parameters or momentum %.2f "
                          "times the tolerance away from the numbers' steps" % worst)
    return worst


# ---- the tensor-parallel layers ---------------------------------------------------------

class _Mlp(torch.nn.Module):
    """ColumnParallelLinear -> gelu -> RowParallelLinear (bf16), its input and output
    split along the sequence; both layers load `full` ((W1, b1), (W2, b2), every rank's)."""

    def __init__(self, comm, full, main_grad, options):
        super().__init__()
        (w1, b1), (w2, b2) = full
        kw = dict(dtype=BF16, accumulate_main_grad=main_grad, **options)
        self.col = tt.ColumnParallelLinear(w1.shape[1], w1.shape[0], comm, **kw)
        self.row = tt.RowParallelLinear(w2.shape[1], w2.shape[0], comm, **kw)
        self.col.load_full(w1, b1)
        self.row.load_full(w2, b2)

    def forward(self, x):
        return self.row(torch.nn.functional.gelu(self.col(x)))


def _layers_rounds(comm, rank, world, main_grad, options, graph_kw):
    """One MLP graphed by make_graphed_callables (which warms up on a side stream, making
    the plans and main_grad, then captures forward and backward), an identical one eager;
    ROUNDS rounds of forward+backward on both from the same inputs and output gradients."""
    dev = comm.device
    s, h, f = 256, 512, 1024  # sequence rows per rank, hidden, ffn
    full = [(seeded((f, h), 1100, dtype=BF16, device=dev, scale=h ** -0.5),
             seeded((f,), 1101, dtype=BF16, device=dev, scale=0.1)),
            (seeded((h, f), 1102, dtype=BF16, device=dev, scale=f ** -0.5),
             seeded((h,), 1103, dtype=BF16, device=dev, scale=0.1))]
    graphed, eager = _Mlp(comm, full, main_grad, options), _Mlp(comm, full, main_grad, options)
    before = set(comm._plans)
    sample = seeded((s, 1, h), 1104 + rank, dtype=BF16, device=dev).requires_grad_(True)
    # main_grad: the weights get no gradient from autograd (the backward adds into main_grad)
    graphed = torch.cuda.make_graphed_callables(graphed, (sample,), allow_unused_input=main_grad,
                                                **graph_kw)  # the module, its forward graphed
    xport = {v: k for k, v in _lib.TRANSPORT.items()}
    made = [p for key, p in comm._plans.items() if key not in before]
    transports = sorted({xport.get(p.info["transport"], p.info["transport"]) for p in made})
    weights = ("col.weight", "row.weight")
    if main_grad:  # the graph adds into the warm-up's main_grad tensors: zero them in place
        for m in (graphed, eager):
            for name, p in m.named_parameters():
                if name in weights:
                    if getattr(p, "main_grad", None) is None:
                        p.main_grad = torch.zeros(p.shape, dtype=torch.float32, device=dev)
                    p.main_grad.zero_()

    def step(m, x_mine, dy):
        for p in m.parameters():
            p.grad = None
        x = x_mine.clone().requires_grad_(True)
        y = m(x)
        y.backward(dy)
        got = {"output": y.detach().clone(), "input grad": x.grad}
        for name, p in m.named_parameters():
            got[name + ".grad"] = p.grad
            if main_grad and name in weights:
                got[name + ".main_grad"] = p.main_grad.clone()  # accumulates over the rounds
        return got

    worst, grown = 0.0, 0.0
    last = None
    for r in range(ROUNDS):
        x_full = seeded((s * world, 1, h), 1110 + r, dtype=BF16, device=dev)
        x_mine = x_full[rank * s:(rank + 1) * s]
        dy = seeded((s, 1, h), 1120 + 10 * r + rank, dtype=BF16, device=dev)
        replayed, want = step(graphed, x_mine, dy), step(eager, x_mine, dy)
        for name, w in want.items():
            got = replayed[name]
            assert (got is None) == (w is None) and (w is None or torch.equal(got, w)), (
                "round %d: %s of the graphed layers differs from the eager ones" % (r, name))
        for name in weights:
            assert (want[name + ".grad"] is None) == main_grad, (
                "round %d: %s.grad with accumulate_main_grad=%s" % (r, name, main_grad))
            if main_grad:
                mg = want[name + ".main_grad"]
                grown = max(grown, float((mg - (0 if last is None else last[name])).abs().max()))
        last = {name: want[name + ".main_grad"] for name in weights} if main_grad else None
        with torch.no_grad():  # float64: x W1^T + b1 -> gelu -> W2^T + b2, this rank's rows
            (w1, b1), (w2, b2) = [(w.double(), b.double()) for w, b in full]
            hid = torch.nn.functional.gelu(x_full.reshape(-1, h).double() @ w1.t() + b1)
            ref = (hid @ w2.t() + b2)[rank * s:(rank + 1) * s].cpu().numpy()
        err = _rel(replayed["output"].reshape(s, h), ref)
        assert err < 3e-2, "round %d: relative max error %.3g against float64" % (r, err)
        worst = max(worst, err)
    out = {"rel_err": worst, "plans_made": len(made), "transports": transports,
           "fallback_gathers": eager.row.fallback_gathers}
    if main_grad:
        assert grown > 0, "the graphed backward added nothing to main_grad"
        out["max_main_grad_step"] = grown
    return out


def _check_layers(comm, rank, world):
    """The MLP of the layers under make_graphed_callables: weight.grad and main_grad
    (accumulate_main_grad) with SENDRECV (capturable on any number of ranks), and on one
    rank the default options too (AUTO's PEER has no flags there)."""
    # make_graphed_callables captured in global mode only before it took capture_error_mode
    takes = "capture_error_mode" in inspect.signature(torch.cuda.make_graphed_callables).parameters
    graph_kw = {"capture_error_mode": MODE} if takes else {}
    sendrecv = dict(mode="overlap", transport="sendrecv")
    variants = [("sendrecv", False, sendrecv), ("sendrecv_main_grad", True, sendrecv)]
    if world == 1:
        variants.append(("default", False, {}))
    out = {"capture_error_mode": graph_kw.get("capture_error_mode", "global")}
    for name, main_grad, options in variants:
        out[name] = _layers_rounds(comm, rank, world, main_grad, options, graph_kw)
        # older torch installs a graphed forward that refers to the module (a cycle holding
        # the graphs, freed by the cyclic GC whenever it runs): free them now, uncaptured
        torch.cuda.synchronize()
        gc.collect()
    return out


def check_graphs(rank, world, device):
    """tpla.torch's calls captured into CUDA graphs and replayed (module docstring)."""
    if device != "cuda":
        return {"skipped": "CUDA graphs: the CUDA executor only"}
    comm = tt.Communicator(device=device, timeout=120)
    try:
        out = {"gemm_rel_err": _check_gemm(comm)}
        out["ag_gemm"], peer = _check_ag_gemm(comm, rank, world)
        out["ns"] = _check_ns(comm, rank, world, peer)
        out["muon"] = _check_muon(comm, rank, world)
        out["layers"] = _check_layers(comm, rank, world)
        out["capture_error_mode"] = MODE
    finally:
        torch.cuda.synchronize()
        comm.close()
    return out
