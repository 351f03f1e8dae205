#!/usr/bin/env bash
# bench/device_run207.sh - one GPU (nvidia-h200), session 32: the fixes after run 206 on the
# GPU: test_gpu_fp8 first (the amax of an infinite product, D in rows more than 2 GiB apart),
# the whole CTest on one GPU (test_gpu_graphs counting kept scratch, the watchdog and NCCL
# changes where one GPU reaches them, the workspace group's quiesce), memcheck of
# test_gpu_fp8, then 60 s of test_gpu_fuzz.
# Run in the repository root (no carry): bash bench/device_run207.sh
set -u
. bench/device_lib.sh 207
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
CUDA_VISIBLE_DEVICES=0 bounded 120 "$L/test_gpu_fp8.log" build-gpu/tests/test_gpu_fp8
say "test_gpu_fp8: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_fp8.log")"
grep -E "^# E4M3 overflow|^# E4M3 NaN|^# E5M2 infinity|FAIL|failed" "$L/test_gpu_fp8.log" \
  | head -n 12 >> "$S"
pack
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 290 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run" "$L/ctest.log" | head -n 10 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 150 \
  "$L/memcheck_fp8.log" compute-sanitizer --tool memcheck --report-api-errors no \
  build-gpu/tests/test_gpu_fp8
say "memcheck test_gpu_fp8: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_fp8.log") $(tail -n 1 "$L/memcheck_fp8.log")"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=60 bounded 100 "$L/fuzz.log" build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz (60 s): exit $? ($(el)) $(tail -n 1 "$L/fuzz.log")"
grep -E "^# (gemm|fp8|ns1|summary)|FAIL" "$L/fuzz.log" | head -n 10 >> "$S"
pack
cat "$S"
