"""_lib.py - finding and loading libtpla, and its C API through ctypes.

The library is looked for, in order:
  1. $TPLA_LIBRARY (a file, or a directory holding libtpla.so); if set, it
     must load - there is no silent fallback;
  2. the package directory (pip install bundles it there);
  3. ../build*/libtpla.so relative to the repository this package sits in
     (python/tpla/../../build*), the most recently built first, sanitizer
     builds left out;
  4. the system loader path (libtpla.so.0, libtpla.so).
Structures mirror include/tpla.h field for field (tests/python compares
their layout with a C compiler's); every struct with a `size` field gets it
from `new()`.
"""
import ctypes
import os
from pathlib import Path

from ._errors import LibraryNotFoundError

c_int, c_int64, c_size_t, c_float, c_void_p, c_char_p = (
    ctypes.c_int, ctypes.c_int64, ctypes.c_size_t, ctypes.c_float, ctypes.c_void_p,
    ctypes.c_char_p)

# ---- enums (tpla.h) -----------------------------------------------------------

FLOAT32, FLOAT16, BFLOAT16, FLOAT64, UINT8 = 0, 1, 2, 3, 4
FLOAT8_E4M3, FLOAT8_E5M2 = 5, 6
FP8_ACCUM_SPLIT, FP8_ACCUM_FAST = 0, 1
FP8_SCALE_TENSOR, FP8_SCALE_MXFP8 = 0, 1
OP_N, OP_T = 0, 1
EXECUTOR_HOST, EXECUTOR_CUDA = 0, 1
SHARD_ROWS, SHARD_COLS = 0, 1
NS_MUON, NS_MUON_SCHEDULE5, NS_POLAR_EXPRESS, NS_CUBIC, NS_USER = 0, 1, 2, 3, 4
NS_ALGO = {"auto": 0, "gram_allreduce": 1, "redistribute": 2, "gather": 3, "local": 4,
           "gram_sharded": 5}
NS_ITERATION = {"auto": 2, "x": 0, "gram": 1}
NS_GRAM_SUM = {"auto": 0, "collective": 1}
OVERLAP_MODE = {"auto": 0, "overlap": 1, "serial": 2}
TRANSPORT = {"auto": 0, "peer": 1, "sendrecv": 2, "none": 3}


class _Sized(ctypes.Structure):
    """A struct whose first field is its size (set by new()). new() starts from the
    values of the header's *_INIT macro: zeros but for the class's _defaults."""

    _defaults = {}

    @classmethod
    def new(cls, **fields):
        s = cls()
        s.size = ctypes.sizeof(cls)
        for k, v in {**cls._defaults, **fields}.items():
            setattr(s, k, v)
        return s


class Matrix(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("rows", c_int64), ("cols", c_int64), ("ld", c_int64),
                ("dtype", c_int)]


class Config(_Sized):
    _fields_ = [("size", c_size_t), ("timeout_ms", c_int64), ("gemm_workspace_bytes", c_size_t)]


class Features(_Sized):
    _fields_ = [("size", c_size_t), ("version", c_int), ("cuda_executor", c_int),
                ("device_count", c_int), ("device", c_int), ("compute_capability", c_int),
                ("sm_count", c_int), ("fp8", c_int), ("mxfp8", c_int),
                ("cuda_runtime_version", c_int), ("cuda_driver_version", c_int),
                ("nccl_version", c_int), ("cublaslt_version", c_size_t),
                ("device_name", ctypes.c_char * 96)]
    _defaults = {"device": -1}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class Fp8Scaling(ctypes.Structure):
    """tpla_fp8_scaling_t; all zero is TPLA_FP8_SCALING_INIT (no scales, SPLIT, TENSOR).
    The scale pointers are addresses of one float in executor memory."""
    _fields_ = [("a_scale", c_void_p), ("b_scale", c_void_p), ("d_scale", c_void_p),
                ("d_amax", c_void_p), ("accum", c_int), ("scale_mode", c_int)]


class GemmArgs(_Sized):
    _fields_ = [("size", c_size_t), ("alpha", c_float), ("beta", c_float),
                ("allow_tf32", c_int), ("fp8", Fp8Scaling)]
    _defaults = {"alpha": 1.0}


class NsDesc(_Sized):
    _fields_ = [("size", c_size_t), ("shard", c_int), ("local_rows", c_int64),
                ("local_cols", c_int64), ("dtype", c_int), ("steps", c_int), ("preset", c_int),
                ("coefficients", ctypes.POINTER(c_float)), ("ncoefficients", c_size_t),
                ("eps", c_float), ("safety", c_float), ("gram_dtype", c_int),
                ("algorithm", c_int), ("iteration", c_int), ("gram_sum", c_int),
                ("workspace_group", c_int)]
    _defaults = {"steps": 5, "eps": 1e-7, "iteration": NS_ITERATION["auto"]}


class OverlapArgs(_Sized):
    _fields_ = [("size", c_size_t), ("alpha", c_float), ("beta", c_float), ("bias", c_void_p),
                ("fp8", Fp8Scaling), ("b_version", ctypes.c_uint64)]
    _defaults = {"alpha": 1.0}


_OVL_TAIL = [("op_b", c_int), ("dtype", c_int), ("d_dtype", c_int), ("bias", c_int),
             ("allow_tf32", c_int), ("mode", c_int), ("transport", c_int), ("chunks", c_int),
             ("window_group", c_int)]


class AgGemmDesc(_Sized):
    _fields_ = [("size", c_size_t), ("local_rows", c_int64), ("k", c_int64),
                ("n", c_int64)] + _OVL_TAIL


class GemmRsDesc(_Sized):
    _fields_ = [("size", c_size_t), ("m", c_int64), ("local_rows", c_int64), ("k", c_int64),
                ("n", c_int64)] + _OVL_TAIL
    _defaults = {"local_rows": -1}  # the even split


class GemmArDesc(_Sized):
    _fields_ = [("size", c_size_t), ("m", c_int64), ("k", c_int64), ("n", c_int64)] + _OVL_TAIL


class OverlapInfo(_Sized):
    _fields_ = [("size", c_size_t), ("mode", c_int), ("transport", c_int), ("chunks", c_int),
                ("m", c_int64), ("row_offset", c_int64), ("rows", c_int64),
                ("workspace_bytes", c_size_t)]


class Counters(_Sized):
    _fields_ = [("size", c_size_t), ("allgathers", ctypes.c_uint64),
                ("reduce_scatters", ctypes.c_uint64), ("allreduces", ctypes.c_uint64),
                ("overlap_calls", ctypes.c_uint64), ("gathered_views", ctypes.c_uint64)]


# ---- prototypes -------------------------------------------------------------------

P = ctypes.POINTER
_status = c_int
_CORE = {
    "tpla_status_string": (c_char_p, [c_int]),
    "tpla_last_error": (c_char_p, []),
    "tpla_version": (c_int, []),
    "tpla_dtype_size": (c_size_t, [c_int]),
    "tpla_dtype_name": (c_char_p, [c_int]),
    "tpla_get_features": (_status, [P(Features), c_int]),
    "tpla_nccl_get_unique_id": (_status, [P(UniqueId)]),
    "tpla_nccl_comm_create": (_status, [P(c_void_p), P(UniqueId), c_int, c_int, c_int,
                                        P(Config)]),
    "tpla_nccl_comm_destroy": (_status, [c_void_p]),
    "tpla_ctx_create_nccl": (_status, [P(c_void_p), c_void_p, P(Config)]),
    "tpla_host_group_create": (_status, [P(c_void_p), c_int, P(Config)]),
    "tpla_host_group_destroy": (_status, [c_void_p]),
    "tpla_ctx_create_host": (_status, [P(c_void_p), c_void_p, c_int, P(Config)]),
    "tpla_ctx_destroy": (_status, [c_void_p]),
    "tpla_ctx_get_info": (_status, [c_void_p, P(c_int), P(c_int), P(c_int), P(c_int)]),
    "tpla_ctx_workspace_bytes": (_status, [c_void_p, P(c_size_t)]),
    "tpla_allreduce": (_status, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "tpla_allgatherv": (_status, [c_void_p, c_void_p, c_void_p, P(c_size_t), c_int, c_void_p]),
    "tpla_reduce_scatterv": (_status, [c_void_p, c_void_p, c_void_p, P(c_size_t), c_int,
                                       c_void_p]),
    "tpla_broadcast": (_status, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "tpla_barrier": (_status, [c_void_p, c_void_p]),
    "tpla_gemm": (_status, [c_void_p, Matrix, Matrix, c_int, Matrix, c_int, P(GemmArgs),
                            c_void_p]),
    "tpla_ns_plan_create": (_status, [P(c_void_p), c_void_p, P(NsDesc)]),
    "tpla_ns_plan_destroy": (_status, [c_void_p]),
    "tpla_ns_plan_workspace_bytes": (_status, [c_void_p, P(c_size_t)]),
    "tpla_ns_plan_algorithm": (_status, [c_void_p, P(c_int)]),
    "tpla_ns_plan_iteration": (_status, [c_void_p, P(c_int)]),
    "tpla_ns_execute": (_status, [c_void_p, Matrix, c_void_p]),
    "tpla_ns_execute_out": (_status, [c_void_p, Matrix, Matrix, c_void_p]),
    "tpla_ns_batch_plan_create": (_status, [P(c_void_p), c_void_p, c_int, P(NsDesc)]),
    "tpla_ns_batch_plan_destroy": (_status, [c_void_p]),
    "tpla_ns_batch_plan_workspace_bytes": (_status, [c_void_p, P(c_size_t)]),
    "tpla_ns_batch_plan_owner": (_status, [c_void_p, c_int, P(c_int)]),
    "tpla_ns_batch_plan_iteration": (_status, [c_void_p, c_int, P(c_int)]),
    "tpla_ns_batch_execute": (_status, [c_void_p, P(Matrix), c_void_p]),
}
_SHARED = {
    "tpla_host_group_create_shared": (_status, [P(c_void_p), c_char_p, c_int, c_int,
                                                P(Config)]),
}
# Aborting a context (newer than the rest, so a library without it keeps the others)
_ABORT = {
    "tpla_ctx_abort": (_status, [c_void_p]),
    "tpla_ctx_get_async_error": (_status, [c_void_p]),
}
_OVERLAP = {}
for _k, _desc in (("ag_gemm", AgGemmDesc), ("gemm_rs", GemmRsDesc), ("gemm_ar", GemmArDesc)):
    _OVERLAP["tpla_%s_plan_create" % _k] = (_status, [P(c_void_p), c_void_p, P(_desc)])
    _OVERLAP["tpla_%s_plan_destroy" % _k] = (_status, [c_void_p])
    _OVERLAP["tpla_%s_plan_workspace_bytes" % _k] = (_status, [c_void_p, P(c_size_t)])
    _OVERLAP["tpla_%s_plan_get_info" % _k] = (_status, [c_void_p, P(OverlapInfo)])
    _OVERLAP["tpla_%s" % _k] = (_status, [c_void_p, Matrix, Matrix, Matrix, P(OverlapArgs),
                                          c_void_p])
_OVERLAP.update({
    "tpla_ag_gemm_plan_has_gathered": (_status, [c_void_p, P(c_int)]),
    "tpla_ag_gemm_gathered": (_status, [c_void_p, P(Matrix)]),
    "tpla_allgather_rows": (_status, [c_void_p, Matrix, Matrix, P(c_int64), c_void_p]),
    "tpla_ctx_get_counters": (_status, [c_void_p, P(Counters)]),
})
# FP8 AllGather+GEMM: the per-rank A scales of the gathered view (const float **; newer than
# the rest of the overlap API, so a library without it keeps the others)
_OVERLAP_FP8 = {
    "tpla_ag_gemm_gathered_scales": (_status, [c_void_p, P(c_void_p)]),
}
FP8_SCALE_STRIDE = 4  # TPLA_FP8_SCALE_STRIDE: floats between the scales of an array

EXPECTED_MAJOR, EXPECTED_MINOR = 0, 1


def _candidates():
    env = os.environ.get("TPLA_LIBRARY")
    if env:
        p = Path(env)
        return [p / "libtpla.so" if p.is_dir() else p], True
    here = Path(__file__).resolve().parent
    found = sorted(here.glob("libtpla.so*"))
    repo = here.parent.parent
    if (repo / "include" / "tpla.h").exists():
        builds = [p for p in repo.glob("build*/libtpla.so") if p.exists() and not _sanitized(p)]
        found += sorted(builds, key=lambda p: p.stat().st_mtime, reverse=True)
    return found + ["libtpla.so.0", "libtpla.so"], False


def _sanitized(lib):
    """A build configured with TPLA_SANITIZE=ON: loading its library into an
    interpreter without the sanitizer runtime ends the process (ASan aborts)
    instead of raising, so it is never tried unasked (TPLA_LIBRARY still can)."""
    try:
        cache = (lib.parent / "CMakeCache.txt").read_text()
    except OSError:
        return False
    for line in cache.splitlines():
        if line.startswith("TPLA_SANITIZE:"):
            value = line.split("=", 1)[1].strip().upper()  # CMake's false constants:
            return not (value in ("", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND")
                        or value.endswith("-NOTFOUND"))
    return False


class Library:
    """The loaded libtpla: `lib` (ctypes.CDLL with prototypes), `path`, and
    which optional parts it has (`has_shared_group`, `has_overlap`,
    `has_gathered_scales`, `has_abort`)."""

    def __init__(self):
        candidates, explicit = _candidates()
        tried = []
        self.lib = None
        for c in candidates:
            try:
                self.lib = ctypes.CDLL(str(c))
                self.path = str(c)
                break
            except OSError as e:
                tried.append("%s (%s)" % (c, e))
                if explicit:
                    break
        if self.lib is None:
            raise LibraryNotFoundError(
                "cannot load libtpla; tried:\n  " + "\n  ".join(tried) +
                "\nBuild it (cmake -S <repo> -B build && cmake --build build) and set "
                "TPLA_LIBRARY=/path/to/libtpla.so, or `pip install ./python` from the repository.")
        for name, (res, args) in _CORE.items():
            self._bind(name, res, args, required=True)
        # bind every symbol of a group (a list, not all()'s short circuit), then judge it
        def bind_all(group):
            return all([self._bind(n, r, a) for n, (r, a) in group.items()])
        self.has_shared_group = bind_all(_SHARED)
        self.has_overlap = bind_all(_OVERLAP)
        self.has_gathered_scales = bind_all(_OVERLAP_FP8)
        self.has_abort = bind_all(_ABORT)
        v = self.lib.tpla_version()
        self.version = (v // 10000, v // 100 % 100, v % 100)
        if self.version[:2] != (EXPECTED_MAJOR, EXPECTED_MINOR):
            raise LibraryNotFoundError(
                "%s is libtpla %d.%d.%d but this package needs %d.%d.x; point TPLA_LIBRARY at a "
                "matching build" % ((self.path,) + self.version + (EXPECTED_MAJOR,
                                                                   EXPECTED_MINOR)))

    def _bind(self, name, res, args, required=False):
        fn = getattr(self.lib, name, None)
        if fn is None:
            if required:
                raise LibraryNotFoundError("%s lacks the symbol %s: an old or foreign build; "
                                           "rebuild it" % (self.path, name))
            return False
        fn.restype = res
        fn.argtypes = args
        return True


_library = None


def library():
    """The process's Library (loaded on first use)."""
    global _library
    if _library is None:
        _library = Library()
    return _library
