#!/usr/bin/env bash
# bench/device_run161.sh - one GPU (nvidia-h200), session 24: a whole Muon step eager and
# captured in a CUDA graph, tpla.torch.Muon against the PyTorch reference recipe
# (bench/muon_graph_bench.py) at widths 1024 and 2048; then the Python checks on one rank
# (check_graphs with the tensor-parallel layers' forward and backward captured).
# Run in the repository root (no carry): bash bench/device_run161.sh
set -u
. bench/device_lib.sh 161
gpu_build tpla
export TPLA_LIBRARY=$PWD/build-gpu/libtpla.so CUDA_VISIBLE_DEVICES=0
for h in 1024 2048; do
  bounded 150 "$L/muon_graph_$h.log" python3 bench/muon_graph_bench.py --hidden $h --layers 8
  say "muon_graph_bench --hidden $h: exit $? ($(el))"
  cat "$L/muon_graph_$h.log" >> "$S"
done
bounded 150 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -E "^check_graphs" "$L/python_1gpu.log" | cut -c1-400 >> "$S"
pack
cat "$S"
