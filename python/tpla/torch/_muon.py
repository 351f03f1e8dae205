"""_muon.py - the Muon optimizer with tpla's Newton-Schulz.

Per matrix parameter (conv-like parameters are flattened to 2-D):
    buf = momentum * buf + (1 - momentum) * g          (buf.lerp_(g, 1 - momentum))
    u   = (1 - momentum) * g + momentum * buf  (Nesterov)   or   buf
    u   = NS(u) * scale(rows, cols)      scale "original": max(1, rows/cols)^0.5
    p   = p * (1 - lr * weight_decay) - lr * u
One step orthogonalizes every matrix with ONE batched tpla plan
(tpla_ns_batch_*), collective over the communicator's ranks:
  - parameters marked as tensor-parallel shards (mark_tensor_parallel; the
    tpla layers mark theirs) go in as the shards they are: the plan runs
    them distributed or gathers them on one rank, and each rank gets its
    shard of the result;
  - other (replicated) parameters are split by rows over the ranks; the plan
    assigns whole matrices to ranks, and an in-place all-gather afterwards
    gives every rank the full update.
Parameter groups with use_muon=False (and `adamw_params`) use AdamW: the
usual recipe for embeddings, heads, and 1-D parameters (split_params()
sorts a model's parameters that way).
CUDA graphs: a step can be captured after one step outside the capture
(which makes the momentum buffers, AdamW's state and the plan), with static
gradients. A hyperparameter given as a number is frozen into the graph; lr,
weight_decay and momentum given as 0-dim tensors on the parameters' device
are read by the replayed kernels, so a scheduler that writes them in place
(torch's LR schedulers fill_ a tensor lr) reaches a replayed step. AdamW
parameters can be in a captured step when the optimizer is capturable=True
(their step count and bias corrections then live on the device, as in
torch.optim.AdamW(capturable=True)); otherwise such a step is refused.
"""
import collections
import itertools
import math

import torch

from .. import _core, _lib
from .._errors import InvalidArgumentError, InvalidUsageError
from ._comm import local_communicator
from ._layers import even_split
from ._ns import NS_MAX_STEPS, coefficient_spec, muon_scale, ns_desc
from ._tensors import c_int, capturing, matrix, refuse_capture, tpla_dtype


_tokens = itertools.count()  # per optimizer, for plan cache keys (id() may be reused)

# One matrix of a step: x (its update, ns_dtype) and view (this rank's shard of x, what the
# plan orthogonalizes, sharded along `shard`); split: the row split of a replicated x, else
# None; rows, cols: the global shape.
_Entry = collections.namedtuple("_Entry", "group p x view split rows cols shard")


def _decay(ps, lr, weight_decay):
    """p *= 1 - lr * weight_decay for every p of the list ps (decoupled weight decay),
    computed as p - p (lr wd); nothing for the number 0. A kernel may round an operand to
    p's dtype (CUDA a 0-dim tensor, the CPU's multi-tensor ops a number): harmless for the
    small lr wd, not for the factor (bf16 steps 2^-8 below 1)."""
    if torch.is_tensor(lr) or torch.is_tensor(weight_decay):
        torch._foreach_addcmul_(ps, ps, [lr * weight_decay] * len(ps), value=-1.0)
    elif weight_decay != 0:
        torch._foreach_add_(ps, ps, alpha=-lr * weight_decay)


def _step_on(step, p):
    """Whether AdamW's step count is a tensor on p's device (what a capture needs)."""
    return torch.is_tensor(step) and step.device == p.device


def _check_hyper(fn, kind, key, v):
    if torch.is_tensor(v) and (v.dim() != 0 or not v.is_floating_point()):
        raise InvalidArgumentError(
            "%s: the %s %s must be a number or a 0-dim floating-point tensor, not a tensor of "
            "shape %s and %s" % (fn, kind, key, tuple(v.shape), v.dtype))


def split_params(model, adamw_names=("embed", "lm_head", "head", "wte", "wpe")):
    """(muon_params, adamw_params) of a model: matrices of other modules go to
    Muon; 1-D parameters, nn.Embedding weights and parameters whose name
    contains one of adamw_names go to AdamW."""
    embedding_params = {id(m.weight) for m in model.modules()
                        if isinstance(m, torch.nn.Embedding)}
    muon, adamw = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        lowered = name.lower()
        if (p.dim() < 2 or id(p) in embedding_params or
                any(k in lowered for k in adamw_names)):
            adamw.append(p)
        else:
            muon.append(p)
    return muon, adamw


def _groups(params, use_muon, **extra):
    """use_muon True: Muon groups unless one says "use_muon": False (as add_param_group);
    False: AdamW groups, whatever they say."""
    params = list(params)
    if not params:
        return []
    groups = params if isinstance(params[0], dict) else [{"params": params}]
    out = []
    for g in groups:
        g = dict(g)
        if use_muon:
            g.setdefault("use_muon", True)
        else:
            g["use_muon"] = False
        for k, v in extra.items():
            g.setdefault(k, v)
        out.append(g)
    return out


class Muon(torch.optim.Optimizer):
    """Muon for matrix parameters, AdamW for `adamw_params`.

    comm: a tpla.torch.Communicator whose ranks share this optimizer's steps
      (None: each process alone). distribute=False orthogonalizes every
      matrix on every rank (no communication).
    ns_steps / coefficients: the Newton-Schulz schedule (see newton_schulz);
      ns_dtype: precision of the NS input (bf16 as in the reference recipe);
      ns_gram_dtype: precision of the Gram products, torch.float32 (default) or
      ns_dtype (bf16: the reference recipe's precision, faster);
      ns_iteration: "auto" (default), "x" or "gram" (newton_schulz's iteration=).
    scale: "original" (max(1, rows/cols)^0.5), "match_rms_adamw"
      (0.2 sqrt(max(rows, cols))), a number, or None.
    use_main_grad: read param.main_grad (fp32) when present, else param.grad.
    capturable: AdamW keeps its step count on the parameters' device, so a step
      with AdamW parameters can be captured in a CUDA graph (module docstring).
      A property of the optimizer: load_state_dict does not change it.
    lr, momentum, weight_decay (and adamw_lr, adamw_weight_decay) may be 0-dim
    tensors: the update reads them on the parameters' device. Groups given one
    tensor share it (a scheduler's per-group values need a tensor per group).
    """

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, weight_decay=0.0, *,
                 ns_steps=5, coefficients="muon", ns_dtype=torch.bfloat16, ns_iteration="auto",
                 ns_gram_dtype=torch.float32,
                 scale="original",
                 comm=None, distribute=True, use_main_grad=False, adamw_params=None,
                 adamw_lr=3e-4, adamw_betas=(0.9, 0.95), adamw_eps=1e-8,
                 adamw_weight_decay=0.0, capturable=False):
        fn = "tpla.torch.Muon"
        _check_hyper(fn, "Muon", "momentum", momentum)
        if not 0.0 <= momentum < 1.0:
            raise InvalidArgumentError("%s: momentum %r is not in [0, 1)" % (fn, momentum))
        if ns_dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise InvalidArgumentError("%s: argument 'ns_dtype': %s is not torch.float32, "
                                       "torch.float16 or torch.bfloat16" % (fn, ns_dtype))
        if ns_gram_dtype not in (torch.float32, ns_dtype):
            raise InvalidArgumentError("%s: argument 'ns_gram_dtype': %s is neither torch.float32 "
                                       "nor ns_dtype (%s)" % (fn, ns_gram_dtype, ns_dtype))
        self.ns_gram = tpla_dtype(ns_gram_dtype, fn, "ns_gram_dtype")
        self.coef = coefficient_spec(coefficients, fn)
        c_int(ns_steps, fn, "ns_steps", 1, NS_MAX_STEPS)
        if self.coef[1] is not None and len(self.coef[1]) != 3 * ns_steps:
            raise InvalidArgumentError("%s: argument 'coefficients': %d triples for ns_steps=%d"
                                       % (fn, len(self.coef[1]) // 3, ns_steps))
        if ns_iteration not in _lib.NS_ITERATION:
            raise InvalidArgumentError("%s: argument 'ns_iteration': %r is not one of %s"
                                       % (fn, ns_iteration, ", ".join(_lib.NS_ITERATION)))
        self.ns_iteration = ns_iteration
        groups = _groups(params, True) + _groups(adamw_params or [], False, lr=adamw_lr,
                                                  weight_decay=adamw_weight_decay)
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                        betas=adamw_betas, eps=adamw_eps, scale=scale)
        # the optimizer's, not a group's: load_state_dict leaves it as constructed
        self.capturable = bool(capturable)
        self._moved = {}
        super().__init__(groups, defaults)
        self.ns_steps, self.ns_dtype = int(ns_steps), ns_dtype
        self.comm, self.distribute, self.use_main_grad = comm, bool(distribute), use_main_grad
        self._token = next(_tokens)
        self._index = {}
        for group in self.param_groups:
            self._admit(group)

    def _admit(self, group):
        """Index a group's parameters (the batch plans' keys) and check them."""
        fn = "tpla.torch.Muon"
        for key in ("lr", "weight_decay", "momentum"):
            _check_hyper(fn, "Muon group's" if group["use_muon"] else "AdamW group's", key,
                         group.get(key))
        if group["use_muon"]:
            try:  # at its first step it would be too late: the momentum has moved
                muon_scale(2, 1, group.get("scale"))
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    "%s: a Muon group's scale %r is not \"original\", \"match_rms_adamw\", a "
                    "number or None" % (fn, group.get("scale"))) from None
        for p in group["params"]:
            self._index[p] = len(self._index)
            if group["use_muon"] and p.dim() < 2:
                raise InvalidArgumentError(
                    "%s: a %d-D parameter of shape %s is in a Muon group; Muon updates "
                    "matrices - pass it in adamw_params (split_params() sorts a model)"
                    % (fn, p.dim(), tuple(p.shape)))
            if group["use_muon"] and getattr(p, "tpla_tp_dim", None) is not None:
                if p.dim() != 2:
                    raise InvalidArgumentError("%s: tensor-parallel parameters must be 2-D"
                                               % fn)

    def add_param_group(self, param_group):
        """A Muon group unless it says "use_muon": False (then AdamW, as adamw_params)."""
        param_group = dict(param_group)
        param_group.setdefault("use_muon", True)
        super().add_param_group(param_group)
        if hasattr(self, "_index"):  # torch.optim.Optimizer.__init__ adds groups before it
            self._admit(self.param_groups[-1])

    def load_state_dict(self, state_dict):
        """As torch's, but a momentum buffer keeps the dtype it was saved with: with
        use_main_grad it is fp32 beside bf16 parameters, and torch would cast it."""
        super().load_state_dict(state_dict)
        params = [p for group in self.param_groups for p in group["params"]]
        for index, saved in state_dict["state"].items():
            buf = saved.get("momentum_buffer") if isinstance(saved, dict) else None
            if torch.is_tensor(buf):
                p = params[index]
                self.state[p]["momentum_buffer"] = buf.to(device=p.device, copy=True)

    def _grad(self, p):
        if self.use_main_grad and getattr(p, "main_grad", None) is not None:
            return p.main_grad
        return p.grad

    def zero_grad(self, set_to_none=True):
        super().zero_grad(set_to_none=set_to_none)
        if self.use_main_grad:
            for group in self.param_groups:
                for p in group["params"]:
                    if getattr(p, "main_grad", None) is not None:
                        p.main_grad.zero_()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        items, adamw = [], []
        for group in self.param_groups:
            for p in group["params"]:
                g = self._grad(p)
                if g is None:
                    continue
                (items if group["use_muon"] else adamw).append((group, p, g))
        if items:  # every check before any state changes: a refused step changes nothing
            self._check_items(items)
        if (items or adamw) and capturing((items or adamw)[0][1].device):
            self._check_capture(items, adamw)
        try:
            if items:
                self._muon(items)
            if adamw:  # enqueued while the GPU runs the Newton-Schulz plan
                self._adamw_all(adamw)
        finally:
            self._moved.clear()
        return loss

    def _hyper(self, group, key, t):
        """group[key] beside tensor t: a tensor elsewhere is copied to t's device once per
        step (in a capture it is there already: _check_capture), a number stays one."""
        v = group[key]
        if not torch.is_tensor(v) or v.device == t.device:
            return v
        k = (id(v), t.device)
        if k not in self._moved:
            self._moved[k] = v.to(t.device)
        return self._moved[k]

    def _check_capture(self, items, adamw):
        """A step captured into a CUDA graph replays what it captured: the momentum
        buffers, AdamW's state and the batched plan must exist already (made by a step
        outside the capture); AdamW's step count must be a device tensor (capturable=True),
        not a Python number that the graph would freeze; and a tensor hyperparameter must
        be on the parameters' device (a CPU tensor's value is copied at capture)."""
        fn = "tpla.torch.Muon.step"
        device = (items or adamw)[0][1].device
        for group in {id(g): g for g, _, _ in items + adamw}.values():
            for key in ("lr", "weight_decay", "momentum"):
                v = group.get(key)
                if torch.is_tensor(v) and v.device != device:
                    raise InvalidUsageError(
                        "%s: a CUDA graph is being captured, but the group's %s is a tensor on "
                        "%s, whose value the graph would freeze; put it on %s"
                        % (fn, key, v.device, device))
        if adamw and not self.capturable:
            raise InvalidUsageError(
                "%s: a CUDA graph is being captured, but %d parameter(s) with gradients use "
                "AdamW, whose step count and bias corrections are Python numbers that a graph "
                "would freeze; create the optimizer with capturable=True, or step them "
                "outside the graph" % (fn, len(adamw)))
        fresh_adamw = sum(not _step_on(self.state.get(p, {}).get("step"), p) for _, p, _ in adamw)
        comm = self._communicator(device) if items else None
        fresh = sum("momentum_buffer" not in self.state.get(p, ()) for _, p, _ in items)
        if fresh:
            needs = "momentum buffers for %d parameter(s)" % fresh
        elif fresh_adamw:
            needs = "AdamW state on the device for %d parameter(s)" % fresh_adamw
        elif items and not comm.has_plan(self._plan_key(items)):
            needs = "a new batched Newton-Schulz plan"
        else:
            return
        refuse_capture(device, fn, needs, "make one step outside the capture first, with "
                       "the same parameters having gradients, on every rank")

    def _plan_key(self, items):
        dt = tpla_dtype(self.ns_dtype, "tpla.torch.Muon", "ns_dtype")
        return ("muon", self._token, tuple(self._index[p] for _, p, _ in items), dt,
                self.ns_steps, self.coef[2], self.ns_iteration, self.ns_gram)

    # ---- AdamW ---------------------------------------------------------------

    def _adamw_all(self, adamw):
        """AdamW for every (group, p, g) with a gradient, by multi-tensor (foreach) ops over
        the parameters of one group, device, dtype and kind of step count: a model's many
        small parameters (norms, biases) cost a few kernels per step, not a dozen each."""
        buckets = {}
        for group, p, g in adamw:
            st = self.state[p]
            if not st:
                st["step"] = 0
                st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if self.capturable and not _step_on(st["step"], p):
                # the step count on the device (float32, as torch's capturable AdamW keeps it),
                # so the bias corrections are device tensors too; also a loaded count
                st["step"] = torch.as_tensor(st["step"], dtype=torch.float32).to(p.device)
            key = (id(group), p.device, p.dtype, _step_on(st["step"], p))
            bucket = buckets.setdefault(key, (group, key[3], [], [], []))
            bucket[2].append(p)
            bucket[3].append(g.to(p.dtype))
            bucket[4].append(st)
        for group, on_device, ps, gs, states in buckets.values():
            self._adamw_bucket(group, on_device, ps, gs, states)

    def _adamw_bucket(self, group, on_device, ps, gs, states):
        b1, b2 = group["betas"]
        eps = group["eps"]
        lr = self._hyper(group, "lr", ps[0])
        ms = [st["exp_avg"] for st in states]
        vs = [st["exp_avg_sq"] for st in states]
        if on_device:
            steps = [st["step"] for st in states]
            torch._foreach_add_(steps, 1.0)
        else:
            for st in states:
                st["step"] += 1
        _decay(ps, lr, self._hyper(group, "weight_decay", ps[0]))
        torch._foreach_lerp_(ms, gs, 1.0 - b1)
        torch._foreach_mul_(vs, b2)
        torch._foreach_addcmul_(vs, gs, gs, value=1.0 - b2)
        denom = torch._foreach_sqrt(vs)
        if on_device:
            # 1 - b^t per parameter on the device; the step size -lr / bc1 folded into
            # denom = (sqrt(v) / sqrt(bc2) + eps) * bc1 / -lr by two factors, each one
            # 0-dim operand (CUDA rounds those to a half parameter's dtype: once each)
            bc1 = torch._foreach_pow(b1, steps)
            bc2 = torch._foreach_pow(b2, steps)
            for bc in (bc1, bc2):
                torch._foreach_neg_(bc)
                torch._foreach_add_(bc, 1.0)
            torch._foreach_sqrt_(bc2)
            neg_lr = -lr
            torch._foreach_mul_(bc2, neg_lr)
            torch._foreach_mul_(denom, torch._foreach_div(bc1, bc2))
            torch._foreach_div_(bc1, neg_lr)
            torch._foreach_mul_(bc1, eps)
            torch._foreach_add_(denom, bc1)
            torch._foreach_addcdiv_(ps, ms, denom)
            return
        # torch.optim.AdamW's order: p += -(lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
        t = [float(st["step"]) for st in states]
        torch._foreach_div_(denom, [(1.0 - b2 ** k) ** 0.5 for k in t])
        torch._foreach_add_(denom, eps)
        if torch.is_tensor(lr):  # read by the kernel; one 0-dim operand
            torch._foreach_div_(denom, lr)
            torch._foreach_addcdiv_(ps, ms, denom, [-1.0 / (1.0 - b1 ** k) for k in t])
        else:
            torch._foreach_addcdiv_(ps, ms, denom, [-lr / (1.0 - b1 ** k) for k in t])

    # ---- Muon ---------------------------------------------------------------

    def _communicator(self, device):
        if self.comm is not None and self.distribute:
            if self.comm.device != device:
                raise InvalidArgumentError("tpla.torch.Muon: parameters on %s, communicator on %s"
                                           % (device, self.comm.device))
            return self.comm
        return local_communicator(device)

    def _check_items(self, items):
        """What _muon would refuse, checked before the step changes anything."""
        comm = self._communicator(items[0][1].device)
        P, rank = comm.world_size, comm.rank
        for _, p, g in items:
            if p.device != comm.device or g.device != comm.device:
                raise InvalidArgumentError(
                    "tpla.torch.Muon: a parameter of shape %s (or its gradient) is on %s, "
                    "another on %s: Muon's matrices must share one device"
                    % (tuple(p.shape), g.device if p.device == comm.device else p.device,
                       comm.device))
            tp_dim = getattr(p, "tpla_tp_dim", None)
            if tp_dim is None:
                continue
            if P == 1 and len(p.tpla_tp_sizes) > 1:
                raise InvalidArgumentError(
                    "tpla.torch.Muon: parameter %s is a tensor-parallel shard over %d ranks; "
                    "pass comm= (with distribute=True) so that its Newton-Schulz sees the "
                    "whole matrix" % (tuple(p.shape), len(p.tpla_tp_sizes)))
            sizes = p.tpla_tp_sizes
            local = g.reshape(g.shape[0], -1).shape[tp_dim]
            if P > 1 and (len(sizes) != P or sizes[rank] != local):
                raise InvalidArgumentError(
                    "tpla.torch.Muon: parameter %s is marked as a shard with sizes %s, "
                    "which do not fit %d ranks and its local shape" % (tuple(p.shape),
                                                                       list(sizes), P))

    def _muon(self, items):
        comm = self._communicator(items[0][1].device)
        P, rank = comm.world_size, comm.rank
        dt = tpla_dtype(self.ns_dtype, "tpla.torch.Muon", "ns_dtype")
        # the layouts follow from the gradients' shapes, so the plan (whose creation may fail)
        # is made before the momentum moves: a refused step changes nothing
        layouts = []  # (shard, split, global rows, cols, local rows, local cols)
        for _, p, g in items:
            rows, cols = g.shape[0], math.prod(g.shape[1:])
            tp_dim = getattr(p, "tpla_tp_dim", None) if P > 1 else None  # checked above
            if tp_dim is not None:
                sizes = p.tpla_tp_sizes
                layouts.append((tp_dim, None, sum(sizes) if tp_dim == 0 else rows,
                                cols if tp_dim == 0 else sum(sizes), rows, cols))
            else:
                split = even_split(rows, P)
                layouts.append((0, split, rows, cols, split[rank], cols))

        def create(ctx):  # only for a new key: the descriptors follow from it
            descs = [ns_desc(shard, lr, lc, dt, self.ns_steps, self.coef, 1e-7, None,
                             self.ns_gram, "auto", "tpla.torch.Muon", self.ns_iteration)
                     for shard, _, _, _, lr, lc in layouts]
            return _core.NsBatchPlan(ctx, [desc for desc, _ in descs])
        plan = comm.plan(self._plan_key(items), create)
        entries = []
        for (group, p, g), (u, fresh), (shard, split, rows, cols, _, _) in zip(
                items, self._momentum(items), layouts):
            if fresh and u.dtype == self.ns_dtype and u.is_contiguous():
                x = u  # the Nesterov blend is a new tensor: orthogonalized in place
            else:
                x = torch.empty(u.shape, dtype=self.ns_dtype, device=u.device)
                x.copy_(u)
            view = x
            if split is not None:
                off = sum(split[:rank])
                view = x[off:off + split[rank]]
            entries.append(_Entry(group, p, x, view, split, rows, cols, shard))
        stream = comm.stream()
        plan.execute([matrix(e.view, "tpla.torch.Muon", "update") for e in entries], stream)
        updates = {}  # p -= lr * scale * x: one multi-tensor op per group and scale
        for group, p, x, view, split, rows, cols, _ in entries:
            if split is not None and P > 1:  # replicated: every rank gets every row
                counts = [s * x.shape[1] for s in split]
                es = x.element_size()
                comm.context.allgatherv(x.data_ptr(), x.data_ptr() + sum(counts[:rank]) * es,
                                        counts, dt, stream)
            scale = muon_scale(rows, cols, group["scale"])
            key = (id(group), scale, p.dtype)
            bucket = updates.setdefault(key, (group, scale, [], []))
            bucket[2].append(p)
            bucket[3].append(x.view(p.shape))  # another dtype: promoted in the kernel
        for group, scale, ps, xs in updates.values():
            lr = self._hyper(group, "lr", ps[0])
            _decay(ps, lr, self._hyper(group, "weight_decay", ps[0]))
            if torch.is_tensor(lr):  # read by the kernel: a replayed graph sees its new value
                torch._foreach_addcmul_(ps, xs, [lr] * len(ps), value=-scale)
            else:
                torch._foreach_add_(ps, xs, alpha=-lr * scale)

    def _momentum(self, items):
        """buf = lerp(buf, g, 1 - momentum) for every (group, p, g), and its update u (the
        Nesterov blend lerp(g, buf, momentum), or buf): [(u, u is a new tensor)] in items'
        order. A number momentum takes two multi-tensor ops per group; a tensor one goes
        matrix by matrix, weighing by the small 1 - momentum (CUDA rounds a 0-dim weight to
        the buffer's dtype: bf16 of 0.1 is 0.1% off, of 0.9 its complement 1.6% off)."""
        groups = {}
        for i, (group, p, g) in enumerate(items):
            st = self.state[p]
            g2 = g.reshape(g.shape[0], -1)
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = torch.zeros_like(g2)
            elif buf.dtype != g2.dtype:  # e.g. an fp32 buffer saved with main grads, bf16 grads
                g2 = g2.to(buf.dtype)
            member = groups.setdefault(id(group), (group, [], [], []))
            member[1].append(i)
            member[2].append(buf)
            member[3].append(g2)
        out = [None] * len(items)
        for group, idx, bufs, g2s in groups.values():
            m = self._hyper(group, "momentum", bufs[0])
            nesterov = group["nesterov"]
            if torch.is_tensor(m):
                w, us = 1.0 - m, []
                for buf, g2 in zip(bufs, g2s):
                    buf.lerp_(g2, w)
                    us.append(buf.lerp(g2, w) if nesterov else buf)
            else:
                torch._foreach_lerp_(bufs, g2s, 1.0 - m)
                us = torch._foreach_lerp(g2s, bufs, m) if nesterov else bufs
            for i, u in zip(idx, us):
                out[i] = (u, nesterov)
        return out
