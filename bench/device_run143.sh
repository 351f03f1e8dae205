#!/usr/bin/env bash
# bench/device_run143.sh - one GPU (nvidia-h200), session 22, branch exp-direct: the CUDA path
# of TPLA_OVERLAP_TUNE=1 (the rehearsal times cuBLASLt's first results per GEMM shape) on one
# GPU, before a two-GPU run: test_gpu_overlap with it, the same quick subset under
# compute-sanitizer memcheck, and `tpla gemm-rs|gemm-ar -g 1` checked (-c 1) with and without.
# Run in the repository root of branch exp-direct (no carry), kind nvidia-h200:
#   bash bench/device_run143.sh
set -u
. bench/device_lib.sh 143
gpu_build tpla_tool test_gpu_overlap
TPLA_OVERLAP_TUNE=1 TPLA_OVERLAP_DIRECT=1 bounded 200 "$L/overlap_tune.log" \
  build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, TUNE=1 DIRECT=1: exit $? ($(el)) $(tail -n 1 "$L/overlap_tune.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TPLA_OVERLAP_TUNE=1 TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
  bounded 300 "$L/memcheck_tune.log" "$SAN" --tool memcheck --report-api-errors no \
  --error-exitcode 9 build-gpu/tests/test_gpu_overlap
say "memcheck test_gpu_overlap quick, TUNE=1: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_tune.log" | tail -n 1) $(grep -E 'passed' "$L/memcheck_tune.log" | tail -n 1)"
pack
for tune in 0 1; do
  for op in "gemm-rs -d e4m3 --accum=split" "gemm-rs" "gemm-ar"; do
    log="$L/tool_${tune}_${op%% *}_$(echo "$op" | wc -w).log"
    # shellcheck disable=SC2086
    bounded 60 "$log" env TPLA_OVERLAP_TUNE=$tune build-gpu/tpla $op -g 1 -n 20 -w 5 -c 1 \
      -s 1234 2048 1024 2048
    say "tune $tune $op: exit $? $(grep -E '^ +gemm-' "$log" | tr -s ' ')"
  done
done
pack
cat "$S"
