#!/usr/bin/env bash
# bench/device_run221.sh - one GPU (nvidia-h200), session 35: tests/gpu/run.sh as a whole
# (build, CTest on GPU 0 and on every GPU, the MPI test), then the Python checks on one rank.
# Verifies review 98's fixes (made after run 220) and test_gpu_overlap_graph_bt's third case.
# Run in the repository root (no carry): bash bench/device_run221.sh
set -u
. bench/device_lib.sh 221
bounded 480 "$L/run_sh.log" env OUT="$L/gpu-run" bash tests/gpu/run.sh
say "tests/gpu/run.sh: exit $? ($(el)) $(tail -n 1 "$L/run_sh.log")"
grep -E "^== (ctest|mpi)|^   " "$L/run_sh.log" >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 90 \
  "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks, 1 rank: exit $? ($(el)) $(tail -n 1 "$L/python_1gpu.log")"
pack
cat "$S"
