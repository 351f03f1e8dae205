#!/usr/bin/env bash
# bench/device_run136.sh - two GPUs (nvidia-h200-x2), session 21: the bound on calls in flight
# (16, the new default) against the whole GPU suite (tests/gpu/run.sh: 1 GPU, then 2, and the
# MPI test), then run 135's stopped invocation again and again with the bound only (`tpla
# gemm-rs -g 2 -d e4m3 --accum=split -n 400 -w 200 8192 4096 8192`, tool timeout 15 s), every
# stop counted, until the time is spent. Run 135: unbounded 4 of 28 stopped, bounded 0 of 28.
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run136.sh
set -u
. bench/device_lib.sh 136
OUT=$L/gpu-tests timeout 320 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests.log" | head -10 >> "$S"
pack
export TPLA_TOOL_TIMEOUT_MS=15000
i=0
while [ $(( $(date +%s) - t0 )) -lt 545 ]; do
  i=$((i + 1))
  log="$L/bounded_$i.log"
  bounded 60 "$log" build-gpu/tpla gemm-rs -g 2 -d e4m3 --accum=split -n 400 -w 200 -s 1234 \
    8192 4096 8192
  rc=$?
  say "$i bounded: exit $rc ($(el)) $(grep -E '^ +gemm-' "$log" | tr -s ' ')"
  if [ $rc = 0 ]; then rm -f "$log"; else grep -E "rank [01]:" "$log" | cut -c1-700 >> "$S"; fi
done
say "bounded: $(grep -c " bounded: exit 0" "$S") ended well, $(grep -E " bounded: exit [1-9]" "$S" | grep -c .) stopped or failed"
pack
cat "$S"
