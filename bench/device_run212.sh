#!/usr/bin/env bash
# bench/device_run212.sh - one GPU (nvidia-h200), session 33: test_gpu_overlap's new rounding-drift
# check of half outputs on cuBLASLt's and the fold kernel's results, and an A/B where the fold and
# ops kernels store halves by truncation (__float2*_rz), to see whether one GPU's cases carry
# enough of their elements to catch it; compute-sanitizer memcheck of the session's new GPU tests
# (collective aliasing, the two-stream sums); test_gpu_fuzz for 120 s over the changed kernels.
# Run in the repository root (no carry): bash bench/device_run212.sh
set -u
. bench/device_lib.sh 212
export CUDA_VISIBLE_DEVICES=0
gpu_build test_gpu_overlap test_gpu_coll_aliasing test_gpu_norm test_gpu_ops test_gpu_fuzz
bounded 300 "$L/overlap.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap (1 GPU): exit $? ($(el)) $(tail -n 1 "$L/overlap.log")"
grep -E "rounding drift|^FAIL" "$L/overlap.log" >> "$S"
pack
for t in test_gpu_coll_aliasing test_gpu_norm; do
  TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 bounded 200 "$L/memcheck_$t.log" \
    compute-sanitizer --tool memcheck --report-api-errors no build-gpu/tests/$t
  say "memcheck $t: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_$t.log") $(tail -n 1 "$L/memcheck_$t.log")"
done
pack
TPLA_FUZZ_SECONDS=120 bounded 200 "$L/fuzz.log" build-gpu/tests/test_gpu_fuzz
say "test_gpu_fuzz (120 s): exit $? ($(el)) $(tail -n 1 "$L/fuzz.log")"
grep -E "^# (gemm|fp8|ns1|summary)|FAIL" "$L/fuzz.log" | head -n 10 >> "$S"
pack
rz=/tmp/run212-rz
rm -rf $rz && cp -r "$PWD" $rz && rm -rf $rz/build-gpu
sed -i 's/__float2half_rn(v)/__float2half_rz(v)/; s/__float2bfloat16_rn(v)/__float2bfloat16_rz(v)/' \
  $rz/src/cuda/transport_kernels.cu $rz/src/cuda/ops_kernels.cu
say "truncating copy: $(grep -c '_rz(v)' $rz/src/cuda/transport_kernels.cu $rz/src/cuda/ops_kernels.cu | tr '\n' ' ')"
(cd $rz && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/rz_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target test_gpu_overlap > "$L/rz_build.log" 2>&1)
say "build of the truncating copy: exit $? ($(el))"
bounded 300 "$L/rz_overlap.log" $rz/build-gpu/tests/test_gpu_overlap
say "truncating test_gpu_overlap: exit $? (should fail) ($(el)) $(tail -n 1 "$L/rz_overlap.log")"
grep -E "rounding drift|^FAIL" "$L/rz_overlap.log" >> "$S"
pack
cat "$S"
