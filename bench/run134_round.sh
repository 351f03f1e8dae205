#!/usr/bin/env bash
# bench/run134_round.sh - sourced by bench/device_run134.sh and later runs after
# bench/device_lib.sh, with the script's time limit in seconds: run 132's round (GEMM+AR bf16,
# then GEMM+RS E4M3 split, -n 400 -w 200, (8192, 4096, 8192)) again and again until a call
# stops or fewer than 40 s are left. Each table line goes to the summary; a failed
# invocation's log is kept whole and its error lines (with the watchdog's flag report) are
# summarized.
round_limit=$1
round_i=0
while [ $(( round_limit - $(date +%s) + t0 )) -gt 40 ]; do
  round_i=$((round_i + 1))
  for op in ar rs; do
    if [ $op = ar ]; then args=(gemm-ar -g 2); else args=(gemm-rs -g 2 -d e4m3 --accum=split); fi
    log="$L/round_${op}_$round_i.log"
    bounded 150 "$log" build-gpu/tpla "${args[@]}" -n 400 -w 200 -s 1234 8192 4096 8192
    rc=$?
    say "round $round_i $op: exit $rc ($(el)) $(grep -E '^ +gemm-' "$log" | tr -s ' ')"
    if [ $rc != 0 ]; then
      grep -E "rank [01]:|TIMEOUT" "$log" | cut -c1-1200 >> "$S"
      break 2
    fi
    rm -f "$log"
  done
done
say "rounds: $round_i ($(el))"
