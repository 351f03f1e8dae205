#!/usr/bin/env bash
# bench/device_run108.sh - two GPUs: tpla_ctx_abort and the CUDA executor's watchdog (ce36402,
# src/cuda/watchdog.c), first run on a GPU: (1) tests/gpu/test_gpu_abort (1 GPU, then 2: a
# GEMM+AllReduce whose peer never calls, ended by the watchdog at 2 s; the peer then ends with
# REMOTE; an NCCL all-reduce without its peer, ended by tpla_ctx_abort); (2) the whole GPU suite
# at this library (every public call now goes through the call bracket); (3) what the bracket
# costs: `tpla` at three shapes, this library against 6eba229's (snap/run108_base.tar), two
# alternating rounds. About 8 minutes. The tree under test is snap/run108_new.tar (`git archive`
# of the commit, so that uncommitted work in the working tree stays out).
# Run in the repository root of main with carry ["snap"]: bash bench/device_run108.sh
set -u
. bench/device_lib.sh 108
BASE=$PWD
rm -rf /tmp/n108 && mkdir -p /tmp/n108 && tar xf snap/run108_new.tar -C /tmp/n108 && cd /tmp/n108
gpu_build test_gpu_abort tpla_tool
CUDA_VISIBLE_DEVICES=0,1 bounded 240 "$L/abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/abort.log")"
grep -vE "^(ok|#)" "$L/abort.log" | head -30 >> "$S"
OUT=$L/gpu-tests timeout 420 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests.log" | head -20 >> "$S"
pack
tar_build /tmp/s108 "$BASE/snap/run108_base.tar" base tpla_tool
configs=(
  "ag 16384,8192,1024|ag-gemm -d bf16 -n 30 -w 5 -s 1234 16384 8192 1024"
  "ar 8192,4096,8192|gemm-ar -d bf16 -n 30 -w 5 -s 1234 8192 4096 8192"
  "ns 8192x8192|ns -n 20 -w 5 -s 1234 --svd-max=0 8192 8192"
)
for round in 1 2; do
  for build in /tmp/s108/build-gpu build-gpu; do
    tag=$([ "$build" = build-gpu ] && echo new || echo base)
    i=0
    for cfg in "${configs[@]}"; do
      i=$((i + 1))
      IFS='|' read -r name args <<< "$cfg"
      log="$L/r${round}_${tag}_$i.log"
      CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$log" $build/tpla $args -g 2
      say "r$round $tag $(printf '%-18s' "$name") exit $? $(grep -E '^ *(ag-gemm|gemm-|[0-9]+x[0-9]+ )' "$log" | head -n 2 | tr -s ' ' | tr '\n' ' ')"
    done
  done
  pack
done
cat "$S"
