#!/usr/bin/env bash
# bench/device_run48.sh - (1) compute-sanitizer memcheck of GRAM_SHARDED's pulled products
# (45641c5): `tpla ns -g 2 --algo=gram_sharded`, X and Gram iteration, one small tall and
# one wide shape, both Gram dtypes, with CUDA_MODULE_LOADING=EAGER (runs 42-46: memcheck
# of pulled plans stalls with lazy loading and the plan-time rehearsal; EAGER: 0 errors
# in 40 s), side by side, under 110 s each. (2) The whole GPU suite under sustained load:
# run 46's memchecks ended before the ctest started, so 681aff2's gpu_upload/gpu_fill
# (run 45's four failures under load) was never checked under load. A loop of
# `tpla ns -g 2` (both GPUs, pulled Gram sums) runs beside the whole suite and the
# memchecks. About 6 minutes.
set -u
. bench/device_lib.sh 48
gpu_build tpla_tool
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
: > "$L/load.log"
( while [ ! -e "$L/suite.done" ]; do
    build-gpu/tpla ns -g 2 -n 300 -w 0 -c 0 4096x4096 8192x2048 >> "$L/load.log" 2>&1 ||
      echo "load: exit $?" >> "$L/load.log"
  done ) &
LOAD=$!
for iter in x gram; do
  ( CUDA_MODULE_LOADING=EAGER bounded 110 "$L/memcheck_sharded_$iter.log" "$SAN" --tool memcheck \
      --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 \
      --gram=both --algo=gram_sharded --iterate=$iter 1024x512 96x1000
    echo "memcheck gram_sharded $iter: exit $? $(grep 'ERROR SUMMARY' \
      "$L/memcheck_sharded_$iter.log")" > "$L/memcheck_sharded_$iter.result" ) &
done
OUT=$L/gpu-tests timeout 400 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite under load: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
touch "$L/suite.done"
grep -E "FAIL|HANG|Failed|passed" "$L/gpu_tests.log" | head -12 >> "$S"
wait
say "load: $(grep -c 'tpla ns: OK' "$L/load.log") loops OK, $(grep -c 'load: exit' "$L/load.log") failed"
cat "$L"/memcheck_*.result >> "$S"
say "done ($(el))"
pack
cat "$S"
