#!/usr/bin/env bash
# bench/device_run63.sh - prepared in session 10, not run: mirror_upper's chunk kernel with the
# next tile's loads in flight during the current tile's writes (branch exp-mirror-pipelined,
# snap/run63_exp.tar = its `git archive`) against main (this tree). Every rank mirrors the whole
# s x s matrix, as one GPU does, so the gain is the same absolute time on 1 and 2 GPUs: it
# raises the 2-GPU speed-up (run 58: 8192^2 1.79, 0.07 ms short of 1.8; 10 mirrors a call).
# 1. test_gpu_ops (bitwise mirror checks) and test_gpu_ns (2 GPUs) of the branch;
# 2. tpla_mirror_bench of both; 3. tpla ns, main against the branch, alternated twice:
#    8192^2 and 16384x4096 on 1 and on 2 GPUs (bf16 Gram). About 4 minutes.
# Prepare: git archive HEAD -o snap/run63.tar && git archive exp-mirror-pipelined -o snap/run63_exp.tar;
# run (carry ["snap"]): mkdir -p /tmp/s63/snap && tar xf snap/run63.tar -C /tmp/s63 &&
#   cp snap/run63_exp.tar /tmp/s63/snap/ && cd /tmp/s63 && bash bench/device_run63.sh
set -u
. bench/device_lib.sh 63
ROOT=$PWD
gpu_build tpla_tool tpla_mirror_bench
EXP=/tmp/s63exp
tar_build "$EXP" "$ROOT/snap/run63_exp.tar" exp-mirror-pipelined tpla_tool tpla_mirror_bench test_gpu_ops test_gpu_ns
bounded 120 "$L/test_gpu_ops_exp.log" "$EXP/build-gpu/tests/test_gpu_ops"
say "test_gpu_ops (exp): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ops_exp.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_exp.log" "$EXP/build-gpu/tests/test_gpu_ns"
say "test_gpu_ns (exp), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_exp.log")"
for b in main exp; do
  tool=$([ $b = main ] && echo build-gpu || echo "$EXP/build-gpu")/tpla_mirror_bench
  bounded 60 "$L/mirror_bench_$b.log" "$tool" 50
  say "mirror_bench $b: exit $?"
  grep -vE "^#|done" "$L/mirror_bench_$b.log" | sed "s/^/$b /" >> "$S"
done
pack
ns() { # name tpla gpus args...
  local name=$1 tool=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=$([ "$g" = 1 ] && echo 0 || echo 0,1) bounded 90 "$L/$name.log" "$tool" \
    ns -g "$g" -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  for b in main exp; do
    tool=$([ $b = main ] && echo build-gpu || echo "$EXP/build-gpu")/tpla
    ns "${b}_1gpu_$rep" "$tool" 1 8192x8192 16384x4096
    ns "${b}_2gpu_$rep" "$tool" 2 8192x8192 16384x4096
  done
  pack
done
cat "$S"
