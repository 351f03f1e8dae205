#!/usr/bin/env bash
# bench/device_run66.sh - prepared in session 11 for the next one, after runs 64/65 changed
# GRAM_SHARDED's pulled products (P computed in the window; rows published one by one) and
# the CUDA transport (a publication alone runs on its compute lane, which GEMM+AllReduce's
# steps with no piece to pull use too). 1. the whole GPU suite (1 and 2 GPUs), quiet: run 65
# ran only test_gpu_ns, test_gpu_overlap and memcheck; 2. tpla gemm-ar on DESIGN.md's three
# AR shapes, this tree against snap/run66_base.tar (c9b6206, before both changes), alternated
# twice: the transport change was not timed; 3. GEMM+AR (bf16) and FP8 GEMM+RS (8192, 4096,
# 8192) at 2, 3 and 4 chunks, and 3 and 4 with a tapered last chunk. About 8 minutes.
# The AUTO checks and the timelines: device_run67.sh.
# Prepare: git archive HEAD -o snap/run66.tar && git archive c9b6206 -o snap/run66_base.tar;
# run (carry ["snap"]): mkdir -p /tmp/s66/snap && tar xf snap/run66.tar -C /tmp/s66 &&
#   cp snap/run66_base.tar /tmp/s66/snap/ && cd /tmp/s66 && bash bench/device_run66.sh
set -u
. bench/device_lib.sh 66
ROOT=$PWD
gpu_build tpla_tool
BASE=/tmp/s66base
tar_build "$BASE" "$ROOT/snap/run66_base.tar" base tpla_tool
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite, quiet: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
ar() { # name tpla
  CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/$1.log" "$2" gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234
  say "$1: exit $? ($(el))"
  grep -E "^  gemm-ar " "$L/$1.log" | sed "s/^/$1 /" >> "$S"
}
for rep in 1 2; do
  ar "ar_base_$rep" "$BASE/build-gpu/tpla"
  ar "ar_main_$rep" build-gpu/tpla
  pack
done
# 3. chunk counts below the automatic minimum of 4, never measured for GEMM+RS/AR (runs 9
# and 11 tried 6 and 8): the misses GEMM+AR bf16 and FP8 GEMM+RS (8192, 4096, 8192) are
# the chunk GEMMs' own cost (run 30: 10-24% slower than the unchunked GEMM) plus the tail
# (tail: TPLA_OVERLAP_TAIL, the last chunk 1/tail of the others; run 11: bf16 AR at 4 chunks
# 833 us with tail 2 against 851 with 1)
sweep() { # name op args...
  local name=$1 op=$2; shift 2
  for ct in 2:1 3:1 4:1 3:2 4:2; do
    local c=${ct%%:*} t=${ct##*:}
    TPLA_OVERLAP_TAIL=$t CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/${name}_c${c}t$t.log" \
      build-gpu/tpla $op -g 2 -n 20 -w 5 -s 1234 --chunks=$c "$@" 8192 4096 8192
    say "${name} chunks $c tail $t: exit $? $(grep -E "^  $op " "$L/${name}_c${c}t$t.log")"
  done
}
sweep ar_bf16 gemm-ar -d bf16
sweep rs_e4m3_opT gemm-rs -d e4m3 -t NT
pack
cat "$S"
