#!/usr/bin/env bash
# bench/device_run134.sh - two GPUs (nvidia-h200-x2), session 21:
#  1. test_gpu_abort with the watchdog's new flag report: a stop's message now gives the flag
#     words of every transport as the stuck rank sees them (what it still waited for);
#  2. the bf16 overlap table at the power cap's steady state (bench/run_overlap.sh with
#     ITERS=400 WARMUP=200, PyTorch anchors in the same run; run 132 measured only two shapes so);
#  3. with the time left, run 132's round (GEMM+AR bf16, then GEMM+RS E4M3 split, both -n 400
#     -w 200 at (8192, 4096, 8192)) again and again, until a call stops: run 132's one stop,
#     now with the flags in the message.
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run134.sh
set -u
. bench/device_lib.sh 134
gpu_build tpla_tool test_gpu_abort
bounded 120 "$L/abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/abort.log")"
grep "message:" "$L/abort.log" | cut -c1-1000 >> "$S"
pack
BUILD=build-gpu ITERS=400 WARMUP=200 OUT=$L/ov_bf16 STEP_TIMEOUT=150 timeout 340 \
  bash bench/run_overlap.sh > "$L/ov_bf16.log" 2>&1
say "run_overlap bf16 -n 400 -w 200: exit $? ($(el))"
cat "$L/ov_bf16/compare.txt" >> "$S" 2>/dev/null
pack
. bench/run134_round.sh 560
pack
cat "$S"
