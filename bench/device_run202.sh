#!/usr/bin/env bash
# bench/device_run202.sh - one GPU (nvidia-h200), session 31: workspace groups joined in two
# steps (ns_share_reserve / ns_share_commit) and the device waited for only when a group grows
# or the plan is pulled; Python overlap plans' info read when asked: everything built, one CTest
# pass, the Python checks on one rank, a 120-s test_gpu_fuzz soak.
# Run in the repository root (no carry): bash bench/device_run202.sh
set -u
. bench/device_lib.sh 202
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 280 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run" "$L/ctest.log" | head -n 10 >> "$S"
CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/ns_share.log" build-gpu/tests/test_gpu_ns_share
say "test_gpu_ns_share: exit $? ($(el)) $(grep -E '^# |passed' "$L/ns_share.log" | tr '\n' ' ' | cut -c1-400)"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 200 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=120 bounded 190 "$L/fuzz_soak.log" \
  build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz soak: exit $? ($(el)) $(tail -n 1 "$L/fuzz_soak.log")"
grep -E "^# (gemm|fp8|ns1):.*cases" "$L/fuzz_soak.log" | head -n 3 >> "$S"
pack
cat "$S"
