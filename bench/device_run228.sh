#!/usr/bin/env bash
# bench/device_run228.sh - one GPU (nvidia-h200), session 36's last device call:
#  1. tests/gpu/run.sh as a whole (build, CTest on GPU 0 and on every GPU, the MPI test) at the
#     session's final library: the localized static archive, the half-Gram steep-table rule,
#     review 103's tests;
#  2. bench/ns_steep_check.py on the GPU: Polar Express with a bf16 Gram on low-stable-rank
#     inputs (16x64, 256x1024, 1024x4096; floors at 1/8, 1/10, 1/14), iteration auto / gram / x
#     and the Gram iteration with an fp32 Gram, distance from the exact polar factor.
# Run in the repository root (no carry): bash bench/device_run228.sh
set -u
. bench/device_lib.sh 228
bounded 430 "$L/run_sh.log" env OUT="$L/gpu-run" bash tests/gpu/run.sh
say "tests/gpu/run.sh: exit $? ($(el)) $(tail -n 1 "$L/run_sh.log")"
grep -E "^== (ctest|mpi)|^   " "$L/run_sh.log" >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 100 "$L/steep.log" \
  python3 bench/ns_steep_check.py --device cuda
say "ns_steep_check: exit $? ($(el))"
cat "$L/steep.log" >> "$S"
pack
cat "$S"
