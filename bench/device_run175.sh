#!/usr/bin/env bash
# bench/device_run175.sh - one GPU (nvidia-h200), session 26: the Python checks on one rank
# after checks_graphs' two captured-Muon loops became one helper (_replays_match_eager), its
# assertions unchanged. Run in the repository root (no carry): bash bench/device_run175.sh
set -u
. bench/device_lib.sh 175
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 150 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -E "^check_graphs" "$L/python_1gpu.log" | grep -oE "'muon': \{.*\}\}" | cut -c1-200 >> "$S"
pack
cat "$S"
