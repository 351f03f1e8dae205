#!/usr/bin/env bash
# bench/device_run155.sh - one GPU (nvidia-h200), session 24: run 153 again at the final
# normalization (61aad30: the fp64 sum of squares, and each element x (1/D) in fp64 instead of
# fp32's refined division). `tpla ns -g 1` of this tree against 5afd7b2, the commit before the
# session's normalization changes (snap/old.tar, made by `git archive 5afd7b2 -o
# snap/old.tar`), three alternating rounds at issue #3's 1-GPU shapes, both Grams, and the
# PyTorch Muon anchor in the same run.
# Run in the repository root with carry ["snap"]: bash bench/device_run155.sh
set -u
. bench/device_lib.sh 155
gpu_build tpla_tool
tar_build /tmp/old snap/old.tar old tpla_tool
for r in 1 2 3; do
  for v in new old; do
    bin=build-gpu/tpla
    [ "$v" = old ] && bin=/tmp/old/build-gpu/tpla
    CUDA_VISIBLE_DEVICES=0 bounded 150 "$L/ns_${v}_$r.log" "$bin" ns -g 1 -s 1234 -n 20 -w 5 \
      --gram=both --svd-max=0 8192x8192 4096x14336
    say "ns $v round $r: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_${v}_$r.log" | sed "s/^/$v $r /" >> "$S"
  done
done
CUDA_VISIBLE_DEVICES=0 bounded 200 "$L/torch.log" python3 bench/ns_torch.py \
  --shapes 8192x8192,4096x14336 --iters 20 --warmup 3 --error-max-dim 14336
say "PyTorch Muon NS5: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/torch.log" >> "$S"
pack
cat "$S"
