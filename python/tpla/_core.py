"""_core.py - thin Python objects over the C handles, independent of PyTorch.

A `Context` owns its tpla context and whatever it was built on (a host
group, an NCCL communicator) and every plan created on it (until the plan's
own close()); `close()` destroys the plans, then the context, then the group
or communicator, in the order the C API requires. Whatever is still open at
interpreter exit is closed by an atexit hook. Plans are created collectively (every rank, same
order); their execute methods take `Matrix` views (raw addresses) and a
stream handle (an int, 0 for the default stream; the host ignores it).
"""
import atexit
import ctypes
import weakref

from . import _lib
from ._errors import InvalidArgumentError, InvalidUsageError, NotSupportedError, error_for


def lib():
    return _lib.library().lib


def failure(status):
    """The tpla.Error subclass of a failed status with tpla_last_error() (read it before
    another C call clears it)."""
    detail = lib().tpla_last_error()
    return error_for(status, detail.decode("utf-8", "replace") if detail else "")


def check(status):
    """Raise failure(status) if the status is one."""
    if status != 0:
        raise failure(status)


def config(timeout_s=None, gemm_workspace_bytes=0):
    """timeout_s: None or 0 for the library's default, else seconds > 0 (at least 1 ms)."""
    cfg = _lib.Config.new()
    if timeout_s is not None and (isinstance(timeout_s, bool) or
                                  not isinstance(timeout_s, (int, float)) or
                                  not 0 <= timeout_s < float("inf")):
        raise InvalidArgumentError("timeout %r must be None or a finite number of seconds "
                                   ">= 0 (0: the library's default)" % (timeout_s,))
    cfg.timeout_ms = 0 if not timeout_s else min(2**62, max(1, int(round(timeout_s * 1000))))
    cfg.gemm_workspace_bytes = int(gemm_workspace_bytes)
    return cfg


def features(device=-1):
    """tpla_get_features as a dict (device -1: build features only)."""
    f = _lib.Features.new()
    check(lib().tpla_get_features(ctypes.byref(f), int(device)))
    out = {name: getattr(f, name) for name, _ in _lib.Features._fields_ if name != "size"}
    out["device_name"] = f.device_name.decode("utf-8", "replace")
    return out


def status_string(status):
    return lib().tpla_status_string(int(status)).decode()


def nccl_unique_id():
    """A fresh NCCL unique id as 128 bytes (NotSupportedError without CUDA)."""
    uid = _lib.UniqueId()
    check(lib().tpla_nccl_get_unique_id(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), 128)


_live_contexts = weakref.WeakSet()


@atexit.register
def _close_all():
    """Close what is still open while the interpreter is intact (plans, then
    contexts), instead of in garbage collection at shutdown."""
    for ctx in list(_live_contexts):
        try:
            ctx.close()
        except Exception:
            pass


class _Plan:
    """A plan handle; destroyed by close() or by its context's close()."""

    _destroy = None
    _workspace = None  # tpla_*_plan_workspace_bytes

    def __init__(self, ctx, handle):
        self.ctx = ctx
        self.handle = handle
        ctx._plans.add(self)

    def close(self):
        if self.handle and self.ctx.handle:  # a plan must not outlive its context
            getattr(lib(), self._destroy)(self.handle)
        self.handle = None
        self.ctx._plans.discard(self)

    def _h(self):
        if not self.handle:
            raise InvalidUsageError("%s: the plan was closed" % type(self).__name__)
        return self.handle

    @property
    def workspace_bytes(self):
        """Bytes held now (tpla_*_plan_workspace_bytes); a group's member (a Newton-Schulz
        workspace_group, an overlap window_group): the group's, which a larger member's
        creation grows, plus its own."""
        b = ctypes.c_size_t()
        check(getattr(lib(), self._workspace)(self._h(), ctypes.byref(b)))
        return b.value

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Context:
    """One rank's tpla context. Build it with host_thread_group(), shared(),
    or nccl(); use as a context manager or call close()."""

    def __init__(self, handle, group=None, comm=None):
        self.handle = handle
        self._group = group
        self._comm = comm
        self._plans = set()  # closed before the context, whatever the collection order
        _live_contexts.add(self)
        rank, nranks, ex, dev = (ctypes.c_int() for _ in range(4))
        check(lib().tpla_ctx_get_info(handle, ctypes.byref(rank), ctypes.byref(nranks),
                                      ctypes.byref(ex), ctypes.byref(dev)))
        self.rank, self.nranks, self.device = rank.value, nranks.value, dev.value
        self.executor = "cuda" if ex.value == _lib.EXECUTOR_CUDA else "host"

    @classmethod
    def shared(cls, name, nranks, rank, timeout_s=None):
        """Rank `rank` of the cross-process host group `name` (collective)."""
        L = lib()
        if not _lib.library().has_shared_group:
            raise NotSupportedError("%s has no tpla_host_group_create_shared; rebuild libtpla"
                                    % _lib.library().path)
        cfg = config(timeout_s)
        group, ctx = ctypes.c_void_p(), ctypes.c_void_p()
        check(L.tpla_host_group_create_shared(ctypes.byref(group), name.encode(), int(nranks),
                                              int(rank), ctypes.byref(cfg)))
        try:
            check(L.tpla_ctx_create_host(ctypes.byref(ctx), group, int(rank), None))
        except Exception:
            L.tpla_host_group_destroy(group)
            raise
        return cls(ctx, group=group)

    @classmethod
    def nccl(cls, unique_id, nranks, rank, device, timeout_s=None):
        """Rank `rank` of a new NCCL communicator on `device` (collective)."""
        L = lib()
        if len(unique_id) != 128:
            raise InvalidArgumentError("Context.nccl: argument 'unique_id' must be 128 bytes")
        uid = _lib.UniqueId()
        ctypes.memmove(ctypes.addressof(uid), unique_id, 128)
        cfg = config(timeout_s)
        comm, ctx = ctypes.c_void_p(), ctypes.c_void_p()
        check(L.tpla_nccl_comm_create(ctypes.byref(comm), ctypes.byref(uid), int(nranks),
                                      int(rank), int(device), ctypes.byref(cfg)))
        try:
            check(L.tpla_ctx_create_nccl(ctypes.byref(ctx), comm, ctypes.byref(cfg)))
        except Exception:
            L.tpla_nccl_comm_destroy(comm)
            raise
        return cls(ctx, comm=comm)

    @classmethod
    def single_host(cls, timeout_s=None):
        """A one-rank host context (a thread group of one)."""
        L = lib()
        cfg = config(timeout_s)
        group, ctx = ctypes.c_void_p(), ctypes.c_void_p()
        check(L.tpla_host_group_create(ctypes.byref(group), 1, ctypes.byref(cfg)))
        try:
            check(L.tpla_ctx_create_host(ctypes.byref(ctx), group, 0, None))
        except Exception:
            L.tpla_host_group_destroy(group)
            raise
        return cls(ctx, group=group)

    def _h(self):
        if not self.handle:
            raise InvalidUsageError("the tpla context was closed")
        return self.handle

    def close(self):
        """Destroy the plans, the context, then its group/communicator."""
        if not self.handle:
            return
        for plan in list(self._plans):
            plan.close()
        L = lib()
        status = L.tpla_ctx_destroy(self.handle)
        # the message now: the group's or communicator's destroy clears it
        error = failure(status) if status != 0 else None
        self.handle = None
        if self._group:
            L.tpla_host_group_destroy(self._group)
            self._group = None
        if self._comm:
            L.tpla_nccl_comm_destroy(self._comm)
            self._comm = None
        if error is not None:
            raise error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def workspace_bytes(self):
        b = ctypes.c_size_t()
        check(lib().tpla_ctx_workspace_bytes(self._h(), ctypes.byref(b)))
        return b.value

    def _need_abort(self):
        if not _lib.library().has_abort:
            raise NotSupportedError("%s has no tpla_ctx_abort; rebuild libtpla"
                                    % _lib.library().path)

    def abort(self):
        """tpla_ctx_abort: stop this rank's work so that no rank hangs on it. Callable from
        any thread, also while another thread is blocked in a call on this context (the
        call then raises; ctypes releases the GIL during C calls). This rank's waits and its
        peers' waits for it end (host executor: the group breaks, RemoteError); every later
        call raises AbortedError here and RemoteError on the peers. Aborting a context that
        already failed does nothing. close() still works and is what to do next."""
        self._need_abort()
        check(lib().tpla_ctx_abort(self._h()))

    def async_error(self):
        """None while the context works; else the tpla.Error saying why it stopped
        (AbortedError: abort() was called here; RemoteError: a peer aborted or the group
        broke; TimeoutError, NcclError, CudaError: the CUDA executor's watchdog), returned,
        not raised. Cheap: poll it like ncclCommGetAsyncError."""
        self._need_abort()
        status = lib().tpla_ctx_get_async_error(self._h())
        if status == 0:
            return None
        detail = lib().tpla_last_error()
        return error_for(status, detail.decode("utf-8", "replace") if detail else "")

    def counters(self):
        """tpla_ctx_get_counters as a dict."""
        c = _lib.Counters.new()
        check(lib().tpla_ctx_get_counters(self._h(), ctypes.byref(c)))
        return {n: getattr(c, n) for n, _ in _lib.Counters._fields_ if n != "size"}

    # raw collectives (addresses and element counts)
    def allreduce(self, recv, send, count, dtype, stream=0):
        check(lib().tpla_allreduce(self._h(), recv, send, count, dtype, stream))

    def _per_rank(self, values, what, fn):
        """A list of one value per rank (C reads nranks of them, whatever the length)."""
        if len(values) != self.nranks:
            raise InvalidArgumentError("%s: argument '%s': %d values for %d ranks"
                                       % (fn, what, len(values), self.nranks))

    def allgatherv(self, recv, send, counts, dtype, stream=0):
        self._per_rank(counts, "counts", "tpla.Context.allgatherv")
        arr = (ctypes.c_size_t * len(counts))(*counts)
        check(lib().tpla_allgatherv(self._h(), recv, send, arr, dtype, stream))

    def broadcast(self, buf, count, dtype, root, stream=0):
        check(lib().tpla_broadcast(self._h(), buf, count, dtype, root, stream))

    def barrier(self, stream=0):
        check(lib().tpla_barrier(self._h(), stream))

    def gemm(self, d, a, op_a, b, op_b, alpha=1.0, beta=0.0, allow_tf32=False, stream=0,
             fp8=None):
        """tpla_gemm; fp8 is an _lib.Fp8Scaling for FP8 inputs (None: the defaults)."""
        args = _lib.GemmArgs.new(alpha=alpha, beta=beta, allow_tf32=int(bool(allow_tf32)))
        if fp8 is not None:
            args.fp8 = fp8
        check(lib().tpla_gemm(self._h(), d, a, op_a, b, op_b, ctypes.byref(args), stream))

    def allgather_rows(self, gathered, a_local, rows, stream=0):
        self._per_rank(rows, "rows", "tpla.Context.allgather_rows")
        arr = (ctypes.c_int64 * len(rows))(*rows)
        check(lib().tpla_allgather_rows(self._h(), gathered, a_local, arr, stream))

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class NsPlan(_Plan):
    _destroy = "tpla_ns_plan_destroy"
    _workspace = "tpla_ns_plan_workspace_bytes"

    def __init__(self, ctx, desc):
        h = ctypes.c_void_p()
        check(lib().tpla_ns_plan_create(ctypes.byref(h), ctx._h(), ctypes.byref(desc)))
        super().__init__(ctx, h)
        a = ctypes.c_int()
        check(lib().tpla_ns_plan_algorithm(h, ctypes.byref(a)))
        self.algorithm = {v: k for k, v in _lib.NS_ALGO.items()}[a.value]
        check(lib().tpla_ns_plan_iteration(h, ctypes.byref(a)))
        self.iteration = {v: k for k, v in _lib.NS_ITERATION.items()}[a.value]
        self.group = ("ns", desc.workspace_group) if desc.workspace_group else None

    def execute(self, x, stream=0):
        check(lib().tpla_ns_execute(self._h(), x, stream))

    def execute_out(self, out, x, stream=0):
        check(lib().tpla_ns_execute_out(self._h(), out, x, stream))


class NsBatchPlan(_Plan):
    _destroy = "tpla_ns_batch_plan_destroy"
    _workspace = "tpla_ns_batch_plan_workspace_bytes"

    def __init__(self, ctx, descs):
        h = ctypes.c_void_p()
        arr = (_lib.NsDesc * len(descs))(*descs)
        check(lib().tpla_ns_batch_plan_create(ctypes.byref(h), ctx._h(), len(descs), arr))
        super().__init__(ctx, h)
        self.count = len(descs)
        owner, it = ctypes.c_int(), ctypes.c_int()
        names = {v: k for k, v in _lib.NS_ITERATION.items()}
        self.owners, self.iterations = [], []
        for i in range(len(descs)):
            check(lib().tpla_ns_batch_plan_owner(h, i, ctypes.byref(owner)))
            self.owners.append(owner.value)
            check(lib().tpla_ns_batch_plan_iteration(h, i, ctypes.byref(it)))
            self.iterations.append(names[it.value])
        self.group = None

    def execute(self, xs, stream=0):
        if len(xs) != self.count:  # C reads count views, whatever the length
            raise InvalidArgumentError("tpla.NsBatchPlan.execute: argument 'xs': %d matrices "
                                       "for a plan of %d" % (len(xs), self.count))
        arr = (_lib.Matrix * len(xs))(*xs)
        check(lib().tpla_ns_batch_execute(self._h(), arr, stream))


class _OverlapPlan(_Plan):
    _kind = None

    @property
    def _workspace(self):
        return "tpla_%s_plan_workspace_bytes" % self._kind

    def __init__(self, ctx, desc):
        if not _lib.library().has_overlap:
            raise NotSupportedError("%s has no overlap API (tpla_%s_plan_create); rebuild libtpla"
                                    % (_lib.library().path, self._kind))
        h = ctypes.c_void_p()
        check(getattr(lib(), "tpla_%s_plan_create" % self._kind)(ctypes.byref(h), ctx._h(),
                                                                  ctypes.byref(desc)))
        super().__init__(ctx, h)
        info = self.info
        self.m, self.rows = info["m"], info["rows"]  # fixed at creation; read on every call
        self.group = ("overlap", desc.window_group) if desc.window_group else None

    @property
    def info(self):
        """tpla_*_plan_get_info as a dict, read when asked: a window group's member reports
        the group's workspace_bytes, which a larger member's creation grows."""
        info = _lib.OverlapInfo.new()
        check(getattr(lib(), "tpla_%s_plan_get_info" % self._kind)(self._h(), ctypes.byref(info)))
        return {n: getattr(info, n) for n, _ in _lib.OverlapInfo._fields_ if n != "size"}

    def __call__(self, d, a, b, alpha=1.0, beta=0.0, bias=None, stream=0, fp8=None,
                 b_version=0):
        """One call. fp8: an _lib.Fp8Scaling for FP8 plans (None: the defaults);
        b_version: see tpla_overlap_args_t (FP8 plans with op_b N reuse B's transpose)."""
        args = _lib.OverlapArgs.new(alpha=alpha, beta=beta, bias=bias, b_version=b_version)
        if fp8 is not None:
            args.fp8 = fp8
        check(getattr(lib(), "tpla_%s" % self._kind)(self._h(), d, a, b, ctypes.byref(args),
                                                     stream))


class AgGemmPlan(_OverlapPlan):
    _kind = "ag_gemm"
    _destroy = "tpla_ag_gemm_plan_destroy"

    def has_gathered(self):
        v = ctypes.c_int()
        check(lib().tpla_ag_gemm_plan_has_gathered(self._h(), ctypes.byref(v)))
        return bool(v.value)

    def gathered(self):
        m = _lib.Matrix()
        check(lib().tpla_ag_gemm_gathered(self._h(), ctypes.byref(m)))
        return m

    def gathered_scales(self):
        """FP8 plans: the address of the gathered view's A scales (executor memory,
        rank q's float at index q * _lib.FP8_SCALE_STRIDE), valid as gathered() is."""
        if not _lib.library().has_gathered_scales:
            raise NotSupportedError("%s has no tpla_ag_gemm_gathered_scales; rebuild libtpla"
                                    % _lib.library().path)
        p = ctypes.c_void_p()
        check(lib().tpla_ag_gemm_gathered_scales(self._h(), ctypes.byref(p)))
        return p.value


class GemmRsPlan(_OverlapPlan):
    _kind = "gemm_rs"
    _destroy = "tpla_gemm_rs_plan_destroy"


class GemmArPlan(_OverlapPlan):
    _kind = "gemm_ar"
    _destroy = "tpla_gemm_ar_plan_destroy"
