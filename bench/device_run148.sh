#!/usr/bin/env bash
# bench/device_run148.sh - one GPU (nvidia-h200), session 23: run 147's initcheck reports again
# with `--check-bulk-copy yes`. Run 147 found uninitialized reads only of memory that cuBLASLt's
# GEMMs alone had written (FP8's padded D', the serial GEMM+RS's product, the Gram iteration's
# products read by the mirror, the amax of a D copied from D'); Hopper's GEMMs store through
# bulk (TMA) copies, which initcheck tracks only with that option. If the reports go, they were
# the sanitizer's; what stays is ours. Also racecheck of test_gpu_fp8_kernels again (run 147:
# exit 9 in its fifth test, no hazard) and initcheck of the two tests run 147's 90 s cut.
# Run in the repository root (no carry): bash bench/device_run148.sh
set -u
. bench/device_lib.sh 148
gpu_build test_gpu_fp8_kernels test_gpu_ns_api test_gpu_ns test_gpu_fp8 test_gpu_overlap
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$SAN" --version > "$L/sanitizer_version.txt" 2>&1
"$SAN" --help > "$L/sanitizer_help.txt" 2>&1
sanitize() { # TOOL TEST LIMIT [OPTIONS...]
  local tool=$1 t=$2 limit=$3 log="$L/$1_$2.log"; shift 3
  if [ "$(( $(date +%s) - t0 ))" -gt 560 ]; then say "$tool $t: not run (time)"; return; fi
  CUDA_VISIBLE_DEVICES=0 CUDA_MODULE_LOADING=EAGER TPLA_TEST_QUICK=1 TPLA_TEST_NO_WATCHDOG=1 \
    TPLA_TEST_SANITIZER=1 bounded "$limit" "$log" "$SAN" --tool "$tool" --report-api-errors no \
    --error-exitcode 99 --print-limit 2000 "$@" "build-gpu/tests/$t"
  say "$tool $t: exit $? ($(el)) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|TIMEOUT' "$log" | tail -n 3 | tr '\n' ' ')"
  grep -E '^=========     at |Host Frame: [a-z_]*(tpla|ns_|fp8|ovl|rs_|stage|mirror)' "$log" | sort | uniq -c \
    | sort -rn | head -n 12 > "$L/${tool}_$t.where.txt"
}
for t in test_gpu_ns_api test_gpu_overlap test_gpu_fp8; do
  sanitize initcheck $t 120 --check-bulk-copy yes
done
pack
sanitize racecheck test_gpu_fp8_kernels 120
pack
sanitize initcheck test_gpu_fp8_kernels 150 --check-bulk-copy yes
pack
sanitize initcheck test_gpu_ns 200 --check-bulk-copy yes
pack
cat "$S"
