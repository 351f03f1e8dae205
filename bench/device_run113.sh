#!/usr/bin/env bash
# bench/device_run113.sh - two GPUs: test_gpu_abort and tests/python/gpu/abort_procs.py at the
# session's last commit (tpla_ctx_destroy now stops the watchdog before it clears ctx->impl).
# About 2.5 minutes. The tree under test is snap/run113.tar (`git archive` of the commit).
# Run in the repository root of main with carry ["snap"]: bash bench/device_run113.sh
set -u
. bench/device_lib.sh 113
rm -rf /tmp/n113 && mkdir -p /tmp/n113 && tar xf snap/run113.tar -C /tmp/n113 && cd /tmp/n113
gpu_build tpla test_gpu_abort
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/abort.log")"
grep -vE "^(ok|#)" "$L/abort.log" | head -20 >> "$S"
pack
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 120 "$L/abort_procs.log" \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/abort_procs.py
say "abort_procs.py (2 processes): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/abort_procs.log" | tr '\n' ' ')"
pack
cat "$S"
