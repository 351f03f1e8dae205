#!/usr/bin/env bash
# bench/device_run42.sh - prepared, not run (the session's device time ran out): run 41
# found test_gpu_ns's 2-GPU hang with pulled Gram sums at the first bf16 case with 2-byte
# aligned rows (ld = cols + 3), after a plan-time rehearsal on dense rows only; plan
# creation now also rehearses rows of every alignment below 16 bytes (ns_pull_rehearse).
# Pulls are opt-in (TPLA_NS_GRAM_SUM=pull). test_gpu_ns on both GPUs, under 60 s; if it
# passes, the pulls can become the default at P = 2.
set -u
. bench/device_lib.sh 42
gpu_build test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 TPLA_NS_GRAM_SUM=pull TPLA_NS_TEST_TRACE=1 bounded 60 "$L/test_gpu_ns_2.log" \
  build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 GPUs (pulls): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_2.log")"
grep -E "^# (2 ranks|AUTO)" "$L/test_gpu_ns_2.log" >> "$S"
grep -E "^# rank 0 starts" "$L/test_gpu_ns_2.log" | tail -n 1 >> "$S"
pack
cat "$S"
