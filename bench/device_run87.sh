#!/usr/bin/env bash
# bench/device_run87.sh - (prepared in session 14, not run yet) two transport experiments of
# branch exp-watch (see git log exp-watch), each an environment switch of one build (snap/run87_watch.tar,
# `git archive exp-watch`), both default off:
#  - TPLA_OVERLAP_WATCH=1: the pushed chunks' flags are waited for on a watcher stream and the
#    compute lanes wait for its event, not cuStreamWaitValue32 themselves. Run 85: lane 1 took
#    8-11 us between its GEMMs where a wait-value sat (FP8 GEMM+RS: three a call), lane 0 ~3 us
#    with event records only. FP8 GEMM+RS (8192, 4096, 8192) needs ~480 us for eff 0.90 (~490).
#  - TPLA_XP_SPLIT_PULL=1: a pull of >= 1 MiB moves half its rows on a second copy stream (copy
#    engine). Run 85: one engine's pull read 240-280 GB/s, GEMM+AR's last chunk's pull 38 us of
#    the tail; run 77: NS's G_1 pull (16.8 MB) outlasted Z_1's first half by ~20 us a segment.
# 1. test_gpu_overlap and test_gpu_ns on 2 GPUs with both on. 2. Alternating A/B, three rounds:
# FP8 e4m3 GEMM+RS (8192, 4096, 8192) watch 0/1; GEMM+AR bf16 (8192, 4096, 8192) four ways;
# GEMM+AR with 4 chunks and tail 3 (a last chunk of 256 rows), plain and with both knobs;
# tpla ns -g 2 16384x4096 and 8192x8192 (bf16 Gram) split 0/1. About 9 minutes.
# Run in the repository root of main with carry ["snap"]: bash bench/device_run87.sh
set -u
. bench/device_lib.sh 87
tar_build /tmp/s87 snap/run87_watch.tar watch tpla_tool test_gpu_overlap test_gpu_ns
B=/tmp/s87/build-gpu
export TPLA_OVERLAP_WATCH=1 TPLA_XP_SPLIT_PULL=1
CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/overlap_both.log" $B/tests/test_gpu_overlap
say "test_gpu_overlap, watch + split, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_both.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/ns_both.log" $B/tests/test_gpu_ns
say "test_gpu_ns, watch + split, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/ns_both.log")"
unset TPLA_OVERLAP_WATCH TPLA_XP_SPLIT_PULL
pack
one() { # NAME WATCH SPLIT ARGS...
  local name=$1 w=$2 sp=$3; shift 3
  [ "$(( $(date +%s) - t0 ))" -lt 540 ] || { say "$name: not run (time)"; return; }
  TPLA_OVERLAP_WATCH=$w TPLA_XP_SPLIT_PULL=$sp CUDA_VISIBLE_DEVICES=0,1 bounded 60 \
    "$L/$name.log" $B/tpla "$@"
  say "$name: exit $? $(grep -hE '^  (gemm-rs|gemm-ar) |^ *[0-9]+x[0-9]+ +2 tpla' "$L/$name.log")"
}
F="-g 2 -n 20 -w 5 -s 1234"
for rep in 1 2 3; do
  for w in 0 1; do
    one "rs8_w${w}_$rep" $w 0 gemm-rs $F -d e4m3 --accum=split 8192 4096 8192
  done
  for ws in 00 01 10 11; do
    one "ar_w${ws:0:1}s${ws:1:1}_$rep" ${ws:0:1} ${ws:1:1} gemm-ar $F -d bf16 8192 4096 8192
  done
  for ws in 00 11; do # 4 chunks, tail 3: 1280 x 3 + 256 rows (never tried; 5/6 chunks were)
    TPLA_OVERLAP_TAIL=3 one "ar_t3_w${ws:0:1}s${ws:1:1}_$rep" ${ws:0:1} ${ws:1:1} gemm-ar $F \
      -d bf16 8192 4096 8192
  done
  for sp in 0 1; do
    one "ns_s${sp}_$rep" 0 $sp ns -g 2 -s 1234 -n 20 -w 5 --gram=input --svd-max=0 \
      16384x4096 8192x8192
  done
  pack
done
cat "$S"
