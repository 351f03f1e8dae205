#!/usr/bin/env bash
# bench/device_run128.sh - two GPUs (nvidia-h200-x2), session 20: why does tpla's 1-GPU
# 16384x4096 time move ~10% between invocations (run 124: 5.28-5.84 ms) while the 2-GPU time
# moves 3%? The same rounds as run 124 (1 GPU, then 2), plus the 1-GPU run on GPU 1, with the
# GPUs' SM clock, power, temperatures and clock-event reasons sampled every 100 ms by
# nvidia-smi (read only; nothing is set), and each invocation's host start/end in marks.txt so
# the samples can be matched to it. More calls per invocation than run 124 (-n 200 / 40) so each
# timed stretch spans several samples.
# Run in the repository root of main (no carry), kind nvidia-h200-x2: bash bench/device_run128.sh
set -u
. bench/device_lib.sh 128
gpu_build tpla_tool
nvidia-smi --help-query-gpu > "$L/smi_help.txt" 2>&1
reason=clocks_event_reasons.active
grep -q "$reason" "$L/smi_help.txt" || reason=clocks_throttle_reasons.active
fields=timestamp,index,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,temperature.memory,utilization.gpu,$reason
setsid nvidia-smi --query-gpu="$fields" --format=csv -lms 100 > "$L/smi.csv" 2>&1 &
SMI=$!
mark() { echo "$(date +%s.%N) $*" >> "$L/marks.txt"; }
ns() { # ns WHICH ROUND: WHICH = gpu0 | gpu1 | two
  local log=$L/ns_$1_r$2.log rc
  mark "start $1 r$2"
  case $1 in
    gpu0) CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/tpla ns -g 1 -s 1234 -n 200 -w 20 \
            --gram=input --svd-max=0 -c 0 16384x4096 > "$log" 2>&1; rc=$?;;
    gpu1) CUDA_VISIBLE_DEVICES=1 timeout 120 build-gpu/tpla ns -g 1 -s 1234 -n 200 -w 20 \
            --gram=input --svd-max=0 -c 0 16384x4096 > "$log" 2>&1; rc=$?;;
    two)  timeout 120 build-gpu/tpla ns -g 2 -s 1234 -n 200 -w 20 --gram=input --svd-max=0 \
            -c 0 16384x4096 > "$log" 2>&1; rc=$?;;
  esac
  mark "end $1 r$2"
  say "round $2, $1: exit $rc ($(el))"
  grep -E "^ +[0-9]+x[0-9]+ " "$log" | awk -v r="$2" -v w="$1" '{print "  r" r, w, $1, $2, $4, $9, $10}' >> "$S"
}
for round in 1 2 3 4 5 6 7 8; do
  [ "$(( $(date +%s) - t0 ))" -lt 330 ] || { say "round $round: not run (time)"; break; }
  ns gpu0 $round
  ns two $round
  ns gpu1 $round
  pack
done
# the 8192^2 pair twice, for its clocks beside the tall shape's
for round in 1 2; do
  for w in 0 two; do
    log=$L/sq_${w}_r$round.log
    mark "start sq$w r$round"
    if [ $w = 0 ]; then
      CUDA_VISIBLE_DEVICES=0 timeout 120 build-gpu/tpla ns -g 1 -s 1234 -n 40 -w 5 --gram=input \
        --svd-max=0 -c 0 8192x8192 > "$log" 2>&1
    else
      timeout 120 build-gpu/tpla ns -g 2 -s 1234 -n 40 -w 5 --gram=input --svd-max=0 -c 0 \
        8192x8192 > "$log" 2>&1
    fi
    say "square round $round, $w: exit $? ($(el))"
    mark "end sq$w r$round"
    grep -E "^ +[0-9]+x[0-9]+ " "$log" | awk -v r="$round" -v w="sq$w" '{print "  r" r, w, $1, $2, $4, $9, $10}' >> "$S"
  done
done
kill "$SMI" 2> /dev/null
say "smi samples: $(wc -l < "$L/smi.csv")"
pack
cat "$S"
