#!/usr/bin/env bash
# bench/device_run213.sh - one GPU (nvidia-h200), session 33: run 212 again for test_gpu_overlap
# alone, its rounding-drift check now judging from 200 elements (run 212's one-GPU cases gave
# about 1,400): the library's kernels, then a copy whose fold and ops kernels store halves by
# truncation (__float2*_rz), which should fail it.
# Run in the repository root (no carry): bash bench/device_run213.sh
set -u
. bench/device_lib.sh 213
export CUDA_VISIBLE_DEVICES=0
gpu_build test_gpu_overlap
bounded 200 "$L/overlap.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap (1 GPU): exit $? ($(el)) $(tail -n 1 "$L/overlap.log")"
grep -E "rounding drift|^FAIL" "$L/overlap.log" >> "$S"
pack
rz=/tmp/run213-rz
rm -rf $rz && cp -r "$PWD" $rz && rm -rf $rz/build-gpu
sed -i 's/__float2half_rn(v)/__float2half_rz(v)/; s/__float2bfloat16_rn(v)/__float2bfloat16_rz(v)/' \
  $rz/src/cuda/transport_kernels.cu $rz/src/cuda/ops_kernels.cu
(cd $rz && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/rz_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target test_gpu_overlap > "$L/rz_build.log" 2>&1)
say "build of the truncating copy: exit $? ($(el))"
bounded 200 "$L/rz_overlap.log" $rz/build-gpu/tests/test_gpu_overlap
say "truncating test_gpu_overlap: exit $? (should fail) ($(el)) $(tail -n 1 "$L/rz_overlap.log")"
grep -E "rounding drift|^FAIL" "$L/rz_overlap.log" >> "$S"
pack
cat "$S"
