#!/usr/bin/env bash
# bench/device_run88.sh - (prepared in session 14, not run yet) branch exp-z0split (572895b):
# the row-split Gram iteration (GRAM_SHARDED, 2 ranks, pulls) computes Z_0's own rows over
# K < s/2 inside the Gram's exchange, on lane 0 while lane 1 still folds the last block rows
# (run 77's timeline at 16384x4096: lane 0 idle ~57 us a Gram between its last Gram GEMM and
# Z_0: the fold tail ~40 us, the join and G's mirror ~17); the segment adds the rest of K and
# b G. Expected ~20-30 us a Gram, ~60-90 us a call at 16384x4096 (3.33 ms; 1.8x needs ~3.23).
# Branch exp-mirror (on exp-z0split): symmetric matrices mirrored block row by block row on
# lane 1 as each row becomes final, instead of whole after the exchange (run 72's 8192^2
# timeline: two full mirrors of ~45-49 us a step on the critical path, G's and P's); new backend
# op mirror_cols (the tuned mirror kernels on a column range), checked by test_gpu_ops's
# test_mirror_cols. Caution: run 70 measured the same idea with a separate transpose kernel
# (exp-row-mirror, exp-gram-mirror) 4-8% slower on the Gram-iteration shapes and neutral to +4% at
# 8192^2 (lane 1's copies did not hide behind lane 0's GEMMs); this run tells whether the tuned
# kernel changes that. Branch exp-combo (exp-z0split merged with exp-watch, no exp-mirror) with
# TPLA_XP_SPLIT_PULL=1: G_1's pull (16.8 MB) outlasted Z_1's first half by ~20 us a segment in run
# 77 (one copy engine).
# 1. test_gpu_ops (mirror) and test_gpu_ns of every branch on 2 GPUs (the new lane order and the
# row mirrors are only checked on a GPU; combo with TPLA_XP_SPLIT_PULL=1 TPLA_OVERLAP_WATCH=1);
# 2. tpla ns -g 2 on the three Gram-iteration shapes and 8192x8192, main / z0 / mirror / combo
# (split pulls), three rounds alternating, with tpla ns -g 1 16384x4096 and 8192x8192 (main) in
# each round. About 7 minutes.
# Run in the repository root of main with carry ["snap"] (snap/run88_{z0,mirror,combo}.tar:
# git archive of exp-z0split, exp-mirror, exp-combo): bash bench/device_run88.sh
set -u
. bench/device_lib.sh 88
gpu_build tpla_tool
tar_build /tmp/s88 snap/run88_z0.tar z0 tpla_tool test_gpu_ns
tar_build /tmp/s88m snap/run88_mirror.tar mirror tpla_tool test_gpu_ns test_gpu_ops
tar_build /tmp/s88c snap/run88_combo.tar combo tpla_tool test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/test_gpu_ops_mirror.log" /tmp/s88m/build-gpu/tests/test_gpu_ops
say "test_gpu_ops (mirror): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ops_mirror.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 200 "$L/test_gpu_ns_mirror.log" /tmp/s88m/build-gpu/tests/test_gpu_ns
say "test_gpu_ns (mirror), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_mirror.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 200 "$L/test_gpu_ns_z0.log" /tmp/s88/build-gpu/tests/test_gpu_ns
say "test_gpu_ns (z0), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_z0.log")"
grep -E "Gram iteration|FAIL" "$L/test_gpu_ns_z0.log" | head -5 >> "$S"
TPLA_XP_SPLIT_PULL=1 TPLA_OVERLAP_WATCH=1 CUDA_VISIBLE_DEVICES=0,1 bounded 200 \
  "$L/test_gpu_ns_combo.log" /tmp/s88c/build-gpu/tests/test_gpu_ns
say "test_gpu_ns (combo, split + watch), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_combo.log")"
pack
ns() { # name build-dir gpus shapes...
  local name=$1 b=$2 g=$3; shift 3
  [ "$(( $(date +%s) - t0 ))" -lt 520 ] || { say "$name: not run (time)"; return; }
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$b/tpla" ns -g "$g" \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
SHAPES="16384x4096 4096x14336 14336x4096 8192x8192"
for rep in 1 2 3; do
  ns "one_$rep" build-gpu 1 16384x4096 8192x8192
  ns "main_$rep" build-gpu 2 $SHAPES
  ns "z0_$rep" /tmp/s88/build-gpu 2 $SHAPES
  ns "mirror_$rep" /tmp/s88m/build-gpu 2 $SHAPES
  TPLA_XP_SPLIT_PULL=1 ns "combo_$rep" /tmp/s88c/build-gpu 2 $SHAPES
  pack
done
sum() { cat "$L"/"$1"_?.log 2>/dev/null | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
say "sums of medians: main $(sum main), z0 $(sum z0), mirror $(sum mirror), combo $(sum combo) ms"
pack
cat "$S"
