#!/usr/bin/env bash
# bench/device_run58.sh - after runs 55/56 made two pull windows and eight symmetric block
# rows the defaults (TPLA_NS_PULL_WINDOWS=2: 16384x4096 3.70-3.75 ms against 3.90-3.96 with
# one; -DTPLA_NS_SYM_MAX_BLOCKS=8: 1 GPU 8192^2 bf16 17.96-18.17 against 18.68-18.76):
# 1. bench/run_ns.sh: issue #3's table with the PyTorch anchors in the same run;
# 2. the whole GPU suite under a bounded `tpla ns -g 2` neighbour load (run 54's purpose:
#    run 51's stalled invocation; the quiet-window no-growth checks with the whole suite);
# 3. bench/ns_auto_check.py at 8192^2 and 16384x4096 (bf16 Gram) and 16384x4096 (fp32
#    Gram; run 57: AUTO's Gram iteration 4% slower than GRAM_SHARDED's X), one rep each.
# About 8 minutes.
set -u
. bench/device_lib.sh 58
gpu_build tpla_tool
OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns: exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
load_start build-gpu/tpla ns -g 2 -n 300 -w 0 -c 0 4096x4096 8192x2048
OUT=$L/gpu-tests timeout 300 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite under load: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
load_stop
pack
timeout 100 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --out "$L/auto" \
  8192x8192 16384x4096 > "$L/auto_check.log" 2>&1
say "ns_auto_check bf16: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_check.log" >> "$S"
pack
timeout 60 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram fp32 \
  --out "$L/auto_fp32" 16384x4096 > "$L/auto_fp32.log" 2>&1
say "ns_auto_check fp32: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_fp32.log" >> "$S"
pack
cat "$S"
