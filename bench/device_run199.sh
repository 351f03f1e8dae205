#!/usr/bin/env bash
# bench/device_run199.sh - one GPU (nvidia-h200), session 30's last library: the s x s products of
# half inputs in fp32 up to s = 256 (ns_products_tf32), the GPU fuzz with workspace groups and
# without Polar Express on short half inputs: everything built, one CTest pass, a 100-s fuzz soak.
# Run in the repository root (no carry): bash bench/device_run199.sh
set -u
. bench/device_lib.sh 199
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 260 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout" "$L/ctest.log" | head -n 10 >> "$S"
grep -hE "^# 1 rank.*cases|^# 1 rank:" build-gpu/Testing/Temporary/LastTest.log 2>/dev/null | head -n 20 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 TPLA_FUZZ_SECONDS=100 bounded 170 "$L/fuzz_soak.log" \
  build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz soak: exit $? ($(el)) $(tail -n 1 "$L/fuzz_soak.log")"
grep -E "^# (gemm|fp8|ns1):" "$L/fuzz_soak.log" | head -n 6 >> "$S"
grep -E "^#   (fp16|bf16)" "$L/fuzz_soak.log" | tail -n 8 >> "$S"
pack
cat "$S"
