#!/usr/bin/env bash
# bench/device_run227.sh - one GPU (nvidia-h200), session 36: the Newton-Schulz AUTO rule that
# keeps a half Gram with a steep table (Polar Express) on the X iteration (ns_steep_for_half_gram):
#  1. every GPU CTest test (-L gpu), CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1;
#  2. what the rule costs on one H200: tpla ns -g 1 --gram=input (bf16 Gram), Polar Express,
#     5 steps, AUTO (now X) against --iterate=gram (what AUTO took before), Muon AUTO (unchanged),
#     at 4096x14336 and 2048x8192, median of 20 after 5, 3 rounds alternating; the PyTorch
#     Muon reference (bench/ns_torch.py) on 4096x14336 in the same run as the anchor.
# Run in the repository root (no carry): bash bench/device_run227.sh
set -u
. bench/device_lib.sh 227
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
(cd build-gpu && bounded 300 "$L/ctest_gpu.log" ctest -L gpu --output-on-failure --no-tests=error)
say "ctest -L gpu: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_gpu.log")"
grep -E "Failed|\*\*\*" "$L/ctest_gpu.log" >> "$S"
pack
for round in 1 2 3; do
  for v in "polar auto" "polar gram" "muon auto"; do
    set -- $v
    bounded 120 "$L/ns_${1}_${2}_$round.log" build-gpu/tpla ns -g 1 -s 1234 -n 20 -w 5 --gram=input \
      --svd-max=0 --preset=$1 --iterate=$2 4096x14336 2048x8192
    say "round $round, $1 --iterate=$2: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_${1}_${2}_$round.log" | sed "s/^/  $1 $2: /" >> "$S"
  done
done
pack
bounded 200 "$L/torch.log" python3 bench/ns_torch.py --shapes 4096x14336,2048x8192 --iters 20 --warmup 5
say "PyTorch Muon reference: exit $? ($(el))"
tail -n 6 "$L/torch.log" >> "$S"
pack
cat "$S"
