#!/usr/bin/env bash
# bench/device_run215.sh - one GPU (nvidia-h200), session 34: mutation testing of the GPU tests
# (bench/gpu_mutate.py over bench/gpu_mutants.json): each mutant a small bug in the CUDA-only
# code put into a copy of the tree, its tests rebuilt and run; a mutant that survives is a gap
# in the GPU tests. Takes MUTANTS (default bench/gpu_mutants.json), ONLY (ids, comma-separated) and LIMIT
# (seconds for all of them, default 520).
# Run in the repository root (no carry): bash bench/device_run215.sh
set -u
. bench/device_lib.sh "${RUN:-215}" # RUN: this script again under another run number
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
m=/tmp/run${RUN:-215}-tree
rm -rf $m && cp -r "$PWD" $m && rm -rf $m/build-gpu
(cd $m && gpu_build tpla_testlib)
bounded ${LIMIT:-520} "$L/mutate.log" python3 bench/gpu_mutate.py "${MUTANTS:-bench/gpu_mutants.json}" $m \
  $m/build-gpu "$L/mutants" --timeout 90 ${ONLY:+--only "$ONLY"}
say "gpu_mutate: exit $? ($(el))"
grep -E "^baseline|^M[0-9]+ |^totals" "$L/mutate.log" >> "$S"
pack
cat "$S"
