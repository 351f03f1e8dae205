"""_tensors.py - torch tensors as tpla matrix views, and back.

A tpla_matrix_t is row-major with a leading dimension, so a 2-D tensor maps
to one without a copy when its columns are contiguous (stride(1) == 1) and
its rows do not overlap (stride(0) >= cols): contiguous tensors, row slices
and column slices (x[:, a:b]) all qualify. Anything else (a transpose, an
expanded tensor) is rejected with a message that says what to do.
Plan memory (the gathered operand of an AllGather+GEMM) comes back as a
tensor through public interfaces only: numpy on the CPU,
__cuda_array_interface__ on the GPU.
"""
import ctypes

import torch

from .. import _lib
from .._errors import InvalidArgumentError, InvalidUsageError

TORCH_TO_TPLA = {
    torch.float32: _lib.FLOAT32,
    torch.float16: _lib.FLOAT16,
    torch.bfloat16: _lib.BFLOAT16,
    torch.float64: _lib.FLOAT64,
    torch.uint8: _lib.UINT8,
}
# FP8 (torch >= 2.1): E4M3 is torch's "fn" variant (finite, NaN only), as OCP's.
for _name, _code in (("float8_e4m3fn", _lib.FLOAT8_E4M3), ("float8_e5m2", _lib.FLOAT8_E5M2)):
    if hasattr(torch, _name):
        TORCH_TO_TPLA[getattr(torch, _name)] = _code
TPLA_TO_TORCH = {v: k for k, v in TORCH_TO_TPLA.items()}


def tpla_dtype(dtype, fn, arg):
    """The tpla dtype of a torch dtype; the C library judges whether it is
    allowed where it is used (e.g. float64 for Newton-Schulz)."""
    try:
        return TORCH_TO_TPLA[dtype]
    except KeyError:
        raise InvalidArgumentError(
            "%s: argument '%s': dtype %s has no tpla equivalent (float32, float16, bfloat16; "
            "float8_e4m3fn and float8_e5m2 for GEMMs; float64 and uint8 for collectives)"
            % (fn, arg, dtype)) from None


def check_tensor(t, fn, arg, device, ndim=2):
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError("%s: argument '%s' must be a torch.Tensor, not %s"
                                   % (fn, arg, type(t).__name__))
    if t.dim() != ndim:
        raise InvalidArgumentError("%s: argument '%s': expected a %d-D tensor, got %d-D with "
                                   "shape %s" % (fn, arg, ndim, t.dim(), tuple(t.shape)))
    if t.device != device:
        raise InvalidArgumentError("%s: argument '%s' is on %s but the communicator works on %s"
                                   % (fn, arg, t.device, device))
    if t.is_sparse or t.layout != torch.strided:
        raise InvalidArgumentError("%s: argument '%s' must be a dense (strided) tensor"
                                   % (fn, arg))


def c_int(value, fn, arg, lo=0, hi=2**31 - 1):
    """An integer argument bound for a C int (or int64_t: hi = 2^63 - 1), checked here:
    ctypes would wrap a larger one silently and truncate a float."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidArgumentError("%s: argument '%s': %r must be an int in [%d, %d]"
                                   % (fn, arg, value, lo, hi))
    return value


def group_number(value, fn, arg):
    """A plan group's number (workspace_group, window_group): an int in [0, 2^31 - 1]."""
    return c_int(value, fn, arg)


def not_differentiable(fn, **tensors):
    """The functions are not differentiable: an input that requires grad, with grad mode
    on, is an error rather than a result that silently has no gradient."""
    if torch.is_grad_enabled():
        for arg, t in tensors.items():
            if t is not None and t.requires_grad:
                raise InvalidArgumentError(
                    "%s: argument '%s' requires grad, but this function is not "
                    "differentiable; use the tensor-parallel layers, or call it under "
                    "torch.no_grad()" % (fn, arg))


def written(t):
    """Tell autograd that the library wrote t in place (as a torch in-place op
    would), so that a backward needing t's old values raises instead of
    silently using the new ones."""
    if not t.is_inference():  # those have no version counter
        torch.autograd.graph.increment_version(t)
    return t


def matrix(t, fn, arg):
    """A tpla_matrix_t viewing the 2-D tensor t (no copy)."""
    rows, cols = t.shape
    s0, s1 = t.stride()
    if rows <= 1:
        ld = max(cols, 1)
        ok = cols <= 1 or s1 == 1
    elif cols <= 1:
        ld = s0
        ok = s0 >= 1
    else:
        ld = s0
        ok = s1 == 1 and s0 >= cols
    if not ok:
        raise InvalidArgumentError(
            "%s: argument '%s': strides %s of a %dx%d tensor are not row-major with a row "
            "stride >= cols (tpla reads rows with a leading dimension); pass .contiguous() or, "
            "for a transposed view, its transpose" % (fn, arg, (s0, s1), rows, cols))
    data = t.data_ptr() if t.numel() > 0 else None
    return _lib.Matrix(data, rows, cols, ld, tpla_dtype(t.dtype, fn, arg))


def same_view(a, b):
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype)


def stream_handle(device):
    """The current stream of `device` as the C API's void* (0 on the CPU)."""
    if device.type != "cuda":
        return 0
    return torch.cuda.current_stream(device).cuda_stream


def capturing(device):
    """Whether the current stream of `device` is being captured into a CUDA
    graph (torch.cuda.graph captures on its own stream, made current)."""
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return False
    if device.index is None or device.index == torch.cuda.current_device():
        return torch.cuda.is_current_stream_capturing()
    with torch.cuda.device(device):
        return torch.cuda.is_current_stream_capturing()


def refuse_capture(device, fn, needs, first="make the same call once outside the capture first "
                   "(same shapes, dtypes and options, on every rank)"):
    """Raise InvalidUsageError while `device`'s current stream is captured: `needs`
    (a plan, a context, state) is made by allocating and synchronizing, which a
    capture forbids, and would exist only in the graph."""
    if capturing(device):
        raise InvalidUsageError("%s: a CUDA graph is being captured on %s, but this call needs %s, "
                                "which cannot be made during a capture; %s"
                                % (fn, device, needs, first))


class _CudaArray:
    """A minimal __cuda_array_interface__ exporter (version 2: no stream sync)."""

    def __init__(self, ptr, n, typestr):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr,
                                         "data": (ptr, False), "version": 2, "strides": None}


def tensor_from_matrix(m, device):
    """A tensor aliasing the memory of a dense matrix view (no copy). It does
    not keep the memory alive: use it only while its owner allows."""
    dtype = TPLA_TO_TORCH[m.dtype]
    rows, cols, ld = m.rows, m.cols, m.ld
    n = rows * ld if rows > 0 else 0
    item = torch.empty((), dtype=dtype).element_size()
    typestr = {4: "<f4", 8: "<f8", 2: "<i2", 1: "|u1"}[item]
    if n == 0 or not m.data:
        flat = torch.empty(0, dtype=dtype, device=device)
    elif device.type == "cuda":
        with torch.cuda.device(device):
            flat = torch.as_tensor(_CudaArray(m.data, n, typestr), device=device).view(dtype)
    else:
        import numpy as np
        buf = (ctypes.c_uint8 * (n * item)).from_address(m.data)
        flat = torch.from_numpy(np.frombuffer(buf, dtype=np.dtype(typestr))).view(dtype)
    return flat.as_strided((rows, cols), (ld, 1)) if n > 0 else flat.view(rows, cols)
