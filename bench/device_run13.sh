#!/usr/bin/env bash
# bench/device_run13.sh - GPU session 13: the whole test suite on 1 and 2
# GPUs + MPI (tests/gpu/run.sh) after the NS fused polynomial / ping-pong,
# the row-start alignment fix and the FP8 rehearsal of both accumulation
# modes; then FP8 GEMM+RS and GEMM+AR with fast accumulation (hung before),
# and a compute-sanitizer memcheck of test_gpu_ns on both GPUs (every 5th
# case). Logs in $OUT/logs.tgz, summary last.
set -u
. bench/device_lib.sh 13

OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== |^   " "$L/gpu_tests.log" | tail -n 14 >> "$S"
pack

T=build-gpu/tpla
timeout 90 $T gemm-rs -g 2 -d e4m3 --accum=fast -n 20 -w 5 -s 1234 > "$L/rs_e4m3_fast.log" 2>&1
say "gemm-rs e4m3 fast (DESIGN shapes): exit $? ($(el))"
grep -E "^  gemm-rs|wrong" "$L/rs_e4m3_fast.log" >> "$S"
timeout 30 $T gemm-ar -g 2 -d e4m3 --accum=fast -n 20 -w 5 -s 1234 8192 4096 8192 \
  > "$L/ar_e4m3_fast.log" 2>&1
say "gemm-ar e4m3 fast 8192 4096 8192: exit $? ($(el))"
grep -E "^  gemm-ar|wrong" "$L/ar_e4m3_fast.log" >> "$S"
pack

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
left=$(( 560 - ($(date +%s) - t0) ))
[ $left -gt 150 ] && left=150
if [ $left -gt 30 ]; then
  TPLA_NS_TEST_STRIDE=5 TPLA_TEST_NO_WATCHDOG=1 timeout $left "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_ns > "$L/memcheck_ns.log" 2>&1
  say "memcheck test_gpu_ns (2 GPUs, every 5th case): exit $? ($(el))"
  grep -E "ERROR SUMMARY|Invalid|misaligned|^FAIL|^ok|passed" "$L/memcheck_ns.log" | head -n 12 >> "$S"
fi
pack
cat "$S"
