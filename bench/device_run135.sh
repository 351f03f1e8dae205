#!/usr/bin/env bash
# bench/device_run135.sh - two GPUs (nvidia-h200-x2), session 21: run 134 caught two stopped
# GEMM+RS invocations at -n 400 -w 200 (600 calls enqueued back to back): each time the stuck
# rank had begun call 80, its peer call 159, and the stuck rank's flags still held the peer's
# writes of call 1 (the check call). Does bounding the calls in flight (the transport's host
# wait, default 16; TPLA_XPORT_MAX_IN_FLIGHT=0 is the old unbounded behaviour) prevent it?
# Alternately, unbounded and bounded, `tpla gemm-rs -g 2 -d e4m3 --accum=split -n 400 -w 200
# 8192 4096 8192` (run 132's and 134's stopped invocation), the tool's timeout 15 s so that a
# stop costs little, until the time is spent; every stop is counted, none ends the loop.
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run135.sh
set -u
. bench/device_lib.sh 135
gpu_build tpla_tool
export TPLA_TOOL_TIMEOUT_MS=15000
i=0
while [ $(( $(date +%s) - t0 )) -lt 540 ]; do
  i=$((i + 1))
  for arm in unbounded bounded; do
    bound=; [ $arm = unbounded ] && bound=0
    log="$L/${arm}_$i.log"
    TPLA_XPORT_MAX_IN_FLIGHT=$bound bounded 60 "$log" build-gpu/tpla gemm-rs -g 2 -d e4m3 \
      --accum=split -n 400 -w 200 -s 1234 8192 4096 8192
    rc=$?
    say "$i $arm: exit $rc ($(el)) $(grep -E '^ +gemm-' "$log" | tr -s ' ')"
    if [ $rc = 0 ]; then rm -f "$log"; else grep -E "rank [01]:" "$log" | cut -c1-700 >> "$S"; fi
  done
  pack
done
for arm in unbounded bounded; do
  say "$arm: $(grep -c " $arm: exit 0" "$S") ended well, $(grep -E " $arm: exit [1-9]" "$S" | grep -c .) stopped or failed"
done
pack
cat "$S"
