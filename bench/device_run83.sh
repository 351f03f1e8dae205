#!/usr/bin/env bash
# bench/device_run83.sh - GEMM+RS and GEMM+AR with the own rows' chunks alternating between the
# two compute lanes (TPLA_OVERLAP_OWN_LANES=2; 1, the library's default, keeps them all on lane
# 1 behind the partials of lane 0): once lane 0's partials are done, one lane's chunk fills the
# other's last wave, where a single lane leaves SMs idle between its GEMMs. First test_gpu_overlap
# on 2 GPUs with the alternation, then alternating A/B on 2 GPUs, three rounds: GEMM+AR bf16
# (8192, 4096, 8192), FP8 e4m3 GEMM+RS (8192, 4096, 8192) split accumulation, bf16 GEMM+RS
# (8192, 4096, 8192); then GEMM+AR (8192, 4096, 8192) at 6 and 8 chunks alternating, and the
# other GEMM+AR/RS shapes once each way. About 6 minutes. Run in the repository root.
set -u
. bench/device_lib.sh 83
gpu_build tpla_tool test_gpu_overlap
TPLA_OVERLAP_OWN_LANES=2 CUDA_VISIBLE_DEVICES=0,1 bounded 200 "$L/overlap_lanes2.log" \
  build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, own lanes 2, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_lanes2.log")"
pack
one() { # NAME LANES ARGS...: one invocation, its table line into the summary
  local name=$1 lanes=$2; shift 2
  [ "$(( $(date +%s) - t0 ))" -lt 540 ] || { say "$name: not run (time)"; return; }
  TPLA_OVERLAP_OWN_LANES=$lanes CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/$name.log" \
    build-gpu/tpla "$@"
  say "$name: exit $? $(grep -E '^  gemm-(ar|rs) ' "$L/$name.log")"
}
for rep in 1 2 3; do
  for l in 1 2; do
    one "ar_l${l}_$rep" $l gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 8192 4096 8192
    one "rs8_l${l}_$rep" $l gemm-rs -g 2 -d e4m3 --accum=split -n 20 -w 5 -s 1234 8192 4096 8192
    one "rsbf_l${l}_$rep" $l gemm-rs -g 2 -d bf16 -n 20 -w 5 -s 1234 8192 4096 8192
  done
  pack
done
for c in 6 8; do
  for l in 1 2; do
    one "ar_c${c}_l$l" $l gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 --chunks=$c 8192 4096 8192
  done
done
for l in 1 2; do
  one "ar_big_l$l" $l gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 16384 14336 8192
  one "ar_wide_l$l" $l gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 16384 1024 8192
  one "rs_wide_l$l" $l gemm-rs -g 2 -d bf16 -n 20 -w 5 -s 1234 16384 1024 8192
  one "rs8_wide_l$l" $l gemm-rs -g 2 -d e4m3 --accum=split -n 20 -w 5 -s 1234 16384 1024 8192
done
pack
cat "$S"
