#!/usr/bin/env bash
# bench/device_run200.sh - one GPU (nvidia-h200), session 31: no 2-GPU machine is lent, so the
# GPU time goes to finding faults: everything built, a 330-s soak of test_gpu_fuzz (fresh seeds:
# GEMMs, FP8 GEMMs, Newton-Schulz with workspace groups on one GPU), then memcheck of 25 s of
# its cases. Run in the repository root (no carry): bash bench/device_run200.sh
set -u
. bench/device_lib.sh 200
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=330 bounded 400 "$L/fuzz_soak.log" \
  build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz soak: exit $? ($(el)) $(tail -n 1 "$L/fuzz_soak.log")"
grep -E "^# (gemm|fp8|ns1|summary)" "$L/fuzz_soak.log" | head -n 12 >> "$S"
grep -E "FAIL|worst" "$L/fuzz_soak.log" | head -n 20 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=25 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
  bounded 170 "$L/memcheck_fuzz.log" compute-sanitizer --tool memcheck --report-api-errors no \
  build-gpu/tests/test_gpu_fuzz
say "memcheck test_gpu_fuzz (25 s of cases): exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_fuzz.log") $(tail -n 1 "$L/memcheck_fuzz.log")"
grep -E "^# (gemm|fp8|ns1):" "$L/memcheck_fuzz.log" | head -n 6 >> "$S"
pack
cat "$S"
