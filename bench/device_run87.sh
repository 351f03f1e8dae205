#!/usr/bin/env bash
# bench/device_run87.sh - (prepared in session 14, not run yet) branch exp-watch (b26e8ad):
# TPLA_OVERLAP_WATCH=1 waits for the pushed chunks' flags on a watcher stream and makes the
# compute lanes wait for its event instead of running cuStreamWaitValue32 themselves. Run 85's
# timelines: lane 1 took 8-11 us between its GEMMs where a wait-value sat (FP8 GEMM+RS, three
# such gaps a call), lane 0 ~3 us with event records only; if an event wait costs a lane less,
# FP8 GEMM+RS (8192, 4096, 8192) (~490 us, eff 0.87-0.88; 0.90 needs ~480) and GEMM+AR gain.
# One build of the branch (snap/run87_watch.tar, `git archive exp-watch`), the knob switched by
# the environment: test_gpu_overlap on 2 GPUs with the watcher, then alternating A/B, three
# rounds: FP8 e4m3 GEMM+RS, bf16 GEMM+RS, bf16 GEMM+AR at (8192, 4096, 8192), FP8 and bf16
# AG+GEMM (8192, 8192, 4096). About 5 minutes.
# Run in the repository root of main with carry ["snap"]: bash bench/device_run87.sh
set -u
. bench/device_lib.sh 87
tar_build /tmp/s87 snap/run87_watch.tar watch tpla_tool test_gpu_overlap
B=/tmp/s87/build-gpu
TPLA_OVERLAP_WATCH=1 CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/overlap_watch.log" \
  $B/tests/test_gpu_overlap
say "test_gpu_overlap, watcher, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_watch.log")"
pack
one() { # NAME WATCH ARGS...
  local name=$1 w=$2; shift 2
  [ "$(( $(date +%s) - t0 ))" -lt 520 ] || { say "$name: not run (time)"; return; }
  TPLA_OVERLAP_WATCH=$w CUDA_VISIBLE_DEVICES=0,1 bounded 40 "$L/$name.log" $B/tpla "$@"
  say "$name: exit $? $(grep -E '^  (ag-gemm|gemm-rs|gemm-ar) ' "$L/$name.log")"
}
F="-g 2 -n 20 -w 5 -s 1234"
for rep in 1 2 3; do
  for w in 0 1; do
    one "rs8_w${w}_$rep" $w gemm-rs $F -d e4m3 --accum=split 8192 4096 8192
    one "rsbf_w${w}_$rep" $w gemm-rs $F -d bf16 8192 4096 8192
    one "ar_w${w}_$rep" $w gemm-ar $F -d bf16 8192 4096 8192
  done
  pack
done
for w in 0 1; do
  one "ag8_w$w" $w ag-gemm $F -d e4m3 --accum=split 8192 8192 4096
  one "agbf_w$w" $w ag-gemm $F -d bf16 8192 8192 4096
done
pack
cat "$S"
