#!/usr/bin/env bash
# bench/device_run124.sh - two GPUs (nvidia-h200-x2), session 19: issue #3's two speed-up
# targets (>= 1.8x over tpla on one GPU at 8192x8192 and 16384x4096, bf16 Gram) read on one
# pair of invocations per table moved 1.61-1.85 between runs (runs 96, 97, 123). Here: rounds
# alternating `tpla ns -g 1` (GPU 0) and `tpla ns -g 2`, the same flags as bench/run_ns.sh (median
# of 20 after 5 per invocation), both shapes, for as long as the call allows (at most 8 rounds).
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run124.sh
set -u
. bench/device_lib.sh 124
gpu_build tpla_tool
ns() { # ns GPUS ROUND: one invocation, both shapes, its table lines into the summary
  local log=$L/ns_g$1_r$2.log
  if [ "$1" = 1 ]; then
    CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=input \
      --svd-max=0 -c 0 16384x4096 8192x8192 > "$log" 2>&1
  else
    timeout 120 build-gpu/tpla ns -g 2 -s 1234 -n 20 -w 5 --gram=input --svd-max=0 -c 0 \
      16384x4096 8192x8192 > "$log" 2>&1
  fi
  say "round $2, $1 GPU(s): exit $? ($(el))"
  grep -E "^ +[0-9]+x[0-9]+ " "$log" | awk -v r="$2" '{print "  r" r, $1, $2, $4, $9, $10}' >> "$S"
}
for round in 1 2 3 4 5 6 7 8; do
  [ "$(( $(date +%s) - t0 ))" -lt 500 ] || { say "round $round: not run (time)"; break; }
  ns 1 $round
  ns 2 $round
  pack
done
cat "$S"
