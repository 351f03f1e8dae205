"""dist_util.py - run a function on N CPU processes joined by a gloo group
(torch.multiprocessing, spawn start method), with a deadline.

    results = run(3, checks.check_ns_numerics, "cpu")   # one return value per rank

A worker that raises makes run() raise with that worker's traceback; a run
past its deadline is killed and reported.
"""
import datetime
import os
import pickle
import sys
import tempfile
import time

import torch.multiprocessing as mp


def _worker(rank, world, store, outdir, fn, args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        result = fn(rank, world, *args)
        with open(os.path.join(outdir, "%d.pkl" % rank), "wb") as f:
            pickle.dump(result, f)
    except BaseException:
        dist.destroy_process_group()
        raise
    # The work is done and recorded. torch's gloo teardown has been seen to
    # abort the process afterwards ("terminate called without an active
    # exception", SIGABRT) in about one run of 30: leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run(world, fn, *args, timeout=300):
    with tempfile.TemporaryDirectory(prefix="tpla-test-") as d:
        ctx = mp.start_processes(_worker, args=(world, os.path.join(d, "store"), d, fn, args),
                                 nprocs=world, join=False, start_method="spawn")
        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise TimeoutError("%s on %d ranks did not finish in %d s"
                                   % (fn.__name__, world, timeout))
        results = []
        for r in range(world):  # None for a rank that exited without returning
            path = os.path.join(d, "%d.pkl" % r)
            if not os.path.exists(path):
                results.append(None)
                continue
            with open(path, "rb") as f:
                results.append(pickle.load(f))
        return results
