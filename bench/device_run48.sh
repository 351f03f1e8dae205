#!/usr/bin/env bash
# bench/device_run48.sh - compute-sanitizer memcheck of GRAM_SHARDED's pulled products
# (45641c5): `tpla ns -g 2 --algo=gram_sharded`, X and Gram iteration, one small tall and
# one wide shape, both Gram dtypes, with CUDA_MODULE_LOADING=EAGER (runs 42-46: memcheck
# of pulled plans stalls with lazy loading and the plan-time rehearsal; EAGER: 0 errors
# in 40 s). The two run side by side, under 110 s each. About 2.5 minutes.
set -u
. bench/device_lib.sh 48
gpu_build tpla_tool
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for iter in x gram; do
  ( CUDA_MODULE_LOADING=EAGER bounded 110 "$L/memcheck_sharded_$iter.log" "$SAN" --tool memcheck \
      --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 \
      --gram=both --algo=gram_sharded --iterate=$iter 1024x512 96x1000
    echo "memcheck gram_sharded $iter: exit $? $(grep 'ERROR SUMMARY' \
      "$L/memcheck_sharded_$iter.log")" > "$L/memcheck_sharded_$iter.result" ) &
done
wait
cat "$L"/memcheck_*.result >> "$S"
say "done ($(el))"
pack
cat "$S"
