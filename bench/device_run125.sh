#!/usr/bin/env bash
# bench/device_run125.sh - two GPUs (nvidia-h200-x2), session 19: issue #5's miss, E4M3 GEMM+RS
# (8192, 4096, 8192) split accumulation at eff 0.86-0.87 (runs 98, 122). Run 95 listed the tiles
# cuBLASLt's heuristic picks for E4M3 (K 4096, N 8192): 128x128 at 512-1536 rows, 144x128 at
# 1152, 1408, 2048 and 8192; no cut tried so far had 1152-row chunks. A patched copy
# (bench/run100_one_lane_patch.py, TPLA_XP_CUT), not the library:
#  1. the chunk GEMMs alone on GPU 0 (tpla gemm -t NT, E4M3, split: the heights below and 8192);
#  2. GEMM+RS with the library's cut (4 x 1024) and cuts of 1152-row chunks, alternating, three
#     rounds, plus run 100's best cut (1536, 1536, 1024) for reference.
# Run in the repository root of main (no carry): bash bench/device_run125.sh
set -u
. bench/device_lib.sh 125
patched_build /tmp/s125 "$PWD/bench/run100_one_lane_patch.py"
for m in 640 1024 1152 1536 1792 2048 2304 8192; do
  CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/gemm_$m.log" build-exp/tpla gemm -g 1 -n 30 -w 5 \
    -s 1234 -d e4m3 --accum=split -t NT $m 8192 4096
  say "gemm $m x 8192 x 4096: exit $? $(grep -E '^ +[0-9]+ +e4m3' "$L/gemm_$m.log" | head -1)"
done
pack
configs=(
  "base 4x1024|-|--chunks=4"
  "1152,1152,1152,640|TPLA_XP_CUT=1152,1152,1152,640|--chunks=4"
  "640,1152,1152,1152|TPLA_XP_CUT=640,1152,1152,1152|--chunks=4"
  "1152,1152,1792|TPLA_XP_CUT=1152,1152,1792|--chunks=3"
  "1536,1536,1024|TPLA_XP_CUT=1536,1536,1024|--chunks=3"
)
for round in 1 2 3; do
  i=0
  for cfg in "${configs[@]}"; do
    i=$((i + 1))
    IFS='|' read -r name envs args <<< "$cfg"
    [ "$envs" = - ] && envs=
    log="$L/r${round}_$i.log"
    (for e in $envs; do export "$e"; done
     bounded 60 "$log" build-exp/tpla gemm-rs -d e4m3 --accum=split $args -g 2 -n 30 -w 5 \
       -s 1234 8192 4096 8192)
    rc=$?
    say "r$round $(printf '%-22s' "$name") exit $rc $(grep -E '^  gemm-' "$log" | awk '{print "c"$7" "$9" us, gemm "$12", eff "$15", wrong "$NF}')"
  done
  pack
done
cat "$S"
