"""_comm.py - Communicator: a tpla context over the ranks of a torch.distributed
process group.

CUDA (NCCL): rank 0 of the group makes an NCCL unique id with tpla, the
group's ranks receive it through torch.distributed.broadcast_object_list,
and each creates tpla's own NCCL communicator and context on its current
CUDA device (tpla never touches PyTorch's communicators).
CPU (gloo or any backend): the ranks agree on a random name through
torch.distributed.all_gather_object and join a cross-process host group
in POSIX shared memory (tpla_host_group_create_shared); every rank must
then be on the same machine, which is checked.

The communicator caches the plans of the functions that use it (keyed by
shape, dtype and options) and destroys them in close(). Plan creation is
collective, so every rank must make the same sequence of calls.
CUDA graphs: the functions' calls can be captured (torch.cuda.graph) once
their plans exist; a plan (or a context) is never made during a capture,
so a cache miss there raises InvalidUsageError: make each call once
outside the capture first. Graphs replay into the plans' buffers: keep the
communicator and its plans (no clear_plans(), no close()) while they are
replayed.
"""
import os
import socket
import uuid

import torch

from .. import _core
from .._errors import Error, InvalidArgumentError, InvalidUsageError, NotSupportedError, RemoteError
from ._tensors import refuse_capture


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


class Communicator:
    """tpla's context over `group` (default: the world group; without an
    initialized torch.distributed, a single rank).

    device: where tensors live - "cuda" / torch.device("cuda", i) (NCCL), or
    "cpu" (host executor). Default: the current CUDA device when CUDA is
    available and the group's backend includes NCCL, else the CPU.
    timeout: seconds any collective may wait for the other ranks.
    Use it as a context manager, or call close() on every rank.
    """

    def __init__(self, group=None, *, device=None, timeout=300.0):
        import torch.distributed as dist
        self._ctx = None
        self._plans = {}
        self.timeout = timeout
        distributed = dist.is_available() and dist.is_initialized()
        if group is not None and not distributed:
            raise InvalidUsageError("tpla.torch.Communicator: a group was given but "
                                    "torch.distributed is not initialized")
        self.group = group
        if distributed:
            self.rank = dist.get_rank(group)
            self.world_size = dist.get_world_size(group)
            backend = str(dist.get_backend(group)).lower()
        else:
            self.rank, self.world_size, backend = 0, 1, ""
        self.device = self._pick_device(device, backend)
        refuse_capture(self.device, "tpla.torch.Communicator", "a new tpla context",
                       "create communicators outside the capture")
        if self.device.type == "cuda":
            self._ctx = self._make_nccl(distributed)
        elif self.device.type == "cpu":
            self._ctx = self._make_host(distributed)
        else:
            raise InvalidArgumentError("tpla.torch.Communicator: argument 'device': %s is "
                                       "neither cpu nor cuda" % self.device)
        self.executor = self._ctx.executor

    shm_name = None  # the host group's segment name (CPU, several ranks)

    @classmethod
    def local(cls, device="cpu", timeout=300.0):
        """A one-rank communicator (no torch.distributed involved)."""
        self = cls.__new__(cls)
        self._plans = {}
        self.timeout = timeout
        self.group = None
        self.rank, self.world_size = 0, 1
        self.device = cls._pick_device(device, "")
        refuse_capture(self.device, "tpla.torch.Communicator.local", "a new tpla context",
                       "make the same call once outside the capture first (comm=None uses "
                       "one cached per device)")
        if self.device.type == "cpu":
            self._ctx = _core.Context.single_host(timeout)
        else:
            with torch.cuda.device(self.device):  # tpla makes the device current
                self._ctx = _core.Context.nccl(_core.nccl_unique_id(), 1, 0, self.device.index,
                                               timeout)
        self.executor = self._ctx.executor
        return self

    @staticmethod
    def _pick_device(device, backend):
        if device is None:
            device = "cuda" if "nccl" in backend and torch.cuda.is_available() else "cpu"
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        return device

    # ---- setup ---------------------------------------------------------------

    def _src(self):
        import torch.distributed as dist
        return 0 if self.group is None else dist.get_global_rank(self.group, 0)

    def _make_nccl(self, distributed):
        import torch.distributed as dist
        payload = None
        if self.rank == 0:
            try:
                payload = ("id", _core.nccl_unique_id())
            except Error as e:
                payload = ("error", str(e))
        if distributed and self.world_size > 1:
            box = [payload]
            nccl = "nccl" in str(dist.get_backend(self.group)).lower()
            dist.broadcast_object_list(box, src=self._src(), group=self.group,
                                       device=self.device if nccl else None)
            payload = box[0]
        if payload[0] == "error":
            if self.rank == 0:
                raise NotSupportedError("tpla.torch.Communicator: %s" % payload[1])
            raise RemoteError("tpla.torch.Communicator: rank 0 could not make an NCCL id: %s"
                              % payload[1])
        with torch.cuda.device(self.device):  # tpla makes the device current; restore it
            return _core.Context.nccl(payload[1], self.world_size, self.rank, self.device.index,
                                      self.timeout)

    def _make_host(self, distributed):
        import torch.distributed as dist
        if self.world_size == 1:
            return _core.Context.single_host(self.timeout)
        mine = (socket.gethostname(), _boot_id(),
                "tpla-%d-%s" % (os.getpid(), uuid.uuid4().hex[:16]))
        everyone = [None] * self.world_size
        dist.all_gather_object(everyone, mine, group=self.group)
        machines = {(h, b) for h, b, _ in everyone}
        if len(machines) > 1:
            raise NotSupportedError(
                "tpla.torch.Communicator: CPU tensors use the host executor, whose ranks must "
                "share one machine's memory; this group spans %s" % sorted(h for h, _ in machines))
        self.shm_name = everyone[0][2]
        return _core.Context.shared(self.shm_name, self.world_size, self.rank, self.timeout)

    # ---- use -------------------------------------------------------------------

    @property
    def context(self):
        """The tpla.Context (raises once closed)."""
        if self._ctx is None or not self._ctx.handle:
            raise InvalidUsageError("tpla.torch.Communicator: used after close()")
        return self._ctx

    def plan(self, key, make):
        """The cached plan for `key`, made by make(context) on a miss (collective).
        A miss while a CUDA graph is being captured raises InvalidUsageError: plans
        are made outside captures (they allocate and synchronize)."""
        p = self._plans.get(key)
        if p is None or not p.handle:
            refuse_capture(self.device, "tpla.torch", "a new tpla plan (%s)" % _describe(key))
            p = make(self.context)
            self._plans[key] = p
        return p

    def has_plan(self, key):
        """Whether a live plan is cached for `key`."""
        p = self._plans.get(key)
        return p is not None and bool(p.handle)

    def stream(self):
        from ._tensors import stream_handle
        return stream_handle(self.device)

    def counters(self):
        """Operations issued so far (tpla_ctx_get_counters): allgathers,
        reduce_scatters, allreduces, overlap_calls, gathered_views."""
        return self.context.counters()

    def workspace_bytes(self):
        """Bytes held by the context and every cached plan, a group's once (at its
        largest member's count: the group's bytes plus that member's own)."""
        total, groups = self.context.workspace_bytes(), {}
        for p in self._plans.values():
            if not p.handle:
                continue
            if p.group is None:
                total += p.workspace_bytes
            else:
                groups[p.group] = max(groups.get(p.group, 0), p.workspace_bytes)
        return total + sum(groups.values())

    def barrier(self):
        self.context.barrier(self.stream())

    def common_seed(self):
        """A random seed equal on every rank (collective): drawn from rank 0's default
        torch generator, so torch.manual_seed on rank 0 makes it reproducible. Every
        rank's default generator advances alike."""
        seed = int(torch.randint(0, 2**62, (1,)).item())
        if self.world_size > 1:
            import torch.distributed as dist
            box = [seed]
            nccl = "nccl" in str(dist.get_backend(self.group)).lower()
            dist.broadcast_object_list(box, src=self._src(), group=self.group,
                                       device=self.device if nccl else None)
            seed = int(box[0])
        return seed

    def abort(self):
        """Abort this rank's tpla context (tpla.Context.abort): its calls and the peers'
        calls waiting for it end with an error instead of hanging; then close() on every
        rank and build a new Communicator."""
        self.context.abort()

    def async_error(self):
        """None while the context works, else the tpla.Error that stopped it
        (tpla.Context.async_error)."""
        return self.context.async_error()

    def clear_plans(self):
        """Destroy the cached plans (every rank, like a collective), e.g. when shapes came
        and went (each sequence length of a layer keeps its own plans). First a barrier,
        waited for on this device, so that no rank's plan is destroyed while a peer's
        call may still read its buffers."""
        if self._ctx is None or not self._plans:
            return
        refuse_capture(self.device, "tpla.torch.Communicator.clear_plans",
                       "a wait for the device (a barrier, then a synchronize)",
                       "clear plans outside the capture")
        self.barrier()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        for p in self._plans.values():
            p.close()  # the context's set holds them too: dropping ours frees nothing
        self._plans.clear()

    def close(self):
        """Destroy the cached plans and the context (every rank)."""
        if self._ctx is not None:
            refuse_capture(self.device, "tpla.torch.Communicator.close",
                           "the plans' and the context's destruction (which frees device memory)",
                           "close the communicator outside the capture")
        self._plans.clear()
        if self._ctx is not None:
            self._ctx.close()
            self._ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Communicator(rank=%d, world_size=%d, device=%s, executor=%s)" % (
            self.rank, self.world_size, self.device, getattr(self, "executor", "?"))


_KINDS = {"ns": "newton_schulz", "ag": "ag_gemm", "rs": "gemm_rs", "ar": "gemm_ar",
          "muon": "Muon.step"}


def _describe(key):
    """A plan cache key as a short phrase for messages."""
    if isinstance(key, tuple) and key and key[0] in _KINDS:
        return "%s, key %s" % (_KINDS[key[0]], key[1:])
    return "key %r" % (key,)


_local = {}


def local_communicator(device):
    """The process's one-rank communicator for `device` (cached)."""
    device = Communicator._pick_device(device, "")
    c = _local.get(device)
    if c is None or c._ctx is None:
        c = _local[device] = Communicator.local(device)
    return c
