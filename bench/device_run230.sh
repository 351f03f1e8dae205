#!/usr/bin/env bash
# bench/device_run230.sh - one GPU (nvidia-h200), session 37: the s x s products of an fp32 Gram
# of a half input in fp16 on scaled copies (ns_products HALF, src/core/ns.h) against TF32 (the
# same tree built with -DTPLA_NS_HALF_PRODUCTS=0, build-tf32) and against 45db65f's HALF (plain
# copies after the fp32 mirrors; `git archive` in snap/half1.tar.gz, built in /tmp/half1):
#  1. ctest -L gpu and test_ns_half_products (host executor), CUDA_VISIBLE_DEVICES=0,
#     TPLA_TEST_REQUIRE_GPUS=1;
#  2. speed: tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=fp32 --svd-max=0 on six shapes, the three
#     builds, three rounds alternating; the bf16 Gram once (unchanged code);
#  3. the anchor in the same run: bench/ns_torch.py (PyTorch's Muon reference) on the issue's
#     two 1-GPU shapes.
# bench/device_run231.sh follows on the same machine (accuracy, memcheck).
# Run in the repository root, carry ["snap"]: bash bench/device_run230.sh
set -u
. bench/device_lib.sh 230
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
(cmake -S . -B build-tf32 -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
  -DCMAKE_C_FLAGS=-DTPLA_NS_HALF_PRODUCTS=0 > "$L/configure_tf32.log" 2>&1 &&
  cmake --build build-tf32 -j "$(nproc)" --target tpla_tool tpla > "$L/build_tf32.log" 2>&1)
say "build tf32: exit $? ($(el))"
tar_build /tmp/half1 snap/half1.tar.gz half1 tpla_tool tpla
ln -sfn /tmp/half1/build-gpu build-half1
(cd build-gpu && bounded 300 "$L/ctest_gpu.log" ctest -L gpu --output-on-failure --no-tests=error)
say "ctest -L gpu: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_gpu.log")"
grep -E "Failed|\*\*\*" "$L/ctest_gpu.log" >> "$S"
bounded 120 "$L/half_products_test.log" build-gpu/tests/test_ns_half_products
say "test_ns_half_products: exit $? ($(el)) $(tail -n 1 "$L/half_products_test.log")"
pack
SHAPES="8192x8192 4096x14336 16384x4096 14336x4096 2048x8192 4096x4096"
for round in 1 2 3; do
  for b in gpu half1 tf32; do
    bounded 150 "$L/ns_${b}_$round.log" build-$b/tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=fp32 \
      --svd-max=0 $SHAPES
    say "round $round, build-$b: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_${b}_$round.log" | sed "s/^/  $b: /" >> "$S"
  done
  pack
done
bounded 150 "$L/ns_bf16gram.log" build-gpu/tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=input \
  --svd-max=0 $SHAPES
say "bf16 Gram: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_bf16gram.log" | sed "s/^/  bf16 Gram: /" >> "$S"
bounded 240 "$L/torch.log" python3 bench/ns_torch.py --shapes 8192x8192,4096x14336 --iters 20 \
  --warmup 5
say "PyTorch Muon reference: exit $? ($(el))"
tail -n 6 "$L/torch.log" >> "$S"
pack
cat "$S"
