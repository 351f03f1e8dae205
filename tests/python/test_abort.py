"""test_abort.py - Context.abort() and Context.async_error() (tpla_ctx_abort,
tpla_ctx_get_async_error) on the host executor: one rank in one process (the
status, the exception class, every later call raising AbortedError, close()
still working), and 2 or 3 gloo processes on the cross-process group, where
a rank blocked in a collective is released within a second, with RemoteError
naming tpla_ctx_abort, when its peer aborts or when a thread of its own
process aborts its context - long before the 60 s timeout."""
import threading
import time

import pytest
import torch

import tpla
import tpla.torch as tt
from tpla import _core, _lib

import dist_util


def _needs_abort():
    if not _lib.library().has_abort:
        pytest.skip("%s has no tpla_ctx_abort" % _lib.library().path)


def test_error_class_and_status():
    assert tpla.AbortedError.status == 11
    assert issubclass(tpla.AbortedError, tpla.Error) and issubclass(tpla.AbortedError,
                                                                      RuntimeError)
    assert _core.status_string(11) == "TPLA_ERROR_ABORTED"
    e = tpla._errors.error_for(11, "x")
    assert type(e) is tpla.AbortedError and e.status_name == "TPLA_ERROR_ABORTED"


def test_abort_one_rank():
    _needs_abort()
    ctx = _core.Context.single_host(timeout_s=20)
    assert ctx.async_error() is None
    a, d = torch.ones(3, 4), torch.full((3, 3), 7.0)
    m = tt._tensors.matrix
    ctx.gemm(m(d, "t", "d"), m(a, "t", "a"), _lib.OP_N, m(a, "t", "b"), _lib.OP_T)
    assert torch.equal(d, torch.full((3, 3), 4.0))
    ctx.abort()
    err = ctx.async_error()
    assert isinstance(err, tpla.AbortedError), err
    assert "tpla_ctx_abort was called on rank 0" in err.detail
    d.fill_(7.0)
    with pytest.raises(tpla.AbortedError, match="tpla_ctx_abort"):
        ctx.gemm(m(d, "t", "d"), m(a, "t", "a"), _lib.OP_N, m(a, "t", "b"), _lib.OP_T)
    assert torch.equal(d, torch.full((3, 3), 7.0))  # nothing written
    with pytest.raises(tpla.AbortedError):
        ctx.barrier()
    with pytest.raises(tpla.AbortedError):
        _core.NsPlan(ctx, _lib.NsDesc.new(shard=_lib.SHARD_ROWS, local_rows=8, local_cols=4,
                                          dtype=_lib.FLOAT32, steps=5, eps=1e-7,
                                          gram_dtype=_lib.FLOAT32, iteration=2))
    ctx.abort()  # again: nothing changes
    assert isinstance(ctx.async_error(), tpla.AbortedError)
    assert ctx.rank == 0 and ctx.workspace_bytes() >= 0  # queries still work
    ctx.close()
    with pytest.raises(tpla.InvalidUsageError, match="closed"):
        ctx.abort()


def check_abort(rank, world, who):
    """Ranks 0..world-2 wait in a barrier that the last rank never enters;
    who = "peer": the last rank aborts its context; who = "self": a thread
    of rank 0's process aborts rank 0's context while it waits."""
    import torch.distributed as dist
    comm = tt.Communicator(device="cpu", timeout=60)
    comm.barrier()  # a working group first
    assert comm.async_error() is None
    last = world - 1
    aborted_here = rank == (0 if who == "self" else last)
    waited = None
    if rank == last:
        if who == "peer":
            time.sleep(0.3)
            comm.abort()
    else:
        timer = threading.Timer(0.3, comm.abort) if who == "self" and rank == 0 else None
        if timer is not None:
            timer.start()
        t0 = time.monotonic()
        with pytest.raises(tpla.RemoteError) as e:
            comm.barrier()
        waited = time.monotonic() - t0
        if timer is not None:
            timer.join()
        assert "tpla_ctx_abort" in e.value.detail, e.value.detail
        assert waited < 10, "released after %.1f s" % waited
    dist.barrier()  # the aborted rank keeps its context until every wait has ended
    err = comm.async_error()
    assert isinstance(err, tpla.AbortedError if aborted_here else tpla.RemoteError), err
    assert "tpla_ctx_abort" in err.detail, err.detail
    with pytest.raises(type(err)):
        comm.barrier()
    comm.close()
    return waited


@pytest.mark.parametrize("world,who", [(2, "peer"), (3, "peer"), (2, "self")])
def test_abort_releases_blocked_ranks(world, who):
    _needs_abort()
    waited = dist_util.run(world, check_abort, who, timeout=120)
    print("released after (s):", waited)
