"""_overlap.py - the overlapped tensor-parallel GEMMs on tensors.

    ag_gemm(a_local, b, comm)   D = allgather_rows(a_local) @ op(b)   (m x n, every rank)
    gemm_rs(a, b, comm)         D_local = reduce_scatter_rows(a @ op(b))   (this rank's rows)
    gemm_ar(a, b, comm)         D = allreduce(a @ op(b))
    allgather_rows(a_local, comm)   the plain gather (when no gathered operand is kept)

op(b) is b^T when transpose_b (the default: b is a weight W stored n x k as
in torch.nn.Linear, y = x W^T), else b. Each plan is cached on the
communicator per shapes, dtypes and options; plan creation is collective,
so every rank must make the same calls in the same order, and hit or miss
the cache together. Row counts may differ between ranks; the cache key of
ag_gemm is this rank's row count unless `m` (the global row count) is
given - pass it when one rank's count could belong to two different global
sizes in one run (uneven splits of varying lengths).

ag_gemm(..., return_gathered=True) also returns the gathered A as a tensor
aliasing the plan's buffer (no copy, no second all-gather): read it before
the next call of the same plan (on the GPU, in stream order) and never
write into it. It is None when the plan holds no gathered operand.

FP8 (a float8_e4m3fn / float8_e5m2 A, B either FP8 type but not both E5M2),
as torch._scaled_mm: scale_a and scale_b are float32 tensors of one element
(shape () or (1,)) on the communicator's device, read by pointer when the
GEMMs run (None: 1.0), so D = (scale_a a) @ op(scale_b b); use_fast_accum
picks fast accumulation (forward) over split (the default, backward); the
output is bf16 unless out_dtype says fp16 or fp32 (never FP8: reductions add
partials in the output type). Each rank passes its own scales: ag_gemm's
scale_a travels with that rank's rows. b_version (nonzero) tells FP8 plans
with transpose_b=False that b holds what it held at the last call with the
same b pointer and version, so its staged transpose is reused (e.g. the
weight's update count; 0: transpose every call). ag_gemm(...,
return_gathered=True) on FP8 returns (D, gathered, scales): the gathered
FP8 bytes and a float32 view of one scale per rank (rank q's rows were
quantized with scales[q]), both aliasing the plan's buffer as above.

window_group=g (g > 0) makes the plan share its buffers with the
communicator's other plans of group g (tpla's window groups): a layer stack
then holds one set, the largest plan's, instead of one per shape. The
group's calls must come in the same order on every rank, on one stream (as
here: the current stream); a gathered view then lasts until the group's
next call, of any of its plans.
"""
import operator

import torch

from .. import _core, _lib
from .._errors import InvalidArgumentError
from ._tensors import (c_int, check_tensor, group_number, matrix, not_differentiable,
                       tensor_from_matrix, tpla_dtype, written)

_FP8 = (_lib.FLOAT8_E4M3, _lib.FLOAT8_E5M2)
_UINT64_LIMIT = 1 << 64


def _options(mode, transport, chunks, window_group, fn):
    group_number(window_group, fn, "window_group")
    c_int(chunks, fn, "chunks")
    try:
        return _lib.OVERLAP_MODE[mode], _lib.TRANSPORT[transport], chunks
    except KeyError:
        raise InvalidArgumentError("%s: mode must be one of %s and transport one of %s" % (
            fn, list(_lib.OVERLAP_MODE), list(_lib.TRANSPORT))) from None


def _rows_key(rows, mine, comm, fn, what="rows"):
    rows = tuple(int(r) for r in rows)
    if len(rows) != comm.world_size or rows[comm.rank] != mine:
        raise InvalidArgumentError("%s: argument '%s': %s must have one entry per rank (%d) "
                                   "with entry %d equal to this rank's %d rows"
                                   % (fn, what, list(rows), comm.world_size, comm.rank, mine))
    return rows


def _out(out, shape, dtype, comm, fn):
    if out is None:
        return torch.empty(shape, dtype=dtype, device=comm.device)
    check_tensor(out, fn, "out", comm.device)
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype:
        raise InvalidArgumentError("%s: argument 'out' is %s %s, expected %s %s"
                                   % (fn, tuple(out.shape), out.dtype, tuple(shape), dtype))
    return out


def _bias(bias, n, dtype, comm, fn):
    if bias is None:
        return None
    check_tensor(bias, fn, "bias", comm.device, ndim=1)
    not_differentiable(fn, bias=bias)
    if bias.shape[0] != n or bias.dtype != dtype or not bias.is_contiguous():
        raise InvalidArgumentError("%s: argument 'bias' must be a contiguous vector of %d "
                                   "elements of %s, got %s %s" % (fn, n, dtype,
                                                                  tuple(bias.shape), bias.dtype))
    return bias.data_ptr()


def _scale(t, comm, fn, arg):
    """The address of a one-element float32 scale tensor (None: no scale, 1.0)."""
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError("%s: argument '%s' must be a float32 torch.Tensor of one "
                                   "element (or None), not %s" % (fn, arg, type(t).__name__))
    if t.dtype != torch.float32 or t.dim() > 1 or t.numel() != 1:
        raise InvalidArgumentError("%s: argument '%s' must be a float32 tensor of one element "
                                   "(shape () or (1,)), got %s %s"
                                   % (fn, arg, t.dtype, tuple(t.shape)))
    if t.device != comm.device:
        raise InvalidArgumentError("%s: argument '%s' is on %s but the communicator works on %s"
                                   % (fn, arg, t.device, comm.device))
    if t.is_sparse or t.layout != torch.strided:
        raise InvalidArgumentError("%s: argument '%s' must be a dense (strided) tensor"
                                   % (fn, arg))
    if comm.device.type == "cuda" and t.data_ptr() % 16:
        raise InvalidArgumentError("%s: argument '%s': the scale's address must be 16-byte "
                                   "aligned for cuBLASLt (a view into a larger tensor is not); "
                                   "pass a tensor of its own (.clone())" % (fn, arg))
    return t.data_ptr()


def _fp8_args(fp8, scale_a, scale_b, use_fast_accum, b_version, comm, fn):
    """The per-call tpla_fp8_scaling_t (None for non-FP8 plans) and b_version.
    Scales are per call: nothing here enters a plan's cache key."""
    try:
        version = operator.index(b_version)
    except TypeError:
        version = -1
    if not 0 <= version < _UINT64_LIMIT:
        raise InvalidArgumentError("%s: argument 'b_version' must be an int in [0, 2**64), got "
                                   "%r" % (fn, b_version))
    if not fp8:
        for arg, given in (("scale_a", scale_a is not None), ("scale_b", scale_b is not None),
                           ("use_fast_accum", bool(use_fast_accum))):
            if given:
                raise InvalidArgumentError("%s: argument '%s' is only for float8 inputs "
                                           "(float8_e4m3fn, float8_e5m2)" % (fn, arg))
        return None, version
    scaling = _lib.Fp8Scaling(a_scale=_scale(scale_a, comm, fn, "scale_a"),
                              b_scale=_scale(scale_b, comm, fn, "scale_b"),
                              accum=_lib.FP8_ACCUM_FAST if use_fast_accum
                              else _lib.FP8_ACCUM_SPLIT)
    return scaling, version


def _common(a, b, comm, transpose_b, out_dtype, out, beta, fn):
    if out is None and beta != 0:  # D = ... + beta * D would read uninitialized memory
        raise InvalidArgumentError("%s: argument 'beta' is %r, but no 'out' is given for it to "
                                   "scale" % (fn, beta))
    check_tensor(a, fn, "a", comm.device)
    check_tensor(b, fn, "b", comm.device)
    not_differentiable(fn, a=a, b=b, out=out)
    dt = tpla_dtype(a.dtype, fn, "a")
    if out_dtype is not None:
        d_dtype = out_dtype
    else:  # FP8 plans output bf16 by default (as torch._scaled_mm); others the input dtype
        d_dtype = torch.bfloat16 if dt in _FP8 else a.dtype
    ddt = tpla_dtype(d_dtype, fn, "out_dtype")
    n = b.shape[0] if transpose_b else b.shape[1]
    kb = b.shape[1] if transpose_b else b.shape[0]
    return dt, d_dtype, ddt, n, kb


def ag_gemm(a_local, b, comm, *, transpose_b=True, bias=None, out=None, alpha=1.0, beta=0.0,
            out_dtype=None, m=None, return_gathered=False, mode="auto", transport="auto",
            chunks=0, allow_tf32=False, scale_a=None, scale_b=None, use_fast_accum=False,
            b_version=0, window_group=0):
    """D (m x n) = alpha * allgather_rows(a_local) @ op(b) + beta * out + bias.
    a_local: this rank's rows (local_rows x k; counts may differ between
    ranks); m: the global row count, optional (plan cache key, checked).
    FP8: scale_a (this rank's), scale_b, use_fast_accum, b_version as in the
    module's docstring. Returns D, or (D, gathered) with return_gathered,
    (D, gathered, scales) for FP8 inputs."""
    fn = "tpla.torch.ag_gemm"
    dt, d_dtype, ddt, n, kb = _common(a_local, b, comm, transpose_b, out_dtype, out, beta, fn)
    fp8, b_version = _fp8_args(dt in _FP8, scale_a, scale_b, use_fast_accum, b_version, comm,
                               fn)
    lr, k = a_local.shape
    m_mode, m_xport, chunks = _options(mode, transport, chunks, window_group, fn)
    m = None if m is None else c_int(m, fn, "m", 0, 2**63 - 1)
    key = ("ag", lr, k, n, bool(transpose_b), dt, ddt, bias is not None, bool(allow_tf32),
           m_mode, m_xport, chunks, m, window_group)

    def make(ctx):
        desc = _lib.AgGemmDesc.new(local_rows=lr, k=k, n=n,
                                   op_b=_lib.OP_T if transpose_b else _lib.OP_N, dtype=dt,
                                   d_dtype=ddt, bias=int(bias is not None),
                                   allow_tf32=int(bool(allow_tf32)), mode=m_mode,
                                   transport=m_xport, chunks=chunks,
                                   window_group=int(window_group))
        return _core.AgGemmPlan(ctx, desc)

    plan = comm.plan(key, make)
    if m is not None and plan.m != m:
        raise InvalidArgumentError("%s: argument 'm': %d, but the ranks' rows add up to %d"
                                   % (fn, m, plan.m))
    d = _out(out, (plan.m, n), d_dtype, comm, fn)
    bias_ptr = _bias(bias, n, d_dtype, comm, fn)
    plan(matrix(d, fn, "out"), matrix(a_local, fn, "a_local"), matrix(b, fn, "b"), alpha, beta,
         bias_ptr, comm.stream(), fp8=fp8, b_version=b_version)
    written(d)
    if not return_gathered:
        return d
    if fp8 is None:
        return d, gathered(plan, comm)
    return d, gathered(plan, comm), gathered_scales(plan, comm)


def gathered(plan, comm):
    """The gathered A of `plan`'s last call as a tensor view, or None."""
    if not plan.has_gathered():
        return None
    return tensor_from_matrix(plan.gathered(), comm.device)


def gathered_scales(plan, comm):
    """The A scales of an FP8 `plan`'s gathered view (its last call) as a
    float32 tensor of one element per rank (a strided view of the plan's
    array, entries TPLA_FP8_SCALE_STRIDE floats apart), or None."""
    if not plan.has_gathered():
        return None
    p = comm.world_size
    view = _lib.Matrix(plan.gathered_scales(), p, _lib.FP8_SCALE_STRIDE, _lib.FP8_SCALE_STRIDE,
                       _lib.FLOAT32)
    return tensor_from_matrix(view, comm.device)[:, 0]


def gemm_rs(a, b, comm, *, transpose_b=True, bias=None, out=None, alpha=1.0, beta=0.0,
            out_dtype=None, local_rows=None, mode="auto", transport="auto", chunks=0,
            allow_tf32=False, scale_a=None, scale_b=None, use_fast_accum=False, b_version=0,
            window_group=0):
    """D_local = alpha * [reduce_scatter_rows(sum over ranks of a @ op(b))]_rank
    + beta * out + bias. a: m x k (this rank's k); local_rows: this rank's
    output rows (the ranks' must add up to m; default on every rank: m split
    evenly, the first m % P ranks one row more; FP8 inputs with m a multiple of
    16: in units of 16 rows, the first (m / 16) % P ranks 16 more). FP8: scale_a, scale_b
    (this rank's), use_fast_accum, b_version as in the module's docstring."""
    fn = "tpla.torch.gemm_rs"
    dt, d_dtype, ddt, n, kb = _common(a, b, comm, transpose_b, out_dtype, out, beta, fn)
    fp8, b_version = _fp8_args(dt in _FP8, scale_a, scale_b, use_fast_accum, b_version, comm,
                               fn)
    m, k = a.shape
    lr = -1 if local_rows is None else c_int(local_rows, fn, "local_rows", 0, 2**63 - 1)
    m_mode, m_xport, chunks = _options(mode, transport, chunks, window_group, fn)
    key = ("rs", m, lr, k, n, bool(transpose_b), dt, ddt, bias is not None, bool(allow_tf32),
           m_mode, m_xport, chunks, int(window_group))

    def make(ctx):
        desc = _lib.GemmRsDesc.new(m=m, local_rows=lr, k=k,
                                   n=n, op_b=_lib.OP_T if transpose_b else _lib.OP_N, dtype=dt,
                                   d_dtype=ddt, bias=int(bias is not None),
                                   allow_tf32=int(bool(allow_tf32)), mode=m_mode,
                                   transport=m_xport, chunks=chunks,
                                   window_group=int(window_group))
        return _core.GemmRsPlan(ctx, desc)

    plan = comm.plan(key, make)
    d = _out(out, (plan.rows, n), d_dtype, comm, fn)
    bias_ptr = _bias(bias, n, d_dtype, comm, fn)
    plan(matrix(d, fn, "out"), matrix(a, fn, "a"), matrix(b, fn, "b"), alpha, beta, bias_ptr,
         comm.stream(), fp8=fp8, b_version=b_version)
    return written(d)


def gemm_ar(a, b, comm, *, transpose_b=True, bias=None, out=None, alpha=1.0, beta=0.0,
            out_dtype=None, mode="auto", transport="auto", chunks=0, allow_tf32=False,
            scale_a=None, scale_b=None, use_fast_accum=False, b_version=0, window_group=0):
    """D (m x n) = alpha * allreduce(a @ op(b)) + beta * out + bias, every rank.
    FP8: scale_a, scale_b (this rank's), use_fast_accum, b_version as in the
    module's docstring."""
    fn = "tpla.torch.gemm_ar"
    dt, d_dtype, ddt, n, kb = _common(a, b, comm, transpose_b, out_dtype, out, beta, fn)
    fp8, b_version = _fp8_args(dt in _FP8, scale_a, scale_b, use_fast_accum, b_version, comm,
                               fn)
    m, k = a.shape
    m_mode, m_xport, chunks = _options(mode, transport, chunks, window_group, fn)
    key = ("ar", m, k, n, bool(transpose_b), dt, ddt, bias is not None, bool(allow_tf32),
           m_mode, m_xport, chunks, int(window_group))

    def make(ctx):
        desc = _lib.GemmArDesc.new(m=m, k=k, n=n, op_b=_lib.OP_T if transpose_b else _lib.OP_N,
                                   dtype=dt, d_dtype=ddt, bias=int(bias is not None),
                                   allow_tf32=int(bool(allow_tf32)), mode=m_mode,
                                   transport=m_xport, chunks=chunks,
                                   window_group=int(window_group))
        return _core.GemmArPlan(ctx, desc)

    plan = comm.plan(key, make)
    d = _out(out, (m, n), d_dtype, comm, fn)
    bias_ptr = _bias(bias, n, d_dtype, comm, fn)
    plan(matrix(d, fn, "out"), matrix(a, fn, "a"), matrix(b, fn, "b"), alpha, beta, bias_ptr,
         comm.stream(), fp8=fp8, b_version=b_version)
    return written(d)


def allgather_rows(a_local, comm, *, rows=None, out=None):
    """The rows of every rank's a_local stacked in rank order (one all-gather).
    rows: every rank's row count (default: all equal to a_local's)."""
    fn = "tpla.torch.allgather_rows"
    check_tensor(a_local, fn, "a_local", comm.device)
    not_differentiable(fn, a_local=a_local, out=out)
    tpla_dtype(a_local.dtype, fn, "a_local")
    lr, k = a_local.shape
    if rows is None:
        rows = (lr,) * comm.world_size
    rows = _rows_key(rows, lr, comm, fn)
    g = _out(out, (sum(rows), k), a_local.dtype, comm, fn)
    if not g.is_contiguous():
        raise InvalidArgumentError("%s: argument 'out' must be contiguous" % fn)
    comm.context.allgather_rows(matrix(g, fn, "out"), matrix(a_local, fn, "a_local"), rows,
                                comm.stream())
    return written(g)


def local_gemm(d, a, b, comm, *, transpose_a=False, transpose_b=False, alpha=1.0, beta=0.0,
               allow_tf32=False):
    """d = alpha * op(a) @ op(b) + beta * d on this rank (tpla_gemm): d may be
    float32 while a and b are half (e.g. accumulating a wgrad into an fp32
    main grad with beta = 1)."""
    fn = "tpla.torch.local_gemm"
    for t, name in ((d, "d"), (a, "a"), (b, "b")):
        check_tensor(t, fn, name, comm.device)
    not_differentiable(fn, d=d, a=a, b=b)
    comm.context.gemm(matrix(d, fn, "d"), matrix(a, fn, "a"),
                      _lib.OP_T if transpose_a else _lib.OP_N, matrix(b, fn, "b"),
                      _lib.OP_T if transpose_b else _lib.OP_N, alpha, beta, allow_tf32,
                      comm.stream())
    return written(d)
