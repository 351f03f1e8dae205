#!/usr/bin/env bash
# bench/device_run109.sh - two GPUs: test_gpu_abort at this commit (the watchdog reads the peers'
# abort marks only once the oldest call has run 100 ms; a new case: a GRAM_SHARDED Newton-Schulz
# call whose peer never calls), then compute-sanitizer memcheck of it on both GPUs. About 4
# minutes. The tree under test is snap/run109.tar (`git archive` of the commit).
# Run in the repository root of main with carry ["snap"]: bash bench/device_run109.sh
set -u
. bench/device_lib.sh 109
rm -rf /tmp/n109 && mkdir -p /tmp/n109 && tar xf snap/run109.tar -C /tmp/n109 && cd /tmp/n109
gpu_build test_gpu_abort
CUDA_VISIBLE_DEVICES=0,1 bounded 240 "$L/abort.log" build-gpu/tests/test_gpu_abort
say "test_gpu_abort: exit $? ($(el)) $(tail -n 1 "$L/abort.log")"
grep -vE "^(ok|#)" "$L/abort.log" | head -30 >> "$S"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_NO_WATCHDOG=1 bounded 300 "$L/memcheck.log" \
  "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tests/test_gpu_abort
say "memcheck test_gpu_abort (2 GPUs): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck.log" | tr '\n' ' ')"
grep -E "^  |Invalid|ERROR" "$L/memcheck.log" | head -20 >> "$S"
pack
cat "$S"
