#!/usr/bin/env bash
# bench/device_run121.sh - four GPUs (nvidia-h200-x4), prepared in session 18 for a later one:
#  1. the whole GPU suite (tests/gpu/run.sh) at the final library on 4 GPUs (run 115 ran it
#     before 00c1a3b's SM pulls; run 120 re-ran only the overlap tests);
#  2. GEMM+AllReduce at TP = 4 with the SM pulls' grid capped (bench/run121_pull_grid_patch.py,
#     TPLA_XP_PULL_GRID_Y = 0 (the library's grid), 264, 66, 16 block rows), DESIGN.md's shapes,
#     two rounds: run 120 read eff 0.54 / 0.57 on (8192, 4096, 8192) and (16384, 1024, 8192),
#     with thousands of pull CTAs competing with the GEMM chunks. Each invocation prints tpla's
#     SERIAL time of the same shape as well.
# Run in the repository root of main (no carry), kind nvidia-h200-x4: bash bench/device_run121.sh
set -u
. bench/device_lib.sh 121
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite (4 GPUs): exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests.log" | head -10 >> "$S"
pack
patched_build /tmp/x121 bench/run121_pull_grid_patch.py
for round in 1 2; do
  for y in 0 264 66 16; do
    [ "$(( $(date +%s) - t0 ))" -lt 540 ] || { say "grid $y round $round: not run (time)"; continue; }
    TPLA_XP_PULL_GRID_Y=$y bounded 60 "$L/ar_y${y}_r$round.log" build-exp/tpla gemm-ar -g 4 \
      -d bf16 -n 20 -w 5 -s 1234
    say "gemm-ar -g 4, pull grid y $y, round $round: exit $? ($(el))"
    grep -E "^  gemm-ar " "$L/ar_y${y}_r$round.log" >> "$S"
    pack
  done
done
cat "$S"
