#!/usr/bin/env bash
# bench/device_run181.sh - one GPU (nvidia-h200), session 27: the session's last library on a GPU
# (the mirrors of run 180 plus the presets rounded once, e08f5ab, and the mutation run's host
# tests): tests/gpu/run.sh (ctest on GPU 0 and unrestricted, the MPI test), then the Python
# checks on one rank.
# Run in the repository root (no carry): bash bench/device_run181.sh
set -u
. bench/device_lib.sh 181
OUT=$L/gpu-tests bounded 400 "$L/gpu_tests.log" bash tests/gpu/run.sh
say "tests/gpu/run.sh: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|failed:" "$L/gpu_tests.log" | head -n 20 >> "$S"
pack
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 200 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
