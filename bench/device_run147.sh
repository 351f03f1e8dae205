#!/usr/bin/env bash
# bench/device_run147.sh - one GPU (nvidia-h200), session 23: the compute-sanitizer tools never
# run on tpla so far. Memcheck and racecheck ran on the overlap path (runs 126-127) and memcheck
# on the NS path (runs 109-110); initcheck (reads of device memory nothing wrote) and synccheck
# (barrier misuse) never ran, and racecheck never ran on the elementwise, mirror and FP8 kernels.
#  1. initcheck of the one-GPU tests, the quickest first;
#  2. synccheck and racecheck of the tests that run tpla's own kernels (ops, FP8 kernels, NS).
# Each run is bounded; a step that would start past 540 s is not run. Every log keeps the
# sanitizer's own summary line.
# Run in the repository root (no carry): bash bench/device_run147.sh
set -u
. bench/device_lib.sh 147
gpu_build test_gpu_fp8_kernels test_gpu_gemm test_gpu_ns_api test_gpu_ns test_gpu_fp8 \
  test_gpu_overlap test_gpu_ops
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$SAN" --version > "$L/sanitizer_version.txt" 2>&1
sanitize() { # TOOL TEST LIMIT
  local tool=$1 t=$2 limit=$3 log="$L/$1_$2.log"
  if [ "$(( $(date +%s) - t0 ))" -gt 540 ]; then say "$tool $t: not run (time)"; return; fi
  CUDA_VISIBLE_DEVICES=0 CUDA_MODULE_LOADING=EAGER TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 \
    TPLA_TEST_SANITIZER=1 bounded "$limit" "$log" "$SAN" --tool "$tool" --report-api-errors no \
    --error-exitcode 99 "build-gpu/tests/$t"
  say "$tool $t: exit $? ($(el)) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|TIMEOUT' "$log" | tail -n 3 | tr '\n' ' ')"
}
for t in test_gpu_fp8_kernels test_gpu_gemm test_gpu_ns_api test_gpu_ns test_gpu_fp8 test_gpu_overlap; do
  sanitize initcheck $t 90
done
pack
for t in test_gpu_fp8_kernels test_gpu_ns; do
  sanitize synccheck $t 60
  sanitize racecheck $t 90
done
pack
sanitize initcheck test_gpu_ops 120
sanitize racecheck test_gpu_ops 120
pack
cat "$S"
