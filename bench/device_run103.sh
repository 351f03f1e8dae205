#!/usr/bin/env bash
# bench/device_run103.sh - two GPUs: the whole GPU suite (tests/gpu/run.sh: every CTest test on 1
# GPU, then on both, then the MPI test on 2 processes) at main, whose library is a56fb69's (the
# FP8 transpose128 kernel; the suite last ran on 2 GPUs at 9ddab76's library, run 84, and on 1 GPU
# at a56fb69's, run 94). No memcheck (run 94 ran it). About 5 minutes.
# Run in the repository root of main, no carry: bash bench/device_run103.sh
set -u
. bench/device_lib.sh 103
OUT=$L/gpu-tests timeout 450 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|memcheck" "$L/gpu_tests.log" | head -20 >> "$S"
pack
cat "$S"
