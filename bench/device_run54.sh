#!/usr/bin/env bash
# bench/device_run54.sh - prepared in session 9: the whole GPU suite under a bounded
# `tpla ns -g 2` neighbour load (load_start/load_stop: each invocation bounded to 60 s, its
# stacks kept), looking for run 51's stalled invocation and confirming the quiet-window
# no-growth checks with the whole suite (run 52 ran only the four tests that have them).
# About 5 minutes.
set -u
. bench/device_lib.sh 54
gpu_build tpla_tool
load_start build-gpu/tpla ns -g 2 -n 300 -w 0 -c 0 4096x4096 8192x2048
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite under load: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
load_stop
pack
cat "$S"
