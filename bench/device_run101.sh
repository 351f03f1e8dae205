#!/usr/bin/env bash
# bench/device_run101.sh - two GPUs: the waits of the own rows' chunks. Run 100 put every chunk
# GEMM on one stream and found each arrival wait (cuStreamWaitValue32 on the compute lane) costing
# ~8 us on the critical path, as run 85's lane-1 gaps (8-17 us) suggested. Branch exp-watch2 =
# main 0df6edb + exp-watch (TPLA_OVERLAP_WATCH=1: the flags waited for on a watcher stream, the
# lanes wait for its event; TPLA_XP_SPLIT_PULL=1: pulls >= 1 MiB on two copy engines) + run 100's
# knobs (TPLA_XP_CUT, TPLA_XP_OWN_LANE). One build, knobs by environment, three rounds alternating:
# E4M3 GEMM+RS (issue #5's miss, eff 0.87) and bf16 GEMM+AR (issue #4's, 0.86) at (8192, 4096,
# 8192), then test_gpu_overlap with the watcher on. A branch, not the library. About 6 minutes.
# Run in the repository root of main with carry ["snap"] (snap/run101_watch2.tar):
#   bash bench/device_run101.sh
set -u
. bench/device_lib.sh 101
tar_build /tmp/s101 snap/run101_watch2.tar watch2 tpla_tool test_gpu_overlap
B=/tmp/s101/build-gpu
W=TPLA_OVERLAP_WATCH=1
CUT="TPLA_XP_CUT=1536,1536,1024"
RS="gemm-rs -d e4m3 --accum=split"
# name|environment|tool arguments
configs=(
  "rs8 base|-|$RS"
  "rs8 watch|$W|$RS"
  "rs8 1536,1536,1024|$CUT|$RS --chunks=3"
  "rs8 watch 1536,1536,1024|$W $CUT|$RS --chunks=3"
  "rs8 watch lane0 c4|$W TPLA_XP_OWN_LANE=0|$RS --chunks=4"
  "rs8 watch lane0 1536,1536,1024|$W TPLA_XP_OWN_LANE=0 $CUT|$RS --chunks=3"
  "rs8 NT base|-|$RS -t NT"
  "rs8 NT watch|$W|$RS -t NT"
  "ar16 base|-|gemm-ar -d bf16"
  "ar16 watch|$W|gemm-ar -d bf16"
  "ar16 split|TPLA_XP_SPLIT_PULL=1|gemm-ar -d bf16"
  "ar16 watch split|$W TPLA_XP_SPLIT_PULL=1|gemm-ar -d bf16"
  "rs16 base|-|gemm-rs -d bf16"
  "rs16 watch|$W|gemm-rs -d bf16"
)
for round in 1 2 3; do
  i=0
  for cfg in "${configs[@]}"; do
    i=$((i + 1))
    IFS='|' read -r name envs args <<< "$cfg"
    [ "$envs" = - ] && envs=
    log="$L/r${round}_$i.log"
    (for e in $envs; do export "$e"; done
     CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$log" $B/tpla $args -g 2 -n 30 -w 5 -s 1234 \
       8192 4096 8192)
    rc=$?
    say "r$round $(printf '%-30s' "$name") exit $rc $(grep -E '^  gemm-' "$log" | awk '{print "c"$7" "$9" us, gemm "$12", eff "$15", wrong "$NF}')"
  done
  pack
done
TPLA_OVERLAP_WATCH=1 CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/test_gpu_overlap_watch.log" \
  $B/tests/test_gpu_overlap
say "test_gpu_overlap (watch), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_overlap_watch.log")"
pack
cat "$S"
