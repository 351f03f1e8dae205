#!/usr/bin/env bash
# bench/device_run114.sh - two GPUs: after c5a5ed8 (overlap_plan.c's descriptor checks moved into
# overlap_desc.c, code unchanged), the overlap tests that create plans of every kind:
# test_gpu_overlap, test_gpu_overlap_groups, test_gpu_overlap_mlp and test_gpu_abort, on both
# GPUs. About 2 minutes (the last of session 17's device time). The tree under test is
# snap/run114.tar (`git archive` of the commit).
# Run in the repository root of main with carry ["snap"]: bash bench/device_run114.sh
set -u
. bench/device_lib.sh 114
rm -rf /tmp/n114 && mkdir -p /tmp/n114 && tar xf snap/run114.tar -C /tmp/n114 && cd /tmp/n114
gpu_build test_gpu_overlap test_gpu_overlap_groups test_gpu_overlap_mlp test_gpu_abort
for t in test_gpu_overlap test_gpu_overlap_groups test_gpu_overlap_mlp test_gpu_abort; do
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$t.log" build-gpu/tests/$t
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
pack
cat "$S"
