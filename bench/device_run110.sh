#!/usr/bin/env bash
# bench/device_run110.sh - two GPUs: run 109 again after its memcheck failed in setup (the 2 s
# timeout of the test's rank 0 also bounded its communicator's creation, which took longer
# under compute-sanitizer): test_gpu_abort, then its memcheck on both GPUs with
# TPLA_TEST_ABORT_MS=10000 (the short timeout, now the context's only). About 4 minutes. The tree under test is snap/run110.tar (`git archive` of the commit).
# Run in the repository root of main with carry ["snap"]: bash bench/device_run110.sh
set -u
. bench/device_lib.sh 110
rm -rf /tmp/n110 && mkdir -p /tmp/n110 && tar xf snap/run110.tar -C /tmp/n110 && cd /tmp/n110
gpu_build test_gpu_abort
CUDA_VISIBLE_DEVICES=0,1 bounded 240 "$L/abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/abort.log")"
grep -vE "^(ok|#)" "$L/abort.log" | head -30 >> "$S"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_ABORT_MS=10000 bounded 400 "$L/memcheck.log" \
  "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_abort
say "memcheck test_gpu_abort (2 GPUs): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck.log" | tr '\n' ' ')"
grep -E "^  |Invalid|ERROR" "$L/memcheck.log" | head -20 >> "$S"
pack
cat "$S"
