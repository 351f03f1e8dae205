"""abort_procs.py - Communicator.abort/async_error on 2 GPUs in 2 processes (PEER
transport through CUDA IPC), under torchrun:

    torchrun --standalone --nproc_per_node=2 tests/python/gpu/abort_procs.py

Both ranks run one tpla.torch.gemm_ar; then rank 0 calls it again alone. Its
context's watchdog (timeout 2 s on rank 0) must end that call: the stream
drains and async_error() is a TimeoutError naming tpla_gemm_ar. Rank 1 (timeout
60 s) then calls twice; the second call waits for rank 0 in vain until rank 1's
watchdog reads rank 0's abort mark in its IPC-mapped flags: RemoteError naming
rank 0, long before 60 s. Prints "N passed, N failed" on rank 0; exit 1 on a
failure. libtpla must be a CUDA build (TPLA_LIBRARY).
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))),
                                "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def expect(cond, what, failures):
    failures.append(None)  # one check
    if not cond:
        print("  rank %d: FAIL %s" % (dist.get_rank(), what), flush=True)
        failures[-1] = what


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank = dist.get_rank()
    import tpla
    import tpla.torch as tt
    comm = tt.Communicator(device=torch.device("cuda", local),
                           timeout=2.0 if rank == 0 else 60.0)
    g = torch.Generator(device="cuda").manual_seed(7 + rank)
    a = torch.randn(512, 256, device="cuda", generator=g).bfloat16()
    b = torch.randn(256, 256, device="cuda", generator=g).bfloat16()
    failures = []
    d = tt.gemm_ar(a, b, comm, transport="peer", mode="overlap")
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    dist.all_reduce(ref)
    expect(torch.allclose(d.float(), ref, rtol=3e-2, atol=3e-1), "the first call's result",
           failures)
    dist.barrier()
    if rank == 0:
        t0 = time.monotonic()
        tt.gemm_ar(a, b, comm, transport="peer", mode="overlap")
        torch.cuda.synchronize()
        took = time.monotonic() - t0
        err = comm.async_error()
        expect(1.5 <= took <= 15.0, "drained after %.2f s (expected 1.5 .. 15)" % took, failures)
        expect(isinstance(err, tpla.TimeoutError) and "tpla_gemm_ar" in str(err),
               "async_error() %r" % (err,), failures)
        try:
            tt.gemm_ar(a, b, comm, transport="peer", mode="overlap")
            expect(False, "a call after the abort did not raise", failures)
        except tpla.TimeoutError:
            expect(True, "a call after the abort raised", failures)
    dist.barrier()
    if rank == 1:
        t0 = time.monotonic()
        for _ in range(2):
            tt.gemm_ar(a, b, comm, transport="peer", mode="overlap")
        torch.cuda.synchronize()
        took = time.monotonic() - t0
        err = comm.async_error()
        expect(took <= 15.0, "drained after %.2f s (expected <= 15)" % took, failures)
        expect(isinstance(err, tpla.RemoteError) and "rank 0 aborted" in str(err),
               "async_error() %r" % (err,), failures)
    comm.close()
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, failures)
    checks = sum(len(f) for f in everyone)
    bad = sum(1 for f in everyone for x in f if x is not None)
    if rank == 0:
        print("%d passed, %d failed" % (checks - bad, bad), flush=True)
    dist.destroy_process_group()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
