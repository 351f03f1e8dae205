#!/usr/bin/env bash
# bench/device_run206.sh - one GPU (nvidia-h200), session 32: run 205's findings fixed
# (ee10620): test_gpu_fp8 (infinite E5M2 products saturate, the amax of an unpadded
# infinite product), the GEMM/FP8/fuzz CTests, then 120 s of test_gpu_fuzz.
# Run in the repository root (no carry): bash bench/device_run206.sh
set -u
. bench/device_lib.sh 206
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
CUDA_VISIBLE_DEVICES=0 bounded 120 "$L/test_gpu_fp8.log" build-gpu/tests/test_gpu_fp8
say "test_gpu_fp8: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_fp8.log")"
grep -E "^# E4M3 overflow|^# E4M3 NaN|^# E5M2 infinity|FAIL|failed" "$L/test_gpu_fp8.log" \
  | head -n 12 >> "$S"
pack
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 200 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error -R "fp8|gemm|fuzz")
say "ctest -R 'fp8|gemm|fuzz' (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run" "$L/ctest.log" | head -n 10 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=120 bounded 170 "$L/fuzz.log" build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz (120 s): exit $? ($(el)) $(tail -n 1 "$L/fuzz.log")"
grep -E "^# (gemm|fp8|ns1|summary)|FAIL" "$L/fuzz.log" | head -n 12 >> "$S"
pack
cat "$S"
