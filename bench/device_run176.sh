#!/usr/bin/env bash
# bench/device_run176.sh - one GPU (nvidia-h200), session 26: Muon's new ns_gram_dtype
# (bf16 Gram products, the reference recipe's precision): bench/muon_graph_bench.py at widths
# 768 x 12, 1024 x 8 and 2048 x 8 layers (tpla default fp32 Gram, tpla bf16 Gram, PyTorch's
# reference, in one process each), then the Python checks on one rank.
# Run in the repository root (no carry): bash bench/device_run176.sh
set -u
. bench/device_lib.sh 176
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
for spec in "768 12" "1024 8" "2048 8"; do
  set -- $spec
  bounded 150 "$L/muon_$1.log" python3 bench/muon_graph_bench.py --hidden $1 --layers $2
  say "muon width $1 x $2 layers: exit $? ($(el))"
  grep -E "^  |^# tpla" "$L/muon_$1.log" >> "$S"
  pack
done
bounded 150 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
