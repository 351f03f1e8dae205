#!/usr/bin/env bash
# bench/device_run24.sh - the NS default after TPLA_NS_ITERATE_AUTO (0919c2a):
# (1) test_gpu_ns (its AUTO cases now leave the iteration to the plan) and
# test_gpu_ns_api on 1 and 2 GPUs; (2) compute-sanitizer memcheck of the Gram
# iteration under GRAM_ALLREDUCE and REDISTRIBUTE (run 23's memcheck ran
# GATHER only); (3) bench/run_ns.sh, issue #3's benchmark with the PyTorch
# anchors, as a user runs it (AUTO everywhere), with the float64 check on
# 4096x4096 and 2048x8192. About 8 minutes.
set -u
. bench/device_lib.sh 24
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build: exit $? ($(el)), warnings: $(grep -c 'warning' "$L/build.log")"
for t in test_gpu_ns test_gpu_ns_api; do
  bounded 150 "$L/$t.log" build-gpu/tests/$t
  say "$t (all GPUs): exit $? ($(el)): $(tail -n 1 "$L/$t.log")"
done
grep -E "^# AUTO on|cases, [0-9]+ failures" "$L/test_gpu_ns.log" >> "$S"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for algo in gram redist; do
  bounded 60 "$L/memcheck_$algo.log" "$SAN" --tool memcheck --report-api-errors no \
    --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 --gram=both --iterate=gram \
    --algo=$algo 1024x512 512x1024 96x1000
  say "memcheck --iterate=gram --algo=$algo: exit $? ($(el))"
  grep -E "ERROR SUMMARY|Invalid|misaligned" "$L/memcheck_$algo.log" | head -n 3 >> "$S"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/memcheck_$algo.log" >> "$S"
done
pack
OUT=$L/ns BUILD=$PWD/build-gpu CHECK_SHAPE="4096x4096 2048x8192" NS_CHECK_TIMEOUT=90 \
  timeout $(( 570 - ($(date +%s) - t0) )) bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns.sh: exit $? ($(el))"
cat "$L/ns/compare.txt" >> "$S" 2>/dev/null
pack
cat "$S"
