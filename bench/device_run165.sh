#!/usr/bin/env bash
# bench/device_run165.sh - one GPU (nvidia-h200), session 25: Newton-Schulz of a batch of equal
# matrices, tpla's batched newton_schulz (groups) against a loop of single calls and PyTorch's
# batched reference recipe (bench/ns_batch_bench.py).
# Run in the repository root (no carry): bash bench/device_run165.sh
set -u
. bench/device_lib.sh 165
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 300 "$L/ns_batch.log" python3 bench/ns_batch_bench.py
say "ns_batch_bench: exit $? ($(el))"
grep -vE "^#" "$L/ns_batch.log" >> "$S"
pack
cat "$S"
