#!/usr/bin/env bash
# bench/device_run75.sh - run 74's row-split products (ns_rowsplit.c, branch exp-full-rows)
# after the fix of Z_1's first half (commit "ns_rowsplit.c: Z_1's first half reads G_1's own
# rows as rows"; 98499f1 before rebases, kept on branch exp-full-rows-run74): it read G_1's
# columns, which cross the peer's rows, before they arrived; run 74's test_gpu_ns failed 38
# uneven Gram-iteration cases on 2 GPUs, and its timings are of that racy build. Host:
# test_ns_dist and the host stand-in of test_gpu_ns pass with lazy pulls
# (TPLA_HOST_LAZY_PULLS=1), which catch the bug.
# The tree run is branch exp-rowsplit-update (`update`): exp-full-rows (`rowsplit`) plus the
# update by halves of W's rows (ns_update_rows: the rows of X' from W's own rows while the
# peer's arrive; no new rounding).
# 1. test_gpu_ns and test_gpu_ns_api on 2 GPUs, memcheck of the Gram iteration, of `update`;
# 2. tpla ns -g 2 on the four 2-GPU shapes: main, rowsplit, update, three rounds, tpla ns -g 1
#    (8192^2, 16384x4096) before each; 3. bench/run_ns.sh (PyTorch in the same run) in the
#    build with the smallest sum of medians; 4. the timeline of 16384x4096 of `update`
#    (bench/run75_rowsplit_trace_patch.py). About 7 minutes.
# Merge (fast-forward after a rebase onto main) the longest prefix main -> rowsplit -> update
# whose steps win, only if test_gpu_ns passes; tests ran on `update` only, so merging
# `rowsplit` alone needs its own test_gpu_ns run.
# Prepare (in /work/exp-full, on exp-rowsplit-update): git archive main -o
#   /work/main/snap/run75_main.tar && git archive exp-full-rows -o
#   /work/main/snap/run75_rowsplit.tar && git archive HEAD -o /work/main/snap/run75.tar;
# run from /work/main (carry ["snap"]): mkdir -p /tmp/s75/snap && tar xf snap/run75.tar -C
#   /tmp/s75 && cp snap/run75_*.tar /tmp/s75/snap/ && cd /tmp/s75 && bash bench/device_run75.sh
set -u
. bench/device_lib.sh 75
ROOT=$PWD
for b in main rowsplit; do
  tar_build "/tmp/s75$b" "$ROOT/snap/run75_$b.tar" "$b" tpla_tool &
done
gpu_build tpla_tool test_gpu_ns test_gpu_ns_api
wait
pack
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns (update), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
grep -E "Gram iteration" "$L/test_gpu_ns.log" >> "$S"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_api.log" build-gpu/tests/test_gpu_ns_api
say "test_gpu_ns_api (update): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_api.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_gram.log" "$SAN" --tool memcheck \
  --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 -c 0 \
  --gram=both --algo=gram_sharded --iterate=gram 1024x512 96x1000
say "memcheck (update) GRAM_SHARDED gram: exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_gram.log")"
pack
dir_of() { [ "$1" = update ] && echo "$ROOT" || echo "/tmp/s75$1"; }
ns() { # name build gpus shapes...
  local name=$1 b=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$(dir_of "$b")/build-gpu/tpla" ns -g "$g" \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2 3; do
  ns "one_$rep" main 1 8192x8192 16384x4096
  for b in main rowsplit update; do
    ns "${b}_$rep" "$b" 2 8192x8192 16384x4096 4096x14336 14336x4096
  done
  pack
done
sum() { cat "$L"/"$1"_?.log | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
best=main best_t=$(sum main)
for b in rowsplit update; do
  t=$(sum $b)
  awk "BEGIN {exit !($t < $best_t)}" && best=$b best_t=$t
done
say "sums of medians: main $(sum main), rowsplit $(sum rowsplit), update $(sum update) ms;" \
  "run_ns in $best"
(cd "$(dir_of $best)" && OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1)
say "run_ns ($best): exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
patched_build /tmp/s75x "$ROOT/bench/run75_rowsplit_trace_patch.py"
ns_trace tall_update 16384x4096
cd "$ROOT" || exit 1
pack
cat "$S"
