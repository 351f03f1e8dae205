#!/usr/bin/env bash
# bench/device_run65.sh - GRAM_SHARDED's pulled products published and pulled block row by
# block row, each under its own flag (this tree), instead of round by round, against main
# (snap/run65_base.tar = 6d3baf9, run 64's new build): run 60's timelines had the peer's
# round 1 arriving 88 us after the own round's GEMMs at 8192^2. A publication alone now
# runs on the compute lane (the transport), which GEMM+AllReduce's steps use too.
# 1. test_gpu_ns on 2 GPUs; memcheck of the pulled X and Gram iterations; test_gpu_overlap;
# 2. tpla ns -g 2 (the four 2-GPU shapes) base/new alternated twice, with tpla ns -g 1 at
#    8192^2 and 16384x4096 before each pair (the speed-up ratios in the same run);
# 3. bench/run_ns.sh (issue #3's table) only if the new tree has the smaller sum of medians.
# About 6 minutes.
# Prepare: git archive HEAD -o snap/run65.tar && git archive main -o snap/run65_base.tar;
# run (carry ["snap"]): mkdir -p /tmp/s65/snap && tar xf snap/run65.tar -C /tmp/s65 &&
#   cp snap/run65_base.tar /tmp/s65/snap/ && cd /tmp/s65 && bash bench/device_run65.sh
set -u
. bench/device_lib.sh 65
ROOT=$PWD
gpu_build tpla_tool test_gpu_ns test_gpu_overlap
BASE=/tmp/s65base
tar_build "$BASE" "$ROOT/snap/run65_base.tar" base tpla_tool
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_overlap.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_overlap.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for it in x gram; do
  CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_$it.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 -c 0 \
    --gram=both --algo=gram_sharded --iterate=$it 1024x512 96x1000
  say "memcheck GRAM_SHARDED $it: exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_$it.log")"
done
pack
ns() { # name tpla gpus args...
  local name=$1 tool=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$tool" ns -g "$g" -s 1234 -n 20 -w 5 \
    --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  ns "one_$rep" "$BASE/build-gpu/tpla" 1 8192x8192 16384x4096
  ns "base_$rep" "$BASE/build-gpu/tpla" 2 8192x8192 16384x4096 4096x14336 14336x4096
  ns "new_$rep" build-gpu/tpla 2 8192x8192 16384x4096 4096x14336 14336x4096
  pack
done
sum() { cat "$L"/"$1"_*.log | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
base=$(sum base) new=$(sum new)
say "sum of medians: base $base ms, new $new ms"
if awk "BEGIN {exit !($new < $base)}"; then
  (OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1)
  say "run_ns: exit $? ($(el))"
  grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
fi
pack
cat "$S"
