#!/usr/bin/env bash
# bench/device_run60.sh - prepared in session 10 for the next one: (1) timelines of the pulled
# Gram sums and products at the current defaults (two pull windows, eight symmetric block rows:
# bench/run50_pull_trace_patch.py on a copy; call 8 of each rank), 16384x4096 and 8192^2 AUTO:
# where do the ~60 us per product past its GEMMs go now (run 50, one window: placement ~19,
# the peer's last round 15-28 later, mirror ~17, closing 10-21)? (2) bench/run_ns.sh, the table
# of record (the cost model's mirrors, 10ff703, move the fp32-Gram 16384x4096 choice to
# GRAM_SHARDED's X iteration); (3) bench/ns_auto_check.py on the four 2-GPU shapes, bf16 and
# fp32 Gram, one rep each; (4) tpla_mirror_bench: the mirror kernel alone against a copy of the
# same bytes (runs 37/50 saw ~17 us at 4096^2 bf16 inside calls, ~1 TB/s: is the kernel slow, or
# was it waiting?). About 7 minutes. The suite under load is bench/device_run54.sh.
set -u
. bench/device_lib.sh 60
ROOT=$PWD
gpu_build tpla_tool tpla_mirror_bench
bounded 60 "$L/mirror_bench.log" build-gpu/tpla_mirror_bench 50
say "mirror_bench: exit $? ($(el))"
grep -vE "^#|done" "$L/mirror_bench.log" >> "$S"
patched_build /tmp/s60x "$ROOT/bench/run50_pull_trace_patch.py"
trace() { # name args...
  local name=$1; shift
  CUDA_VISIBLE_DEVICES=0,1 TPLA_TRACE_NS=8 bounded 60 "$L/$name.log" build-exp/tpla ns -g 2 \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" >> "$S"
}
trace tall_auto 16384x4096
trace square_auto 8192x8192
cd "$ROOT" || exit 1
pack
OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns: exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
for gram in input fp32; do
  timeout 150 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram $gram \
    --out "$L/auto_$gram" 8192x8192 16384x4096 4096x14336 14336x4096 > "$L/auto_$gram.log" 2>&1
  say "ns_auto_check $gram Gram: exit $? ($(el))"
  grep -E "PASS|MISS|AUTO check" "$L/auto_$gram.log" >> "$S"
  pack
done
cat "$S"
