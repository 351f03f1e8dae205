#!/usr/bin/env bash
# bench/device_run222.sh - one GPU (nvidia-h200), session 35:
#  1. the split FP8 GEMM tests (test_gpu_fp8, test_gpu_fp8_edges) and test_gpu_overlap_graph_bt;
#  2. A/B: test_gpu_overlap_graph_bt against a copy whose captured calls mark the window group
#     only from an FP8 op(B) N member (stage_b before review 98's fix): its window-group case
#     should fail there;
#  3. tests/gpu/run.sh --sanitizers-only --no-clean: memcheck and racecheck of run.sh's lists,
#     bounded by what is left of the call.
# Run in the repository root (no carry): bash bench/device_run222.sh
set -u
. bench/device_lib.sh 222
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build test_gpu_fp8 test_gpu_fp8_edges test_gpu_overlap_graph_bt
for t in test_gpu_fp8 test_gpu_fp8_edges test_gpu_overlap_graph_bt; do
  bounded 150 "$L/$t.log" build-gpu/tests/$t
  say "$t: exit $? ($(el)) $(tail -n 1 "$L/$t.log")"
done
pack
ab=/tmp/run222-ab
rm -rf $ab && cp -r "$PWD" $ab && rm -rf $ab/build-gpu
python3 - "$ab/src/core/overlap_exec.c" > "$L/ab_patch.log" 2>&1 <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = """  if (captured) /* any member's graph rewrites the group's staging when it replays */
    ovl_group_mark_graph(p);
  if (p->bt_off == SIZE_MAX)
    return TPLA_SUCCESS;
"""
new = """  if (p->bt_off == SIZE_MAX)
    return TPLA_SUCCESS;
  if (captured)
    ovl_group_mark_graph(p);
"""
assert old in s
open(p, "w").write(s.replace(old, new))
print("patched")
PY
(cd $ab && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/ab_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target test_gpu_overlap_graph_bt > "$L/ab_build.log" 2>&1)
say "build with the group marked only by FP8 N members: exit $? ($(el)) $(cat "$L/ab_patch.log")"
bounded 120 "$L/ab_graph_bt.log" $ab/build-gpu/tests/test_gpu_overlap_graph_bt
say "test_gpu_overlap_graph_bt there: exit $? (should fail) $(tail -n 1 "$L/ab_graph_bt.log")"
grep -E "want|FAIL" "$L/ab_graph_bt.log" | head -n 6 >> "$S"
pack
left=$(( 575 - $(date +%s) + t0 ))
say "sanitizers: $left s left"
bounded $left "$L/sanitizers.log" env OUT="$L/san" bash tests/gpu/run.sh --sanitizers-only --no-clean
say "run.sh --sanitizers-only: exit $? ($(el)) $(tail -n 1 "$L/sanitizers.log")"
grep -E "^== (memcheck|racecheck)" "$L/sanitizers.log" | grep -v "(slow)" >> "$S"
pack
cat "$S"
