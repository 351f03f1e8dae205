#!/usr/bin/env bash
# bench/device_run132.sh - two GPUs (nvidia-h200-x2), session 20: do the overlap tables'
# efficiencies depend on the GPUs' power state? Run 128 found both H200s at their 700 W cap
# under GEMMs (~1600 MHz, 1980 without it), reached within the first ~0.1 s of load; `tpla
# gemm-*` times each of its four phases (overlapped, serial, gemm, comm) with -n 20 -w 5, about
# 20 ms of load after a host-side check or a plan's destruction. The two missed efficiency
# targets, GEMM+AR bf16 and GEMM+RS E4M3 split at (8192, 4096, 8192), alternately with -n 20 -w 5
# (the tables' setting) and -n 400 -w 200 (each phase's timed calls well past the transient),
# with nvidia-smi sampling clocks every 100 ms (read only).
# Run in the repository root of main (no carry): bash bench/device_run132.sh
set -u
. bench/device_lib.sh 132
gpu_build tpla_tool
setsid nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,utilization.gpu,clocks_event_reasons.active \
  --format=csv -lms 100 > "$L/smi.csv" 2>&1 &
SMI=$!
op() { # name tool-args...
  local name=$1; shift
  echo "$(date +%s.%N) start $name" >> "$L/marks.txt"
  bounded 150 "$L/$name.log" build-gpu/tpla "$@"
  say "$name: exit $? ($(el))"
  echo "$(date +%s.%N) end $name" >> "$L/marks.txt"
  grep -E "^ +gemm-" "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  for n in 20 400; do
    w=$([ $n = 20 ] && echo 5 || echo 200)
    op "ar_bf16_n${n}_$rep" gemm-ar -g 2 -n $n -w $w -s 1234 8192 4096 8192
    op "rs_e4m3_n${n}_$rep" gemm-rs -g 2 -d e4m3 --accum=split -n $n -w $w -s 1234 8192 4096 8192
  done
  pack
done
kill "$SMI" 2> /dev/null
pack
cat "$S"
