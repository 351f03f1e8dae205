#!/usr/bin/env bash
# bench/device_run33.sh - experiment (bench/run33_rs_patch.py, a patched copy):
# GEMM+RS (8192, 4096, 8192), E4M3 op(B) T and bf16, with the own rows'
# chunks computed without waiting (beta 0) and the arrived partials folded in
# 1, 2 or all (4) chunks later, on lane 1 or alternating lanes, against the
# fused schedule (run 30: the own chunks wait for each partial; lane 1 idles
# for the first ~150 us while the 1024-row partial GEMMs run alone at ~57 us
# each). The baseline runs first and last. About 3 minutes.
set -u
. bench/device_lib.sh 33
patched_build /tmp/s33x "$PWD/bench/run33_rs_patch.py"
for v in "" lag1 lag2 lag4 alt1 alt2 ""; do
  for spec in "e4m3 -t NT" "bf16"; do
    set -- $spec
    dt=$1; shift
    log="$L/rs_${v:-fused}_$dt.log"
    [ -e "$log" ] && log="${log%.log}_again.log"
    TPLA_RUN33=$v timeout 40 build-exp/tpla gemm-rs -g 2 -n 20 -w 5 -s 1234 -d $dt "$@" \
      8192 4096 8192 > "$log" 2>&1
    say "${v:-fused} $dt: exit $? $(grep -E '^  gemm-rs ' "$log")"
  done
  pack
done
cat "$S"
