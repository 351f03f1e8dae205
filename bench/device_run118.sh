#!/usr/bin/env bash
# bench/device_run118.sh - four GPUs (nvidia-h200-x4): where each stream of each rank stands when
# GEMM+AllReduce over PEER stops at 3 and 4 ranks (run 117: it never finishes at -g 3 or -g 4,
# with one chunk, with CUDA_DEVICE_MAX_CONNECTIONS=32 and with 8 copy streams; -g 2 runs).
# bench/run118_diag_patch.py adds progress marks to every op the transport enqueues; 12 s after
# the first transport, a thread prints per stream the ops done and the first op not done.
# Run in the repository root of main (no carry): bash bench/device_run118.sh
set -u
. bench/device_lib.sh 118
patched_build /tmp/x118 bench/run118_diag_patch.py
S1="-d bf16 -n 3 -w 1 -s 1234 2048 1024 2048"
for g in 3 4; do
  TPLA_DIAG_AFTER=12 bounded 25 "$L/g${g}_diag.log" build-exp/tpla gemm-ar -g $g --chunks=1 $S1
  say "g$g: exit $? ($(el))"
  grep -E "^DIAG" "$L/g${g}_diag.log" | cut -c1-260 >> "$S"
  pack
done
TPLA_DIAG_AFTER=12 bounded 25 "$L/g2_diag.log" build-exp/tpla gemm-ar -g 2 --chunks=1 $S1
say "g2: exit $? ($(el)) $(grep -E '^  gemm-ar ' "$L/g2_diag.log" | tr -s ' ')"
pack
cat "$S"
