#!/usr/bin/env bash
# bench/device_run159.sh - one GPU (nvidia-h200), session 24: what CUDA graph capture saves
# Newton-Schulz on small matrices, tpla and the PyTorch Muon reference, eager and captured, in
# one process (bench/ns_graph_bench.py).
# Run in the repository root (no carry): bash bench/device_run159.sh
set -u
. bench/device_lib.sh 159
gpu_build tpla
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so CUDA_VISIBLE_DEVICES=0 bounded 300 "$L/ns_graph.log" \
  python3 bench/ns_graph_bench.py
say "ns_graph_bench: exit $? ($(el))"
cat "$L/ns_graph.log" >> "$S"
pack
cat "$S"
