"""run_checks.py - the checks of tests/python/checks.py on GPUs, under torchrun:
the CUDA executor (tpla's own NCCL communicator, bootstrapped through
torch.distributed) instead of the CPU host executor; with them checks_fp8.py's
(on devices with FP8) and checks_graphs.py's (CUDA graph capture).

    torchrun --nproc_per_node=1 tests/python/gpu/run_checks.py
    torchrun --nproc_per_node=2 tests/python/gpu/run_checks.py [check_name ...]

libtpla must be a CUDA build: TPLA_LIBRARY=<build>/libtpla.so (or the newest
<repo>/build*/libtpla.so is taken). Prints one line per check on rank 0 and
exits 1 if any check failed on any rank.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))                                   # checks, refs
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))),
                                "python"))                                  # tpla

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    import tpla
    import checks
    if rank == 0:
        print("# tpla %s, libtpla %s at %s, %d rank(s), torch %s" % (
            tpla.__version__, ".".join(map(str, tpla.version())), tpla.library_path(), world,
            torch.__version__), flush=True)
        if not tpla.features()["cuda_executor"]:
            print("# this libtpla has no CUDA executor: set TPLA_LIBRARY to a CUDA build")
    if tpla.features(local)["fp8"]:  # FP8 overlapped GEMMs (tests/python/checks_fp8.py)
        import checks_fp8
        checks.ALL.append(checks_fp8.check_fp8_overlap)
    if tpla.features()["cuda_executor"]:  # CUDA graphs (tests/python/checks_graphs.py)
        import checks_graphs
        checks.ALL.append(checks_graphs.check_graphs)
    results = checks.run_all(rank, world, "cuda", sys.argv[1:] or None)
    everyone = [None] * world
    dist.all_gather_object(everyone, results)
    failed = 0
    if rank == 0:
        for name in results:
            bad = [(r, everyone[r][name][1]) for r in range(world) if not everyone[r][name][0]]
            failed += bool(bad)
            print("%-28s %s %s" % (name, "FAIL" if bad else "ok",
                                   "" if bad else everyone[0][name][1]), flush=True)
            for r, why in bad[:2]:
                print("  rank %d: %s" % (r, why), flush=True)
        print("# %d passed, %d failed" % (len(results) - failed, failed), flush=True)
    failed_box = [failed]
    dist.broadcast_object_list(failed_box, src=0)
    dist.destroy_process_group()
    sys.exit(1 if failed_box[0] else 0)


if __name__ == "__main__":
    main()
