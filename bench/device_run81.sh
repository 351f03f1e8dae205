#!/usr/bin/env bash
# bench/device_run81.sh - (prepared in session 13, not run yet) the overlap benchmark's tables of
# record refreshed on 2 GPUs: bench/run_overlap.sh in bf16 (its last whole run was run 6, at
# f2a7241) with the PyTorch anchors, then in FP8 (DTYPE=e4m3, split accumulation; run 34's
# table used its own script); then GEMM+AR bf16 at (8192, 4096, 8192) with 5 and 6 chunks and
# tails 2 and 3 (not tried: runs 11 and 71 swept 2-4 chunks with tails 1-2 and 6 chunks with tail
# 1; a514e8b's automatic 4 chunks with tail 2 read eff 0.86 in run 78). About 8 minutes; each
# part packed as it ends. Run in the repository root of main: bash bench/device_run81.sh
set -u
. bench/device_lib.sh 81
gpu_build tpla_tool
OUT=$L/overlap_bf16 timeout 220 bash bench/run_overlap.sh > "$L/overlap_bf16.log" 2>&1
say "run_overlap bf16: exit $? ($(el))"
cat "$L/overlap_bf16/compare.txt" >> "$S" 2>/dev/null
pack
DTYPE=e4m3 ACCUM=split OUT=$L/overlap_e4m3 timeout 200 bash bench/run_overlap.sh \
  > "$L/overlap_e4m3.log" 2>&1
say "run_overlap e4m3: exit $? ($(el))"
cat "$L/overlap_e4m3/compare.txt" >> "$S" 2>/dev/null
pack
i=0
for ct in 4:2 5:2 5:3 6:2 6:3 4:2; do
  c=${ct%%:*} t=${ct##*:} i=$((i + 1))
  [ "$(( $(date +%s) - t0 ))" -lt 560 ] || { say "AR chunks $c tail $t: not run (time)"; continue; }
  TPLA_OVERLAP_TAIL=$t CUDA_VISIBLE_DEVICES=0,1 bounded 40 "$L/ar_${i}_c${c}t$t.log" \
    build-gpu/tpla gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 --chunks=$c 8192 4096 8192
  say "AR chunks $c tail $t: exit $? $(grep -E '^  gemm-ar ' "$L/ar_${i}_c${c}t$t.log")"
done
pack
cat "$S"
