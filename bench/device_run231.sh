#!/usr/bin/env bash
# bench/device_run231.sh - one GPU (nvidia-h200), session 37, after bench/device_run230.sh on the
# same machine (its build-gpu and build-tf32; built again if the machine is fresh):
#  1. accuracy: bench/ns_update_operand_gpu.py (distance from the float64 iteration, 5 Muon steps,
#     fp32 Gram, X and Gram iteration), bf16 and fp16 inputs, HALF (build-gpu) and TF32
#     (build-tf32);
#  2. compute-sanitizer memcheck of HALF runs of both iterations (tpla ns, 512x2048).
# Run in the repository root (no carry): bash bench/device_run231.sh
set -u
. bench/device_lib.sh 231
export CUDA_VISIBLE_DEVICES=0
[ -x build-gpu/tpla ] || gpu_build tpla_tool tpla
[ -e build-tf32/libtpla.so ] || { cmake -S . -B build-tf32 -DCMAKE_BUILD_TYPE=Release \
  -DTPLA_CUDA=ON -DCMAKE_C_FLAGS=-DTPLA_NS_HALF_PRODUCTS=0 > "$L/configure_tf32.log" 2>&1 &&
  cmake --build build-tf32 -j "$(nproc)" --target tpla_tool tpla > "$L/build_tf32.log" 2>&1
  say "build tf32: exit $? ($(el))"; }
for b in gpu tf32; do
  for d in bf16 fp16; do
    PYTHONPATH=python TPLA_LIBRARY=build-$b/libtpla.so bounded 120 "$L/f64_${b}_$d.log" \
      python3 bench/ns_update_operand_gpu.py --dtype $d
    say "distance from float64, build-$b, $d: exit $? ($(el))"
    grep '^{' "$L/f64_${b}_$d.log" >> "$S"
  done
  pack
done
for it in x gram; do
  bounded 200 "$L/memcheck_$it.log" compute-sanitizer --tool memcheck --report-api-errors no \
    build-gpu/tpla ns -g 1 -n 2 -w 1 --gram=fp32 --svd-max=0 --iterate=$it 512x2048
  say "memcheck, --iterate=$it: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/memcheck_$it.log")"
done
pack
cat "$S"
