#!/usr/bin/env bash
# bench/device_run14.sh - GPU session 14 (the last device minutes): the
# re-keyed test_gpu_gemm on 1 and 2 GPUs; FP8 GEMM+RS (8192, 4096, 8192)
# with 3/5/6 chunks and with op(B) = T (no per-call transpose of B); the
# Newton-Schulz tall shapes with fewer NCCL channels (SM contention of the
# Gram all-reduce); a compute-sanitizer memcheck of test_gpu_ns on 2 GPUs
# (every 25th case). Logs in $OUT/logs.tgz, summary last.
set -u
. bench/device_lib.sh 14
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build build-gpu -j 16 --target tpla_tool test_gpu_gemm test_gpu_ns > "$L/build.log" 2>&1)
say "build: exit $? ($(el))"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 timeout 60 ctest -R "test_gpu_gemm" --output-on-failure \
  > "$L/ctest_gemm_1gpu.log" 2>&1)
say "test_gpu_gemm 1 GPU: exit $? ($(el)): $(grep 'tests passed' "$L/ctest_gemm_1gpu.log")"
(cd build-gpu && timeout 60 ctest -R "test_gpu_gemm" --output-on-failure > "$L/ctest_gemm_2gpu.log" 2>&1)
say "test_gpu_gemm 2 GPUs: exit $? ($(el)): $(grep 'tests passed' "$L/ctest_gemm_2gpu.log")"
pack

T=build-gpu/tpla
rs() {
  local name=$1; shift
  timeout 40 $T gemm-rs -g 2 -d e4m3 -n 20 -w 5 -s 1234 "$@" 8192 4096 8192 > "$L/rs_$name.log" 2>&1
  say "gemm-rs e4m3 $name: exit $? ($(el))"
  grep -E "^  gemm-rs" "$L/rs_$name.log" >> "$S"
}
rs c3 --chunks=3
rs c5 --chunks=5
rs c6 --chunks=6
rs opT_auto -t NT
rs opT_fast -t NT --accum=fast
pack

ns() {
  local name=$1; shift
  env "$@" timeout 60 $T ns -g 2 -s 1234 -n 10 -w 3 --gram=input --svd-max=0 \
    16384x4096 14336x4096 > "$L/ns_$name.log" 2>&1
  say "ns 2 GPUs bf16 Gram, $name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_$name.log" >> "$S"
}
ns default TPLA_X=0
ns nccl_max4 NCCL_MAX_NCHANNELS=4
ns nccl_max8 NCCL_MAX_NCHANNELS=8
pack

SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
left=$(( 330 - ($(date +%s) - t0) ))
[ $left -gt 170 ] && left=170
if [ $left -gt 30 ]; then
  TPLA_NS_TEST_STRIDE=25 TPLA_TEST_NO_WATCHDOG=1 timeout $left "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_ns > "$L/memcheck_ns.log" 2>&1
  say "memcheck test_gpu_ns (every 25th case): exit $? ($(el))"
  grep -E "ERROR SUMMARY|Invalid|misaligned|^FAIL|^ok|cases," "$L/memcheck_ns.log" | head -n 30 >> "$S"
fi
pack
cat "$S"
