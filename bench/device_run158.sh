#!/usr/bin/env bash
# bench/device_run158.sh - one GPU (nvidia-h200), session 24: after the audit of the Python
# changes. test_gpu_ops (its norm tests now share norm_in_place) and test_gpu_graphs, then the
# Python checks on the CUDA executor (one rank) twice: check_graphs in thread-local capture
# mode (its default) and in global mode (torch.cuda.graph's default; TPLA_CHECK_CAPTURE_MODE).
# Run in the repository root (no carry): bash bench/device_run158.sh
set -u
. bench/device_lib.sh 158
gpu_build tpla test_gpu_ops test_gpu_graphs
for t in test_gpu_ops test_gpu_graphs; do
  CUDA_VISIBLE_DEVICES=0 bounded 90 "$L/$t.log" "build-gpu/tests/$t"
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
for mode in thread_local global; do
  TPLA_CHECK_CAPTURE_MODE=$mode TPLA_LIBRARY=$PWD/build-gpu/libtpla.so CUDA_VISIBLE_DEVICES=0 \
    bounded 150 "$L/python_1gpu_$mode.log" \
    torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
  say "python checks (1 rank, $mode): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu_$mode.log" | tr '\n' ' ')"
  grep -oE "'capture_error_mode': '[a-z_]+'" "$L/python_1gpu_$mode.log" >> "$S"
done
pack
cat "$S"
