#!/usr/bin/env bash
# bench/device_run50.sh - after run 49 (AUTO counts on pulled products; ns_cost.c refit
# to run 49: 8192^2 back to GRAM_SHARDED's X iteration, the Gram iteration elsewhere):
# 1. timelines of the pulled exchanges (bench/run50_pull_trace_patch.py, a patched copy):
#    16384x4096 AUTO (GRAM_SHARDED + Gram iteration), the same with GRAM_ALLREDUCE forced,
#    8192^2 AUTO (GRAM_SHARDED, X iteration); call 8 of each rank;
# 2. bench/run_ns.sh: the same-run table with the PyTorch anchors;
# 3. the whole GPU suite under a sustained `tpla ns -g 2` load (run 48: three no-growth
#    checks failed under load; they now repeat a window whose free memory shrank).
# About 7 minutes.
set -u
. bench/device_lib.sh 50
ROOT=$PWD
gpu_build tpla_tool
patched_build /tmp/s50x "$ROOT/bench/run50_pull_trace_patch.py"
trace() { # name args...
  local name=$1; shift
  CUDA_VISIBLE_DEVICES=0,1 TPLA_TRACE_NS=8 bounded 60 "$L/$name.log" build-exp/tpla ns -g 2 \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" >> "$S"
}
trace tall_auto 16384x4096
trace tall_allreduce_gram --algo=gram_allreduce --iterate=gram 16384x4096
trace square_auto 8192x8192
cd "$ROOT" || exit 1
pack
OUT=$L/run_ns timeout 300 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns: exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
( while [ ! -e "$L/suite.done" ]; do
    build-gpu/tpla ns -g 2 -n 300 -w 0 -c 0 4096x4096 8192x2048 >> "$L/load.log" 2>&1 ||
      echo "load: exit $?" >> "$L/load.log"
  done ) &
OUT=$L/gpu-tests timeout 400 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite under load: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
touch "$L/suite.done"
grep -E "FAIL|HANG|Failed|window" "$L/gpu_tests.log" | head -20 >> "$S"
wait
say "load: $(grep -c 'tpla ns: OK' "$L/load.log") loops OK, $(grep -c 'load: exit' "$L/load.log") failed"
pack
cat "$S"
tail -n 22 "$L/run_ns/compare.txt"
