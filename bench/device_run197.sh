#!/usr/bin/env bash
# bench/device_run197.sh - one GPU (nvidia-h200), session 30: test_gpu_fuzz with its new
# workspace-group cases (one Newton-Schulz plan in four beside a neighbour plan in one group):
# a 120-s soak, then memcheck of a 25-s run. Run in the repository root (no carry):
# bash bench/device_run197.sh
set -u
. bench/device_lib.sh 197
gpu_build test_gpu_fuzz
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=120 bounded 200 "$L/fuzz_soak.log" \
  build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz soak: exit $? ($(el)) $(tail -n 1 "$L/fuzz_soak.log")"
grep -E "^# (gemm|fp8|ns1|ns2|summary)" "$L/fuzz_soak.log" | head -n 12 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=25 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
  bounded 300 "$L/memcheck_fuzz.log" compute-sanitizer --tool memcheck --report-api-errors no \
  build-gpu/tests/test_gpu_fuzz
say "memcheck test_gpu_fuzz (25 s of cases): exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_fuzz.log") $(tail -n 1 "$L/memcheck_fuzz.log")"
grep -E "^# (gemm|fp8|ns1):" "$L/memcheck_fuzz.log" | head -n 6 >> "$S"
pack
cat "$S"
