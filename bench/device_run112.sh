#!/usr/bin/env bash
# bench/device_run112.sh - two GPUs, two processes: tests/python/gpu/abort_procs.py under torchrun
# (tpla.torch Communicator over NCCL, PEER transport through CUDA IPC): the watchdog ends a
# gemm_ar whose peer never calls (2 s), and the peer's watchdog reads the abort mark in its
# IPC-mapped flags (RemoteError). About 3 minutes. The tree under test is snap/run112.tar.
# Run in the repository root of main with carry ["snap"]: bash bench/device_run112.sh
set -u
. bench/device_lib.sh 112
rm -rf /tmp/n112 && mkdir -p /tmp/n112 && tar xf snap/run112.tar -C /tmp/n112 && cd /tmp/n112
gpu_build tpla
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 150 "$L/abort_procs.log" \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/abort_procs.py
say "abort_procs.py (2 processes): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/abort_procs.log" | tr '\n' ' ')"
pack
cat "$S"
