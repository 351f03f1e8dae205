#!/usr/bin/env bash
# bench/device_run102.sh - do Newton-Schulz's GEMMs leave time in cuBLASLt's other heuristic
# results? A patched copy (bench/run102_lt_keys_patch.py, TPLA_XP_LT_KEYS=1) prints the key of
# every cuBLASLt plan that `tpla ns` builds, bf16 input and Gram, on 1 GPU and on 2 GPUs, for the
# four DESIGN.md shapes; then bench/lt_algo_bench.c (main's build) times up to 16 heuristic
# results of each key on GPU 0. Issue #3's 16384x4096 speed-up (1.75 against 1.8) gains only if
# the 2-GPU keys gain more than the 1-GPU ones. About 3 minutes.
# Run in the repository root of main: bash bench/device_run102.sh
set -u
. bench/device_lib.sh 102
here=$PWD
gpu_build tpla_lt_algo_bench &
REUSE_BUILD=${REUSE_BUILD:-0} patched_build /tmp/s102 "$here/bench/run102_lt_keys_patch.py" &
wait
for g in 1 2; do
  for shape in 16384x4096 8192x8192 4096x14336 14336x4096; do
    TPLA_XP_LT_KEYS=1 CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/keys_${g}_$shape.log" \
      /tmp/s102/build-exp/tpla ns -g $g -s 1234 -n 1 -w 0 --gram=input --svd-max=0 $shape
    say "keys ${g} GPU $shape: exit $? $(grep -c LTKEY "$L/keys_${g}_$shape.log") plans"
  done
done
pack
for g in 1 2; do
  for shape in 16384x4096 8192x8192; do
    CUDA_VISIBLE_DEVICES=0 bounded 200 "$L/algos_${g}_$shape.log" build-gpu/tpla_lt_algo_bench \
      "$L/keys_${g}_$shape.log" 15
    say "algos ${g} GPU $shape: exit $? ($(el))"
    sed "s/^/${g}gpu $shape /" "$L/algos_${g}_$shape.log" >> "$S"
    pack
  done
done
for shape in 4096x14336 14336x4096; do
  [ "$(( $(date +%s) - t0 ))" -lt 420 ] || break
  CUDA_VISIBLE_DEVICES=0 bounded 120 "$L/algos_2_$shape.log" build-gpu/tpla_lt_algo_bench \
    "$L/keys_2_$shape.log" 15
  say "algos 2 GPU $shape: exit $? ($(el))"
  sed "s/^/2gpu $shape /" "$L/algos_2_$shape.log" >> "$S"
  pack
done
cat "$S"
