#!/usr/bin/env bash
# bench/device_run64.sh - GRAM_SHARDED's X iteration with its polynomial P computed in the
# pulls' window (this tree): the own rows at their place, the peer's pulled beside them, no
# placement after the GEMMs (run 60's timelines, 8192^2: 43 us a product), the exchange closed
# before the mirror. Against snap/run64_base.tar (main without it; same library as run 60).
# 1. test_gpu_ns on 2 GPUs; memcheck of the pulled X iteration (two windows, and one);
# 2. tpla ns -g 2 (the four 2-GPU shapes) base/new alternated twice, with tpla ns -g 1 at
#    8192^2 and 16384x4096 before each pair (the speed-up ratios in the same run);
# 3. bench/run_ns.sh (issue #3's table) from the tree with the smaller sum of medians.
# About 7 minutes.
# Prepare: git archive HEAD -o snap/run64.tar && git archive main -o snap/run64_base.tar;
# run (carry ["snap"]): mkdir -p /tmp/s64/snap && tar xf snap/run64.tar -C /tmp/s64 &&
#   cp snap/run64_base.tar /tmp/s64/snap/ && cd /tmp/s64 && bash bench/device_run64.sh
set -u
. bench/device_lib.sh 64
ROOT=$PWD
gpu_build tpla_tool test_gpu_ns
BASE=/tmp/s64base
tar_build "$BASE" "$ROOT/snap/run64_base.tar" base tpla_tool
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for w in 2 1; do
  TPLA_NS_PULL_WINDOWS=$w CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_w$w.log" "$SAN" \
    --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 \
    -c 0 --gram=both --algo=gram_sharded --iterate=x 1024x512 96x1000
  say "memcheck X iteration, $w window(s): exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_w$w.log")"
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
if awk "BEGIN {exit !($new <= $base)}"; then pick=$ROOT; else pick=$BASE; fi
say "run_ns with $pick"
(cd "$pick" && OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1)
say "run_ns: exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
cat "$S"
