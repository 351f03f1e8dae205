#!/usr/bin/env bash
# bench/device_run86.sh - GEMM+AllReduce's publication of each reduced chunk as its own step on
# the compute lane (PEER), no longer queued with the peer's pull on the pull's copy stream (run
# 85's timeline: the last chunk's flag went out 19 us after its GEMM, behind the previous
# chunk's pull). test_gpu_overlap on 2 GPUs with the change, then GEMM+AR bf16 (8192, 4096, 8192)
# alternating old (snap/run86_old.tar, git archive of 2c8a27b's successor without the change)
# and new, three rounds, and (16384, 1024, 8192) once each. About 2.5 minutes.
# Run in the repository root of main with carry ["snap"]: bash bench/device_run86.sh
set -u
. bench/device_lib.sh 86
gpu_build tpla_tool test_gpu_overlap
tar_build /tmp/s86old snap/run86_old.tar old tpla_tool
CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/overlap_new.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap new, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_new.log")"
pack
one() { # NAME TPLA ARGS...
  local name=$1 tpla=$2; shift 2
  CUDA_VISIBLE_DEVICES=0,1 bounded 40 "$L/$name.log" "$tpla" gemm-ar -g 2 -d bf16 -n 20 -w 5 \
    -s 1234 "$@"
  say "$name: exit $? $(grep -E '^  gemm-ar ' "$L/$name.log")"
}
for rep in 1 2 3; do
  one "old_$rep" /tmp/s86old/build-gpu/tpla 8192 4096 8192
  one "new_$rep" build-gpu/tpla 8192 4096 8192
done
one old_wide /tmp/s86old/build-gpu/tpla 16384 1024 8192
one new_wide build-gpu/tpla 16384 1024 8192
pack
cat "$S"
