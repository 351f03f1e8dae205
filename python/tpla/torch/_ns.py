"""_ns.py - newton_schulz(): tpla's distributed Newton-Schulz on tensors.

Plans are cached on the communicator per (local shape, dtype, options,
shard_sizes). Plan creation is collective, so all ranks must hit or miss
the cache together: with uneven shards whose local shape on some rank could
come from two different global shapes, pass shard_sizes (the sharded size
of every rank) so that the key says which global matrix it is.
"""
import ctypes
import itertools
import math

import torch

from .. import _core, _lib
from .._errors import InvalidArgumentError
from ._comm import local_communicator
from ._tensors import (c_int, check_tensor, group_number, matrix, not_differentiable, same_view,
                       tpla_dtype, written)

NS_MAX_STEPS = 1000  # the library's bound on steps (src/core/ns.h)

PRESETS = {
    "muon": _lib.NS_MUON,
    "muon5": _lib.NS_MUON_SCHEDULE5, "muon_schedule5": _lib.NS_MUON_SCHEDULE5,
    "schedule5": _lib.NS_MUON_SCHEDULE5,
    "polar_express": _lib.NS_POLAR_EXPRESS, "polar-express": _lib.NS_POLAR_EXPRESS,
    "cubic": _lib.NS_CUBIC,
}


def coefficient_spec(coefficients, fn):
    """(preset, flat float list or None, hashable key) of a preset name or a
    list of (a, b, c) triples."""
    if isinstance(coefficients, str):
        try:
            preset = PRESETS[coefficients.lower()]
        except KeyError:
            raise InvalidArgumentError(
                "%s: argument 'coefficients': unknown preset %r (known: %s)"
                % (fn, coefficients, ", ".join(sorted(PRESETS)))) from None
        return preset, None, ("preset", preset)
    try:
        triples = [tuple(float(v) for v in t) for t in coefficients]
    except (TypeError, ValueError):
        raise InvalidArgumentError("%s: argument 'coefficients' must be a preset name or a "
                                   "sequence of (a, b, c) triples" % fn) from None
    for i, t in enumerate(triples):
        if len(t) != 3:
            raise InvalidArgumentError("%s: argument 'coefficients': entry %d has %d values, "
                                       "expected 3 (a, b, c)" % (fn, i, len(t)))
    flat = [v for t in triples for v in t]
    return _lib.NS_USER, flat, ("user", tuple(flat))


def _named(table, value, fn, arg):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise InvalidArgumentError("%s: argument '%s': %r is not one of %s"
                                   % (fn, arg, value, ", ".join(table))) from None


def ns_desc(shard, local_rows, local_cols, dtype, steps, coef, eps, safety, gram_dtype,
            algorithm, fn, iteration="auto", gram_sum="auto", workspace_group=0):
    """A filled tpla_ns_desc_t (and the coefficient array it points to)."""
    preset, flat, _ = coef
    algo = _named(_lib.NS_ALGO, algorithm, fn, "algorithm")
    it = _named(_lib.NS_ITERATION, iteration, fn, "iteration")
    gs = _named(_lib.NS_GRAM_SUM, gram_sum, fn, "gram_sum")
    d = _lib.NsDesc.new(shard=shard, local_rows=int(local_rows), local_cols=int(local_cols),
                        dtype=dtype, steps=int(steps), preset=preset, eps=float(eps),
                        safety=float(safety or 0.0), gram_dtype=gram_dtype, algorithm=algo,
                        iteration=it, gram_sum=gs, workspace_group=workspace_group)
    keep = None
    if flat is not None:
        keep = (ctypes.c_float * len(flat))(*flat)
        d.coefficients = keep
        d.ncoefficients = len(flat)
    return d, keep


def shard_of(shard_dim, fn):
    if shard_dim in (0, -2):
        return _lib.SHARD_ROWS
    if shard_dim in (1, -1):
        return _lib.SHARD_COLS
    raise InvalidArgumentError("%s: argument 'shard_dim': %r is not 0 (rows) or 1 (columns)"
                               % (fn, shard_dim))


def newton_schulz(x, comm=None, steps=5, coefficients="muon", shard_dim=0, out=None, *,
                  shard_sizes=None, eps=1e-7, safety=None, gram_dtype=None, algorithm="auto",
                  iteration="auto", gram_sum="auto", workspace_group=0):
    """Orthogonalize a sharded matrix: the polar factor U V^T of X = U S V^T,
    approximated by `steps` Newton-Schulz steps.

    x: this rank's shard (2-D float32/float16/bfloat16 tensor on comm.device);
       rows of the global matrix if shard_dim == 0, columns if 1. Rows may be
       strided (x[:, a:b] is fine); other layouts are rejected. A tensor of
       more dimensions is a batch of such shards (..., rows, cols), all of one
       global shape and sharded alike (shard_dim: each matrix's rows or
       columns): one batched plan orthogonalizes each matrix, and runs small
       ones together (strided-batched GEMMs). A batch runs in place on `out`
       after copying x there, so `out` must be x or not overlap it, and on an
       error it may hold that copy; `algorithm` applies per matrix as in
       tpla_ns_batch_plan_create ("local" assigns whole matrices to ranks).
    comm: a Communicator (None: this process alone, on x's device).
    coefficients: "muon", "muon5" (the 5-step quintic schedule), "polar_express",
       "cubic", or a list of (a, b, c) triples (then exactly `steps` of them).
    out: where to write (x itself: in place); default a new tensor.
    shard_sizes: the sharded size of every rank (needed only for the plan
       cache with uneven shards, see the module notes).
    eps, safety, gram_dtype (torch.float32 or x.dtype), algorithm ("auto",
       "gram_allreduce", "redistribute", "gather", "local", "gram_sharded"),
       iteration ("auto": the cost model's choice; "x"; or "gram": the steps
       applied to the Gram matrix between updates of X, fewer FLOPs for
       rectangular X), gram_sum ("auto": two ranks whose GPUs map each
       other sum the Gram by copy-engine pulls; "collective": by NCCL's
       all-reduce, which a CUDA graph can capture), workspace_group (0: the
       cached plan of each shape has a workspace of its own; g in
       [1, 2^31 - 1]: the plans of every shape called with g share one, at
       the largest size one has needed; their calls must follow each other
       in stream order, and x must be one matrix, not a batch; call every
       shape once before capturing any in a CUDA graph): as tpla_ns_desc_t.
    Runs on the current CUDA stream (returns without waiting for the GPU).
    Raises tpla.Error subclasses (InvalidArgumentError for bad input).
    """
    fn = "tpla.torch.newton_schulz"
    if comm is None:
        if not isinstance(x, torch.Tensor):
            raise InvalidArgumentError("%s: argument 'x' must be a torch.Tensor" % fn)
        comm = local_communicator(x.device)
    if isinstance(x, torch.Tensor) and x.dim() < 2:
        raise InvalidArgumentError("%s: argument 'x': expected a 2-D tensor or a batch of them "
                                   "(..., rows, cols), got %d-D with shape %s"
                                   % (fn, x.dim(), tuple(x.shape)))
    ndim = x.dim() if isinstance(x, torch.Tensor) else 2
    check_tensor(x, fn, "x", comm.device, ndim)
    not_differentiable(fn, x=x)
    dtype = tpla_dtype(x.dtype, fn, "x")
    batch = list(itertools.product(*(range(n) for n in x.shape[:-2])))  # [()] for one matrix
    xms = [matrix(x[i], fn, "x") for i in batch]
    shard = shard_of(shard_dim, fn)
    coef = coefficient_spec(coefficients, fn)
    c_int(steps, fn, "steps", -2**31)  # its range is the library's to check
    for arg, v in (("eps", eps), ("safety", safety)):  # numbers: a tensor would miss the cache
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise InvalidArgumentError("%s: argument '%s': %r must be a number" % (fn, arg, v))
    gram = _lib.FLOAT32 if gram_dtype is None else tpla_dtype(gram_dtype, fn, "gram_dtype")
    rows, cols = x.shape[-2:]
    local = (rows, cols)[shard]
    if shard_sizes is not None:
        shard_sizes = tuple(int(s) for s in shard_sizes)
        if len(shard_sizes) != comm.world_size or shard_sizes[comm.rank] != local:
            raise InvalidArgumentError(
                "%s: argument 'shard_sizes': %s must have one entry per rank (%d) with entry "
                "%d equal to this shard's size %d" % (fn, list(shard_sizes), comm.world_size,
                                                      comm.rank, local))
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    else:
        check_tensor(out, fn, "out", comm.device, ndim)
        if out.shape != x.shape or out.dtype != x.dtype:
            raise InvalidArgumentError("%s: argument 'out' is %s %s, x is %s %s" % (
                fn, tuple(out.shape), out.dtype, tuple(x.shape), x.dtype))
        if out.requires_grad:
            raise InvalidArgumentError("%s: argument 'out' requires grad; Newton-Schulz is not "
                                       "differentiable, write into a tensor that does not" % fn)
    oms = [matrix(out[i], fn, "out") for i in batch]
    if ndim > 2 and not same_view(out, x) and _spans_meet(out, x):  # (2-D: the C call checks)
        raise InvalidArgumentError("%s: argument 'out' overlaps 'x': pass x itself to work in "
                                   "place, or memory apart from it" % fn)
    if group_number(workspace_group, fn, "workspace_group") and ndim > 2:
        raise InvalidArgumentError(
            "%s: argument 'workspace_group': %r must be 0 for a batch (whose matrices share one "
            "plan's workspace)" % (fn, workspace_group))
    for table, value, arg in ((_lib.NS_ALGO, algorithm, "algorithm"),
                              (_lib.NS_ITERATION, iteration, "iteration"),
                              (_lib.NS_GRAM_SUM, gram_sum, "gram_sum")):
        _named(table, value, fn, arg)  # before the cache: a bad value must not reach a collective
    key = ("ns", tuple(x.shape), dtype, shard, steps, coef[2], float(eps), safety, gram,
           algorithm, iteration, gram_sum, shard_sizes, workspace_group)

    if not batch:  # a batch of no matrices
        return out

    def make(ctx):
        desc, keep = ns_desc(shard, rows, cols, dtype, steps, coef, eps, safety, gram, algorithm,
                             fn, iteration, gram_sum, workspace_group)
        if ndim == 2:
            return _core.NsPlan(ctx, desc)
        return _core.NsBatchPlan(ctx, [desc] * len(batch))

    plan = comm.plan(key, make)
    if ndim > 2:  # batches run in place: on out, holding x
        if not same_view(out, x):
            out.copy_(x)
        plan.execute(oms, comm.stream())
    elif same_view(out, x):
        plan.execute(xms[0], comm.stream())
    else:
        plan.execute_out(oms[0], xms[0], comm.stream())
    return written(out)


def _spans_meet(a, b):
    """True if the byte spans (first to one past the last element) of two
    non-empty tensors intersect."""
    if a.numel() == 0 or b.numel() == 0:
        return False

    def span(t):
        last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()
    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def global_shape(shape, shard_dim, shard_sizes):
    """The global (rows, cols) of a shard."""
    r, c = shape
    total = sum(shard_sizes)
    return (total, c) if shard_dim == 0 else (r, total)


def muon_scale(rows, cols, mode="original"):
    """The shape-based update scale: "original" max(1, rows/cols)^0.5,
    "match_rms_adamw" 0.2 * sqrt(max(rows, cols)), a number, or None (1)."""
    if mode is None:
        return 1.0
    if mode == "original":
        return math.sqrt(max(1.0, rows / cols))
    if mode == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return float(mode)
