#!/usr/bin/env bash
# bench/device_run204.sh - one GPU (nvidia-h200), session 31: window groups whose larger buffers
# become the group's only once the creating plan's creation succeeded (ovl_group_commit):
# everything built, one CTest pass. Run in the repository root (no carry):
# bash bench/device_run204.sh
set -u
. bench/device_lib.sh 204
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 280 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run" "$L/ctest.log" | head -n 10 >> "$S"
pack
cat "$S"
