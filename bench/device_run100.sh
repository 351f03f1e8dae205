#!/usr/bin/env bash
# bench/device_run100.sh - two GPUs: GEMM+RS / GEMM+AR (8192, 4096, 8192) with the own rows'
# chunks on the partials' lane (bench/run100_one_lane_patch.py: TPLA_XP_OWN_LANE=0, every chunk
# GEMM in order on one stream, none sharing the SMs with another) and explicit cuts
# (TPLA_XP_CUT), against the library's two lanes, alternating, three rounds. E4M3 GEMM+RS with
# split accumulation is issue #5's miss (eff 0.87); bf16 GEMM+AR issue #4's (eff 0.86). A
# patched copy, not the library. About 5 minutes.
# Run in the repository root of main: bash bench/device_run100.sh
set -u
. bench/device_lib.sh 100
patched_build /tmp/s100 "$PWD/bench/run100_one_lane_patch.py"
# name|environment|tool arguments
configs=(
  "rs8 base|-|gemm-rs -d e4m3 --accum=split"
  "rs8 lane0 c4|TPLA_XP_OWN_LANE=0|gemm-rs -d e4m3 --accum=split --chunks=4"
  "rs8 lane0 c2|TPLA_XP_OWN_LANE=0|gemm-rs -d e4m3 --accum=split --chunks=2"
  "rs8 lane0 c3|TPLA_XP_OWN_LANE=0|gemm-rs -d e4m3 --accum=split --chunks=3"
  "rs8 lane0 1536,1536,1024|TPLA_XP_OWN_LANE=0 TPLA_XP_CUT=1536,1536,1024|gemm-rs -d e4m3 --accum=split --chunks=3"
  "rs8 lane0 1024,1536,1536|TPLA_XP_OWN_LANE=0 TPLA_XP_CUT=1024,1536,1536|gemm-rs -d e4m3 --accum=split --chunks=3"
  "rs8 lanes2 1536,1536,1024|TPLA_XP_CUT=1536,1536,1024|gemm-rs -d e4m3 --accum=split --chunks=3"
  "rs8 NT base|-|gemm-rs -d e4m3 --accum=split -t NT"
  "rs8 NT lane0 1536,1536,1024|TPLA_XP_OWN_LANE=0 TPLA_XP_CUT=1536,1536,1024|gemm-rs -d e4m3 --accum=split -t NT --chunks=3"
  "ar16 base|-|gemm-ar -d bf16"
  "ar16 lane0|TPLA_XP_OWN_LANE=0|gemm-ar -d bf16"
  "rs16 base|-|gemm-rs -d bf16"
  "rs16 lane0 c4|TPLA_XP_OWN_LANE=0|gemm-rs -d bf16 --chunks=4"
)
for round in 1 2 3; do
  i=0
  for cfg in "${configs[@]}"; do
    i=$((i + 1))
    IFS='|' read -r name envs args <<< "$cfg"
    [ "$envs" = - ] && envs=
    log="$L/r${round}_$i.log"
    (for e in $envs; do export "$e"; done
     CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$log" build-exp/tpla $args -g 2 -n 30 -w 5 -s 1234 \
       8192 4096 8192)
    rc=$?
    say "r$round $(printf '%-28s' "$name") exit $rc $(grep -E '^  gemm-' "$log" | awk '{print "c"$7" "$9" us, gemm "$12", eff "$15", wrong "$NF}')"
  done
  pack
done
cat "$S"
