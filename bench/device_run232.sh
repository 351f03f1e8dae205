#!/usr/bin/env bash
# bench/device_run232.sh - one GPU (nvidia-h200), session 37: HALF products after review 105 (a
# bound past 2^8 leaves its products to TF32; a mixed product mirrors its copied operand first):
#  1. ctest -L gpu (CUDA_VISIBLE_DEVICES=0, TPLA_TEST_REQUIRE_GPUS=1);
#  2. tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=fp32 --svd-max=0 8192x8192 4096x14336, three rounds
#     (the default presets' bounds stay <= 2: run 230's speed expected), and the PyTorch Muon
#     reference (bench/ns_torch.py) in the same run;
#  3. distance from the float64 iteration with safety 0.6 (bench/ns_update_operand_gpu.py, bf16):
#     this library, TF32 (-DTPLA_NS_HALF_PRODUCTS=0, build-tf32) and 625ea54's (before review
#     105, snap/pre105.tar.gz, /tmp/pre105); safety 1 with this library.
# Run in the repository root, carry ["snap"]: bash bench/device_run232.sh
set -u
. bench/device_lib.sh 232
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
(cmake -S . -B build-tf32 -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
  -DCMAKE_C_FLAGS=-DTPLA_NS_HALF_PRODUCTS=0 > "$L/configure_tf32.log" 2>&1 &&
  cmake --build build-tf32 -j "$(nproc)" --target tpla > "$L/build_tf32.log" 2>&1)
say "build tf32: exit $? ($(el))"
tar_build /tmp/pre105 snap/pre105.tar.gz pre105 tpla
ln -sfn /tmp/pre105/build-gpu build-pre105
(cd build-gpu && bounded 300 "$L/ctest_gpu.log" ctest -L gpu --output-on-failure --no-tests=error)
say "ctest -L gpu: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_gpu.log")"
grep -E "Failed|\*\*\*" "$L/ctest_gpu.log" >> "$S"
pack
for round in 1 2 3; do
  bounded 120 "$L/ns_$round.log" build-gpu/tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=fp32 \
    --svd-max=0 8192x8192 4096x14336
  say "round $round: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_$round.log" >> "$S"
done
bounded 200 "$L/torch.log" python3 bench/ns_torch.py --shapes 8192x8192,4096x14336 --iters 20 \
  --warmup 5
say "PyTorch Muon reference: exit $? ($(el))"
tail -n 3 "$L/torch.log" >> "$S"
pack
for v in "gpu 0.6" "tf32 0.6" "pre105 0.6" "gpu 1"; do
  set -- $v
  PYTHONPATH=python TPLA_LIBRARY=build-$1/libtpla.so bounded 120 "$L/f64_$1_$2.log" \
    python3 bench/ns_update_operand_gpu.py --dtype bf16 --safety $2
  say "distance from float64, build-$1, safety $2: exit $? ($(el))"
  grep '^{' "$L/f64_$1_$2.log" >> "$S"
done
pack
cat "$S"
