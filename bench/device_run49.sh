#!/usr/bin/env bash
# bench/device_run49.sh - AUTO now counts on pulled products at P = 2 (ns_cost.c
# split_product_time; GRAM_SHARDED's Gram iteration no longer excluded when pulled).
# Model (test_ns_dist, bf16 Gram, pulled): AUTO picks GRAM_SHARDED + Gram iteration on all
# four 2-GPU shapes: 8192^2 10.95 ms (X iteration 11.28), 16384x4096 3.41 (GRAM_ALLREDUCE
# Gram 3.85), 4096x14336 3.36 (REDISTRIBUTE Gram 3.80), 14336x4096 3.16 (GRAM_ALLREDUCE
# Gram 3.59). Measured here, alternated twice: AUTO against each forced alternative;
# then bench/run_ns.sh, the same-run table with the PyTorch anchors. About 8 minutes.
set -u
. bench/device_lib.sh 49
gpu_build tpla_tool
ns() { # name limit args...
  local name=$1 limit=$2; shift 2
  bounded "$limit" "$L/$name.log" build-gpu/tpla ns -s 1234 -n 20 -w 5 --gram=input \
    --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
ALL="8192x8192 16384x4096 4096x14336 14336x4096"
for rep in 1 2; do
  ns auto_$rep 90 -g 2 $ALL
  ns sharded_gram_$rep 90 -g 2 --algo=gram_sharded --iterate=gram $ALL
  ns sharded_x_$rep 60 -g 2 --algo=gram_sharded --iterate=x 8192x8192 4096x14336
  ns allreduce_gram_$rep 60 -g 2 --algo=gram_allreduce --iterate=gram 16384x4096 14336x4096
  ns redistribute_gram_$rep 60 -g 2 --algo=redistribute --iterate=gram 4096x14336
done
pack
OUT=$L/run_ns timeout 360 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns: exit $? ($(el))"
pack
cat "$S"
tail -n 30 "$L/run_ns/compare.txt"
