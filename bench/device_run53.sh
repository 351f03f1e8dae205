#!/usr/bin/env bash
# bench/device_run53.sh - prepared in session 9 for the next one: (1) the whole GPU suite at
# HEAD on a quiet machine (not run whole since the quiet-window no-growth checks, bab05b6);
# (2) bench/ns_auto_check.py on the four 2-GPU shapes, bf16 Gram (AUTO against every forced
# pair, alternated twice: run 49's check as a script; ~72 invocations of ~3-4 s). About 8
# minutes. The suite under a bounded load is bench/device_run54.sh.
set -u
. bench/device_lib.sh 53
gpu_build tpla_tool
OUT=$L/gpu-tests-quiet timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests_quiet.log" 2>&1
say "suite, quiet: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests_quiet.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests_quiet.log" | head -10 >> "$S"
pack
timeout 270 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 2 --out "$L/auto" \
  8192x8192 16384x4096 4096x14336 14336x4096 > "$L/auto_check.log" 2>&1
say "ns_auto_check: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_check.log" >> "$S"
pack
cat "$S"
