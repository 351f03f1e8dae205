#!/usr/bin/env bash
# bench/device_run61.sh - prepared in session 10, not run: GRAM_SHARDED's pulled products with
# the own rows computed straight into their place in D and copied into the window by a copy
# engine on lane 1 (branch exp-direct-own-rows, snap/run61_exp.tar = its `git archive`), against
# main (this tree): run 50's timelines had ~19 us a product (4096) of placing the own rows after
# the GEMMs; the copy instead delays only the peer's pull of the last round (a few us).
# Unlike 7c2618d (run 58: 0.4-1.9% slower), nothing is placed or mirrored beside the peer's
# pulls after the GEMMs. Host: the same bits as NCCL's sums (test_gram_sum_by_pulls), ASan,
# valgrind. 1. test_gpu_ns on 2 GPUs and memcheck (X and Gram iteration) of the branch;
# 2. tpla ns -g 2, main against the branch, alternated twice, the four 2-GPU shapes.
# About 4 minutes. If the branch wins on every shape: merge it.
# Prepare: git archive HEAD -o snap/run61.tar && git archive exp-direct-own-rows -o snap/run61_exp.tar;
# run (carry ["snap"]): mkdir -p /tmp/s61/snap && tar xf snap/run61.tar -C /tmp/s61 &&
#   cp snap/run61_exp.tar /tmp/s61/snap/ && cd /tmp/s61 && bash bench/device_run61.sh
set -u
. bench/device_lib.sh 61
ROOT=$PWD
gpu_build tpla_tool
EXP=/tmp/s61exp
tar_build "$EXP" "$ROOT/snap/run61_exp.tar" exp-direct-own-rows tpla_tool test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_exp.log" "$EXP/build-gpu/tests/test_gpu_ns"
say "test_gpu_ns (exp), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_exp.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for it in x gram; do
  CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_exp_$it.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 "$EXP/build-gpu/tpla" ns -g 2 -n 2 -w 0 -c 0 \
    --gram=both --algo=gram_sharded --iterate=$it 1024x512 96x1000
  say "memcheck (exp) GRAM_SHARDED $it: exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_exp_$it.log")"
done
pack
ns() { # name tpla args...
  local name=$1 tool=$2; shift 2
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$tool" ns -g 2 -s 1234 -n 20 -w 5 \
    --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  ns "main_$rep" build-gpu/tpla 8192x8192 16384x4096 4096x14336 14336x4096
  ns "exp_$rep" "$EXP/build-gpu/tpla" 8192x8192 16384x4096 4096x14336 14336x4096
  pack
done
sum() { cat "$L"/"$1"_*.log | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
say "sum of medians: main $(sum main) ms, exp-direct-own-rows $(sum exp) ms"
cat "$S"
