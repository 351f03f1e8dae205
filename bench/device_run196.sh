#!/usr/bin/env bash
# bench/device_run196.sh - one GPU (nvidia-h200), session 30: the Python checks on one rank with
# check_ns_numerics' new workspace-group case (tt.newton_schulz(..., workspace_group=5) on CUDA).
# Run in the repository root (no carry): bash bench/device_run196.sh
set -u
. bench/device_lib.sh 196
gpu_build tpla
CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 200 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -E "^check_ns_numerics" "$L/python_1gpu.log" >> "$S"
pack
cat "$S"
