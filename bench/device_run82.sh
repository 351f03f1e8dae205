#!/usr/bin/env bash
# bench/device_run82.sh - the partials of GEMM+RS and GEMM+AR in fewer, larger chunks than the
# own rows' (TPLA_OVERLAP_SEND_CHUNKS, default: as many): each rank's lane 0 runs its partials
# for the peer while the own rows wait for their first arrival anyway, so coarser partials cost
# no idle SMs at the start and save GEMM launches, wave tails and flags; the own rows keep their
# chunks (and GEMM+AR's half last chunk, whose read by the peer is the exposed tail). First
# test_gpu_overlap on 2 GPUs with TPLA_OVERLAP_SEND_CHUNKS=2 (own rows' chunks crossing the
# partials' edges), then alternating A/B on 2 GPUs, two rounds: GEMM+AR bf16 (8192, 4096, 8192)
# with own chunks 4/6/8 and send chunks as many/2; FP8 e4m3 GEMM+RS (8192, 4096, 8192) split
# accumulation and bf16 GEMM+RS (8192, 4096, 8192), send as many/2; GEMM+AR on the other two
# shapes, send as many/2. About 8 minutes. Run in the repository root: bash bench/device_run82.sh
set -u
. bench/device_lib.sh 82
gpu_build tpla_tool test_gpu_overlap
TPLA_OVERLAP_SEND_CHUNKS=2 CUDA_VISIBLE_DEVICES=0,1 bounded 200 "$L/overlap_send2.log" \
  build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, send chunks 2, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_send2.log")"
pack
one() { # NAME SEND ARGS...: one invocation, its table line into the summary
  local name=$1 send=$2; shift 2
  [ "$(( $(date +%s) - t0 ))" -lt 540 ] || { say "$name: not run (time)"; return; }
  TPLA_OVERLAP_SEND_CHUNKS=$send CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/$name.log" \
    build-gpu/tpla "$@"
  say "$name: exit $? $(grep -E '^  gemm-(ar|rs) ' "$L/$name.log")"
}
for rep in 1 2; do
  for c in 4 6 8; do
    for s in 0 2; do
      one "ar_c${c}_s${s}_$rep" $s gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 --chunks=$c 8192 4096 8192
    done
  done
  for s in 0 2; do
    one "rs8_s${s}_$rep" $s gemm-rs -g 2 -d e4m3 --accum=split -n 20 -w 5 -s 1234 8192 4096 8192
    one "rsbf_s${s}_$rep" $s gemm-rs -g 2 -d bf16 -n 20 -w 5 -s 1234 8192 4096 8192
  done
  pack
done
for s in 0 2; do
  one "ar_big_s$s" $s gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 16384 14336 8192
  one "ar_wide_s$s" $s gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234 16384 1024 8192
done
pack
cat "$S"
