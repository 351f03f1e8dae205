#!/usr/bin/env bash
# bench/device_run2.sh - GPU session 2: the whole test suite (1 and 2 GPUs,
# MPI) with NS and overlap GPU tests, compute-sanitizer memcheck on one NS
# run and memcheck + racecheck on one overlapped run.
#   bash bench/device_run2.sh        (on the device machine; logs under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
start=$(date +%s)
MEMCHECK_TESTS=test_gpu_gemm bash tests/gpu/run.sh --memcheck > "$OUT/gpu_tests.log" 2>&1
echo "tests: $(tail -n 1 "$OUT/gpu_tests.log") ($(( $(date +%s) - start )) s)"
SAN=compute-sanitizer
command -v $SAN >/dev/null || SAN=/usr/local/cuda/bin/compute-sanitizer
san() { # san LOG tool command...
  local log=$1 tool=$2; shift 2
  TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_QUICK=1 timeout 300 $SAN --tool "$tool" \
    --report-api-errors no --error-exitcode 99 "$@" > "$OUT/$log" 2>&1
  echo "$tool $*: exit $? ($(grep -m1 'ERROR SUMMARY' "$OUT/$log"))"
}
{
san san_ns.log memcheck build-gpu/tpla ns -g 2 -n 2 -w 1 -c 0 1024x1024 2048x512
san san_ovl_mem.log memcheck build-gpu/tests/test_gpu_overlap
san san_ovl_race.log racecheck build-gpu/tests/test_gpu_overlap
} > "$OUT/sanitizers.txt" 2>&1
echo "total $(( $(date +%s) - start )) s"
grep -E "^== |passed|failed" "$OUT/gpu_tests.log" | tail -n 30
cat "$OUT/sanitizers.txt"
