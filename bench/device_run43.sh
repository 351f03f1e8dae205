#!/usr/bin/env bash
# bench/device_run43.sh - prepared, not run: where GRAM_SHARDED's split products lose
# (run 37: 191-566 us each against ~161 for a redundant product and its mirror; run 36:
# GRAM_SHARDED with the Gram iteration 17-36% slower than GRAM_ALLREDUCE's on the tall
# shapes) and what the pulled Gram sums (TPLA_NS_GRAM_SUM=pull) leave exposed. A patched
# copy (bench/run43_ns_trace_patch.py: run 37's timeline plus marks inside ns_shard.c's
# split product and ns_pull.c) prints TRACE_NS lines of the 8th execute. Run it after
# bench/device_run42.sh has shown whether test_gpu_ns passes with pulls. About 2 minutes.
set -u
. bench/device_lib.sh 43
patched_build /tmp/s43x "$PWD/bench/run43_ns_trace_patch.py"
run() { # name sum args...
  local name=$1 sum=$2; shift 2
  TPLA_NS_GRAM_SUM=$sum CUDA_VISIBLE_DEVICES=0,1 TPLA_TRACE_NS=8 \
    bounded 60 "$L/$name.log" build-exp/tpla ns -g 2 -s 1234 -n 20 -w 5 --gram=input \
    --svd-max=0 "$@"
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" >> "$S"
}
run square_auto nccl 8192x8192
run tall_sharded_gram nccl --algo=gram_sharded --iterate=gram 16384x4096
run tall_auto_pull pull 16384x4096
run square_auto_pull pull 8192x8192
pack
cat "$S"
