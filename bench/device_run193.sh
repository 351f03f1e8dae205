#!/usr/bin/env bash
# bench/device_run193.sh - one GPU (nvidia-h200), session 29: the session's last library (the
# Gram iteration's operand as M, run 192's) with the fuzz tests as committed (split into
# headers; no cast allowance where the Gram iteration rounds M): everything built, one CTest
# pass on the one GPU, a 150-s soak of test_gpu_fuzz, then the Python checks on one rank.
# Run in the repository root (no carry): bash bench/device_run193.sh
set -u
. bench/device_lib.sh 193
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 220 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout" "$L/ctest.log" | head -n 10 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=150 bounded 200 "$L/fuzz_soak.log" \
  build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz soak: exit $? ($(el)) $(tail -n 1 "$L/fuzz_soak.log")"
grep -E "^# (gemm|fp8|ns1|ns2|summary|case seed)" "$L/fuzz_soak.log" | head -n 20 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 100 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
