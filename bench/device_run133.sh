#!/usr/bin/env bash
# bench/device_run133.sh - two GPUs (nvidia-h200-x2), session 20: run 132's first `tpla gemm-rs
# -g 2 -d e4m3 --accum=split -n 400 -w 200 8192 4096 8192` never finished a call (the watchdog
# aborted rank 1 after 120 s, both GPUs idle the whole time; its second invocation ran). Here the
# same invocation again and again, in run 118's diagnostic build (bench/run118_diag_patch.py:
# progress marks on every op the transport enqueues; TPLA_DIAG_AFTER s after the first transport
# a thread prints, per stream, the ops done and the first op not done), each bounded to 45 s,
# until one stops or the time is spent: where each rank's streams stand when a call never ends.
# Run in the repository root of main (no carry): bash bench/device_run133.sh
set -u
. bench/device_lib.sh 133
patched_build /tmp/x133 bench/run118_diag_patch.py
i=0
while [ "$(( $(date +%s) - t0 ))" -lt 420 ]; do
  i=$((i + 1))
  TPLA_DIAG_AFTER=25 bounded 45 "$L/rs_$i.log" build-exp/tpla gemm-rs -g 2 -d e4m3 \
    --accum=split -n 400 -w 200 -s 1234 8192 4096 8192
  rc=$?
  say "invocation $i: exit $rc ($(el)) $(grep -E '^ +gemm-rs' "$L/rs_$i.log" | tr -s ' ')"
  if [ $rc != 0 ]; then
    grep -E "^DIAG|rank [01]:" "$L/rs_$i.log" | cut -c1-300 >> "$S"
    break
  fi
  rm -f "$L/rs_$i.log" # kept only for the failed one (the summary has every table line)
done
pack
cat "$S"
