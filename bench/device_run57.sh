#!/usr/bin/env bash
# bench/device_run57.sh - prepared in session 9, not run: bench/ns_auto_check.py with an
# fp32 Gram on the four 2-GPU shapes (run 50: 8192^2 missed 0.65x PyTorch by 0.044 ms with
# AUTO's GRAM_ALLREDUCE + X; 16384x4096 0.83 and 14336x4096 0.80 missed: is another pair
# faster?), and the same with a bf16 Gram at 8192^2 only as a same-run reference. About 6
# minutes.
set -u
. bench/device_lib.sh 57
gpu_build tpla_tool
timeout 330 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 2 --gram fp32 \
  --out "$L/auto_fp32" 8192x8192 16384x4096 4096x14336 14336x4096 > "$L/auto_fp32.log" 2>&1
say "ns_auto_check fp32 Gram: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_fp32.log" >> "$S"
pack
timeout 90 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 2 --gram input \
  --out "$L/auto_bf16" 8192x8192 > "$L/auto_bf16.log" 2>&1
say "ns_auto_check bf16 Gram, 8192^2: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_bf16.log" >> "$S"
pack
cat "$S"
