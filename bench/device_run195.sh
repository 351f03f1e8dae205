#!/usr/bin/env bash
# bench/device_run195.sh - one GPU (nvidia-h200), session 30: issue #3's 1-GPU Newton-Schulz rows
# at the session's library (the Gram iteration's M operand since run 192), with the PyTorch
# Muon anchor in the same run: bench/run_ns.sh without its multi-GPU steps, the 16384^2 shape and
# the float64 check. Run in the repository root (no carry): bash bench/device_run195.sh
set -u
. bench/device_lib.sh 195
gpu_build tpla_tool
say "build: ($(el))"
BUILD=build-gpu NS_TP="" SHAPES_BIG="" CHECK_SHAPE="" OUT=$L/run_ns CUDA_VISIBLE_DEVICES=0 \
  timeout 420 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns (1 GPU): exit $? ($(el))"
cat "$L/run_ns/compare.txt" >> "$S" 2>/dev/null
pack
cat "$S"
