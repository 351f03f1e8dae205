#!/usr/bin/env bash
# bench/device_run67.sh - prepared in session 11 for the next one: bench/ns_auto_check.py
# (AUTO against every forced algorithm and iteration, one rep) on the four 2-GPU shapes with
# a bf16 and an fp32 Gram, after runs 64/65 made GRAM_SHARDED's pulled products cheaper
# than the cost model (unchanged) counts them. Run 60's bf16 check hit its 150 s limit after
# two shapes; each gets its own limit here. Then the timelines of the pulled products and
# sums (bench/run66_pull_trace_patch.py; call 8 of each rank) at 8192^2 and 16384x4096:
# what is left past the GEMMs after runs 64/65. About 8 minutes.
# Prepare: git archive HEAD -o snap/run67.tar; run (carry ["snap"]):
#   mkdir -p /tmp/s67 && tar xf snap/run67.tar -C /tmp/s67 && cd /tmp/s67 && bash bench/device_run67.sh
set -u
. bench/device_lib.sh 67
ROOT=$PWD
gpu_build tpla_tool
for gram in input fp32; do
  for shape in 8192x8192 16384x4096 4096x14336 14336x4096; do
    timeout 130 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram $gram \
      --out "$L/auto_${gram}_$shape" "$shape" > "$L/auto_${gram}_$shape.log" 2>&1
    say "ns_auto_check $gram Gram $shape: exit $? ($(el))"
    grep -E "PASS|MISS" "$L/auto_${gram}_$shape.log" >> "$S"
    pack
  done
done
patched_build /tmp/s67x "$ROOT/bench/run66_pull_trace_patch.py"
ns_trace square_auto 8192x8192
ns_trace tall_auto 16384x4096
cd "$ROOT" || exit 1
pack
cat "$S"
