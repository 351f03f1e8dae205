#!/usr/bin/env bash
# bench/device_run41.sh - where test_gpu_ns hangs on 2 GPUs with the Gram summed by
# pulls (runs 39 and 40; NCCL sums pass): TPLA_NS_TEST_TRACE=1 prints each rank's
# case before it starts. Under 60 s; the last case each rank started is the one.
set -u
. bench/device_lib.sh 41
gpu_build test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 TPLA_NS_TEST_TRACE=1 bounded 60 "$L/test_gpu_ns_2.log" \
  build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 GPUs (pulls, traced): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_2.log")"
grep -E "^# rank [01] starts" "$L/test_gpu_ns_2.log" | tail -n 4 >> "$S"
grep -cE "^# rank 0 starts" "$L/test_gpu_ns_2.log" | sed 's/^/cases started by rank 0: /' >> "$S"
pack
cat "$S"
