"""_layers.py - tensor-parallel linear layers with sequence-parallel activations.

Megatron's layout: activations are [s, b, h] (sequence first) and, between
the layers, split along the sequence over the ranks of the communicator
(even split: the first s % P ranks hold one position more). A
ColumnParallelLinear holds rows out/P of W (its output features), a
RowParallelLinear columns in/P (its input features):

  pass      column-parallel                 row-parallel
  forward   y_p = AG(x) W_p^T + b_p         y = RS(x_p W_p^T) + b
  dgrad     dx = RS(dy_p W_p)               dx_p = AG(dy) W_p
  wgrad     dW_p = dy_p^T AG(x)             dW_p = AG(dy)^T x_p  (the gathered dy
                                            of the dgrad: no second all-gather)

AG = tpla AllGather+GEMM / plain row gather, RS = GEMM+ReduceScatter. With
accumulate_main_grad=True the weight gradient is added in fp32 to
weight.main_grad (created on first use) by tpla_gemm with beta = 1 and
weight.grad stays None (Muon(use_main_grad=True) reads main_grad).

Initialization: nn.Linear's distribution of the FULL weight and bias, each rank
keeping its part, from a seed the ranks agree on (Communicator.common_seed: rank
0's default generator), so the shards differ and a replicated bias is equal on
every rank; the full matrices do not depend on the rank count.
"""
import math

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .._errors import InvalidArgumentError
from ._overlap import ag_gemm, allgather_rows, gemm_rs, local_gemm
from ._tensors import refuse_capture


def even_split(total, parts):
    return [total // parts + (1 if r < total % parts else 0) for r in range(parts)]


_INIT_BLOCK = 256  # rows of a full matrix drawn from one generator


def _mix(seed, i):
    """A 63-bit seed for block i of the matrix seeded `seed` (splitmix64's finalizer)."""
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) >> 1


@torch.no_grad()
def _fill_part(out, seed, full_cols, row0, col0, bound):
    """out (2-D) = rows [row0, row0 + out.shape[0]) and columns [col0, ...) of a matrix
    with full_cols columns, uniform in [-bound, bound): drawn in blocks of _INIT_BLOCK
    whole rows, block b from its own generator (seed _mix(seed, b)), so every part of it
    is the same whichever rank draws it, and a rank draws only the blocks it needs."""
    rows = out.shape[0]
    for b in range(row0 // _INIT_BLOCK, (row0 + rows + _INIT_BLOCK - 1) // _INIT_BLOCK):
        g = torch.Generator(device=out.device).manual_seed(_mix(seed, b))
        block = torch.empty((_INIT_BLOCK, full_cols), dtype=torch.float32, device=out.device)
        block.uniform_(-bound, bound, generator=g)
        lo, hi = max(row0, b * _INIT_BLOCK), min(row0 + rows, (b + 1) * _INIT_BLOCK)
        out[lo - row0:hi - row0].copy_(
            block[lo - b * _INIT_BLOCK:hi - b * _INIT_BLOCK, col0:col0 + out.shape[1]])


def mark_tensor_parallel(param, dim, sizes):
    """Mark `param` as this rank's shard of a matrix split along `dim` (0: rows,
    1: columns) with every rank's sizes, for Muon's distributed NS."""
    sizes = tuple(int(s) for s in sizes)
    param.tpla_tp_dim = int(dim)
    param.tpla_tp_sizes = sizes
    return param


def _seq_rows(seq_total, inner, comm):
    """Every rank's activation rows: the even split of the sequence times the
    inner (batch) size."""
    return tuple(s * inner for s in even_split(seq_total, comm.world_size))


def _accumulate_wgrad(weight, dy, x, comm):
    """weight.main_grad (fp32) += dy^T x (tpla_gemm, half inputs, fp32 output)."""
    if getattr(weight, "main_grad", None) is None:
        # made in a capture, it would be zeroed by every replay (and live in the graph's pool)
        refuse_capture(comm.device, "tpla.torch layers (accumulate_main_grad)",
                       "a new weight.main_grad", "run one backward outside the capture first")
        weight.main_grad = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
    local_gemm(weight.main_grad, dy, x, comm, transpose_a=True, beta=1.0)


class _ColumnParallelFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, weight, bias, layer, inner, seq_total):
        comm = layer.comm
        m = None if seq_total is None else seq_total * inner
        y = ag_gemm(x2, weight, comm, transpose_b=True, bias=bias, m=m, **layer.overlap_options)
        rows = _seq_rows(y.shape[0] // inner if inner else 0, inner, comm)
        if rows[comm.rank] != x2.shape[0]:
            raise InvalidArgumentError(
                "ColumnParallelLinear: this rank holds %d rows, but the even sequence split of "
                "the gathered %d rows gives it %d (activations must be split evenly along the "
                "sequence, the first s %% P ranks holding one position more)"
                % (x2.shape[0], y.shape[0], rows[comm.rank]))
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.rows, ctx.has_bias = layer, rows, bias is not None
        return y

    @staticmethod
    @once_differentiable  # tpla's GEMMs build no graph: a second derivative is torch's error
    def backward(ctx, dy):
        x2, weight = ctx.saved_tensors
        layer, rows = ctx.layer, ctx.rows
        comm = layer.comm
        dy = dy.contiguous()
        dx = dw = db = None
        if ctx.needs_input_grad[0]:  # dx = RS(dy W_p), back to this rank's rows
            dx = gemm_rs(dy, weight, comm, transpose_b=False, local_rows=x2.shape[0],
                         **layer.overlap_options)
        if ctx.needs_input_grad[1] or layer.accumulate_main_grad:
            x_full = allgather_rows(x2.contiguous(), comm, rows=rows)  # dW_p = dy_p^T AG(x)
            if layer.accumulate_main_grad:
                _accumulate_wgrad(weight, dy, x_full, comm)
            else:
                dw = dy.t().mm(x_full)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy.sum(0)
        return dx, dw, db, None, None, None


class _RowParallelFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, weight, bias, layer, rows):
        comm = layer.comm
        y = gemm_rs(x2, weight, comm, transpose_b=True, bias=bias, local_rows=rows[comm.rank],
                    **layer.overlap_options)
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.rows, ctx.has_bias = layer, rows, bias is not None
        return y

    @staticmethod
    @once_differentiable  # tpla's GEMMs build no graph: a second derivative is torch's error
    def backward(ctx, dy):
        x2, weight = ctx.saved_tensors
        layer, rows = ctx.layer, ctx.rows
        comm = layer.comm
        dy = dy.contiguous()
        # dx_p = AG(dy) W_p; the plan keeps AG(dy) for the wgrad
        dx, g = ag_gemm(dy, weight, comm, transpose_b=False, m=sum(rows), return_gathered=True,
                        **layer.overlap_options)
        if g is None:  # no gathered operand kept: gather it plainly
            layer.fallback_gathers += 1
            g = allgather_rows(dy, comm, rows=rows)
        dw = db = None
        # read g now: the next call of this plan overwrites it
        if layer.accumulate_main_grad:
            _accumulate_wgrad(weight, g, x2.contiguous(), comm)
        elif ctx.needs_input_grad[1]:
            dw = g.t().mm(x2)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = g.sum(0)
        return (dx if ctx.needs_input_grad[0] else None), dw, db, None, None


class _ParallelLinear(nn.Module):
    def __init__(self, in_features, out_features, comm, bias, dtype, accumulate_main_grad,
                 mode, transport, chunks):
        super().__init__()
        self.comm = comm
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.accumulate_main_grad = bool(accumulate_main_grad)
        self.overlap_options = dict(mode=mode, transport=transport, chunks=chunks)
        self.fallback_gathers = 0
        self._dtype = dtype or torch.get_default_dtype()

    def reset_parameters(self):
        """nn.Linear's distribution (uniform, bound 1/sqrt(in_features)) of the full
        weight and bias, this rank's part of them (collective: the ranks agree on a
        seed). Layers that load their values (load_full) need not call it again."""
        bound = 1.0 / math.sqrt(self.in_features)
        seed = self.comm.common_seed()
        row0, col0, bias0 = self._part()
        _fill_part(self.weight, _mix(seed, 0), self.in_features, row0, col0, bound)
        if self.bias is not None:
            _fill_part(self.bias.view(1, -1), _mix(seed, 1), self.out_features, 0, bias0, bound)

    def _param(self, shape):
        return nn.Parameter(torch.empty(shape, dtype=self._dtype, device=self.comm.device))

    def _flatten(self, x, features, fn):
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-1] != features:
            raise InvalidArgumentError("%s: input must be [s, ..., %d] (sequence first), got %s"
                                       % (fn, features, tuple(getattr(x, "shape", ()))))
        x2 = x.reshape(-1, features)  # a view where it can: its rows may be strided
        return x2 if x2.stride(1) == 1 and x2.stride(0) >= features else x2.contiguous()


class ColumnParallelLinear(_ParallelLinear):
    """y_p = AG(x) W_p^T + b_p: input [s_local, ..., in_features] (sequence split
    over the ranks), output [s, ..., out_features / P] (this rank's features).
    The output features are split evenly (weight: out_features_local x in)."""

    def __init__(self, in_features, out_features, comm, bias=True, *, dtype=None,
                 accumulate_main_grad=False, mode="auto", transport="auto", chunks=0):
        super().__init__(in_features, out_features, comm, bias, dtype, accumulate_main_grad,
                         mode, transport, chunks)
        self.out_sizes = even_split(self.out_features, comm.world_size)
        self.out_offset = sum(self.out_sizes[:comm.rank])
        self.out_local = self.out_sizes[comm.rank]
        self.weight = self._param((self.out_local, self.in_features))
        mark_tensor_parallel(self.weight, 0, self.out_sizes)
        self.bias = self._param((self.out_local,)) if bias else None
        self.reset_parameters()

    def _part(self):
        """Where this rank's parts start: weight row, weight column, bias element."""
        return self.out_offset, 0, self.out_offset

    @torch.no_grad()
    def load_full(self, weight, bias=None):
        """Copy this rank's rows of a full (out_features x in_features) weight."""
        self.weight.copy_(weight[self.out_offset:self.out_offset + self.out_local])
        if bias is not None and self.bias is not None:
            self.bias.copy_(bias[self.out_offset:self.out_offset + self.out_local])

    def forward(self, x, seq_len=None):
        """x: [s_local, ..., in_features]. seq_len: the total sequence length,
        optional (the plan cache key; pass it when sequence lengths vary and
        split unevenly)."""
        x2 = self._flatten(x, self.in_features, "ColumnParallelLinear")
        inner = _prod(x.shape[1:-1])
        y = _ColumnParallelFn.apply(x2, self.weight, self.bias, self, inner, seq_len)
        return y.reshape((y.shape[0] // inner if inner else 0,) + tuple(x.shape[1:-1]) +
                         (self.out_local,))


class RowParallelLinear(_ParallelLinear):
    """y = RS(x_p W_p^T) + b: input [s, ..., in_features / P] (this rank's
    features), output [s_local, ..., out_features] (sequence split evenly).
    The input features are split evenly (weight: out_features x in_local)."""

    def __init__(self, in_features, out_features, comm, bias=True, *, dtype=None,
                 accumulate_main_grad=False, mode="auto", transport="auto", chunks=0):
        super().__init__(in_features, out_features, comm, bias, dtype, accumulate_main_grad,
                         mode, transport, chunks)
        self.in_sizes = even_split(self.in_features, comm.world_size)
        self.in_offset = sum(self.in_sizes[:comm.rank])
        self.in_local = self.in_sizes[comm.rank]
        self.weight = self._param((self.out_features, self.in_local))
        mark_tensor_parallel(self.weight, 1, self.in_sizes)
        self.bias = self._param((self.out_features,)) if bias else None
        self.reset_parameters()

    def _part(self):
        """Where this rank's parts start: weight row, weight column, bias element (the
        bias is replicated)."""
        return 0, self.in_offset, 0

    @torch.no_grad()
    def load_full(self, weight, bias=None):
        """Copy this rank's columns of a full (out_features x in_features) weight."""
        self.weight.copy_(weight[:, self.in_offset:self.in_offset + self.in_local])
        if bias is not None and self.bias is not None:
            self.bias.copy_(bias)

    def forward(self, x):
        """x: [s, ..., in_features / P] (the whole sequence)."""
        x2 = self._flatten(x, self.in_local, "RowParallelLinear")
        inner = _prod(x.shape[1:-1])
        rows = _seq_rows(x.shape[0], inner, self.comm)
        y = _RowParallelFn.apply(x2, self.weight, self.bias, self, rows)
        return y.reshape((rows[self.comm.rank] // inner if inner else 0,) +
                         tuple(x.shape[1:-1]) + (self.out_features,))


def _prod(dims):
    p = 1
    for d in dims:
        p *= int(d)
    return p
