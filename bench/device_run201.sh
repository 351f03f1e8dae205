#!/usr/bin/env bash
# bench/device_run201.sh - one GPU (nvidia-h200), session 31: the GPU tests' shared skip helpers
# (gpu_util.h: GPU_TEST_MAIN_SKIP_WITHOUT, REQUIRE_GPUS, gpu_env_on; ns_team.h: team_gpus):
# everything built, one CTest pass, then memcheck of 100 s of test_gpu_fuzz's cases (fresh
# seeds). Run in the repository root (no carry): bash bench/device_run201.sh
set -u
. bench/device_lib.sh 201
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 280 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run|Skipped" "$L/ctest.log" | head -n 10 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=100 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
  bounded 250 "$L/memcheck_fuzz.log" compute-sanitizer --tool memcheck --report-api-errors no \
  build-gpu/tests/test_gpu_fuzz
say "memcheck test_gpu_fuzz (100 s of cases): exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_fuzz.log" | head -n 1) $(tail -n 1 "$L/memcheck_fuzz.log")"
grep -E "^# (gemm|fp8|ns1):" "$L/memcheck_fuzz.log" | head -n 6 >> "$S"
pack
cat "$S"
