#!/usr/bin/env bash
# bench/device_run119.sh - four GPUs (nvidia-h200-x4): GEMM+AllReduce over PEER at 3 and 4 ranks
# with the pulls made by the SMs past two ranks (src/cuda/transport.c pull_by_sm; run 118's marks
# showed the copy-engine pulls stopped with their flags set). Each invocation bounded:
#   tpla gemm-ar -g 3 and -g 4 on a small shape, then -g 4 on DESIGN.md's shapes;
#   test_gpu_overlap with the four GPUs (its 4-rank GEMM+AR case hung in run 115);
#   tpla gemm-ar -g 2 (copy-engine pulls, unchanged) as a control.
# Run in the repository root of main (no carry): bash bench/device_run119.sh
set -u
. bench/device_lib.sh 119
gpu_build tpla_tool test_gpu_overlap
S1="-d bf16 -n 10 -w 3 -s 1234 2048 1024 2048"
for g in 3 4; do
  bounded 30 "$L/g$g.log" build-gpu/tpla gemm-ar -g $g $S1
  say "gemm-ar -g $g small: exit $? ($(el)) $(grep -E '^  gemm-ar ' "$L/g$g.log" | tr -s ' ')"
  pack
done
bounded 100 "$L/g4_full.log" build-gpu/tpla gemm-ar -g 4 -d bf16 -n 20 -w 5 -s 1234
say "gemm-ar -g 4 DESIGN shapes: exit $? ($(el))"
grep -E "^  gemm-ar |wrong" "$L/g4_full.log" >> "$S"
pack
OUT=$L bounded 150 "$L/test_gpu_overlap.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap (4 GPUs): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_overlap.log")"
grep -E "^(ok|FAIL|skip|HANG)" "$L/test_gpu_overlap.log" | head -20 >> "$S"
pack
bounded 30 "$L/g2.log" build-gpu/tpla gemm-ar -g 2 $S1
say "gemm-ar -g 2 small: exit $? ($(el)) $(grep -E '^  gemm-ar ' "$L/g2.log" | tr -s ' ')"
pack
cat "$S"
