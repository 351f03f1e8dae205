#!/usr/bin/env bash
# bench/device_run194.sh - one GPU (nvidia-h200), session 30: the Newton-Schulz workspace groups
# (ns_share.c) and the split GPU tests (test_gpu_norm from test_gpu_ops; test_gpu_ns and
# test_gpu_fuzz sharing ns_team.h's shard helpers): everything built, one CTest pass on the one
# GPU, test_gpu_ns_share's figures, then compute-sanitizer memcheck of test_gpu_ns_share,
# test_gpu_norm and test_gpu_ops. Run in the repository root (no carry): bash bench/device_run194.sh
set -u
. bench/device_lib.sh 194
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && CUDA_VISIBLE_DEVICES=0 bounded 260 "$L/ctest.log" ctest --output-on-failure \
  --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout" "$L/ctest.log" | head -n 10 >> "$S"
pack
CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/ns_share.log" build-gpu/tests/test_gpu_ns_share
say "test_gpu_ns_share: exit $? ($(el)) $(tail -n 1 "$L/ns_share.log")"
grep -E "^# " "$L/ns_share.log" >> "$S"
pack
for t in test_gpu_ns_share test_gpu_norm test_gpu_ops; do
  [ "$(( $(date +%s) - t0 ))" -lt 480 ] || { say "memcheck $t: not run (time)"; continue; }
  CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 110 \
    "$L/memcheck_$t.log" compute-sanitizer --tool memcheck --report-api-errors no build-gpu/tests/$t
  say "memcheck $t: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_$t.log") $(grep -E 'passed' "$L/memcheck_$t.log" | tail -n 1)"
  pack
done
cat "$S"
