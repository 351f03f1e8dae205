#!/usr/bin/env bash
# bench/device_run142.sh - two GPUs (nvidia-h200-x2), session 22:
# in this order (a call has 600 s; the most wanted first):
#  1. bench/remote_d_bench.c on both GPUs: what the peer half's remote stores cost, and the
#     two-launch schedule (sched, sched*, sched/2) against the unchunked GEMM;
#  2. the library A/B at (8192, 4096, 8192), -n 100 -w 20: E4M3 split GEMM+RS, bf16 GEMM+RS
#     and GEMM+AR, each as main does it by default, with direct partials (automatic chunks and
#     one chunk: TPLA_OVERLAP_DIRECT=1), and with direct partials, one chunk and the
#     rehearsal's GEMM tuning (TPLA_OVERLAP_TUNE=1);
#  3. test_gpu_abort's new case (the bound on calls in flight: a rank 16 calls ahead waits on
#     the host until the watchdog's TIMEOUT), and test_gpu_overlap with direct partials;
#  4. time permitting, the A/B again, and test_gpu_overlap's quick subset with both switches.
# Run in the repository root of main (no carry), kind nvidia-h200-x2:
#   bash bench/device_run142.sh
set -u
. bench/device_lib.sh 142
gpu_build tpla_tool tpla_remote_d_bench test_gpu_abort test_gpu_overlap
bounded 150 "$L/remote_d_bench.log" build-gpu/tpla_remote_d_bench 30
say "remote_d_bench: exit $? ($(el))"
grep -E "^  .*(full|remote|check)" "$L/remote_d_bench.log" >> "$S"
pack
export TPLA_TOOL_TIMEOUT_MS=15000
ab() { # ab NAME ENV... -- ARGS...: one invocation, its table line to the summary
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  bounded 60 "$L/ab_${name}_$round.log" env "${envs[@]}" build-gpu/tpla "$@" -n 100 -w 20 \
    -s 1234 8192 4096 8192
  say "$name: exit $? $(grep -E '^ +gemm-' "$L/ab_${name}_$round.log" | tr -s ' ')"
}
ab_round() {
  say "round $round ($(el))"
  local RS8=(gemm-rs -g 2 -d e4m3 --accum=split)
  ab rs8_main X=0 -- "${RS8[@]}"
  ab rs8_direct TPLA_OVERLAP_DIRECT=1 -- "${RS8[@]}"
  ab rs8_direct_c1 TPLA_OVERLAP_DIRECT=1 -- "${RS8[@]}" --chunks=1
  ab rs8_direct_c1_tune TPLA_OVERLAP_DIRECT=1 TPLA_OVERLAP_TUNE=1 -- "${RS8[@]}" --chunks=1
  ab rs8_tune TPLA_OVERLAP_TUNE=1 -- "${RS8[@]}"
  ab rs16_main X=0 -- gemm-rs -g 2
  ab rs16_direct TPLA_OVERLAP_DIRECT=1 -- gemm-rs -g 2
  ab rs16_direct_c1_tune TPLA_OVERLAP_DIRECT=1 TPLA_OVERLAP_TUNE=1 -- gemm-rs -g 2 --chunks=1
  ab ar16_main X=0 -- gemm-ar -g 2
  ab ar16_direct TPLA_OVERLAP_DIRECT=1 -- gemm-ar -g 2
  ab ar16_direct_tune TPLA_OVERLAP_DIRECT=1 TPLA_OVERLAP_TUNE=1 -- gemm-ar -g 2
  pack
}
round=1 ab_round
bounded 120 "$L/abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/abort.log")"
TPLA_OVERLAP_DIRECT=1 bounded 200 "$L/overlap_direct.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, DIRECT=1: exit $? ($(el)) $(tail -n 1 "$L/overlap_direct.log")"
pack
[ $(( $(date +%s) - t0 )) -lt 440 ] && round=2 ab_round
if [ $(( $(date +%s) - t0 )) -lt 500 ]; then
  TPLA_OVERLAP_DIRECT=1 TPLA_OVERLAP_TUNE=1 TPLA_TEST_QUICK=1 bounded 80 "$L/overlap_tune.log" \
    build-gpu/tests/test_gpu_overlap
  say "test_gpu_overlap quick, DIRECT=1 TUNE=1: exit $? ($(el)) $(tail -n 1 "$L/overlap_tune.log")"
fi
pack
cat "$S"
