#!/usr/bin/env bash
# bench/device_tp.sh - issue #7 on a 4- or 8-GPU machine (nvidia-h200-x4 / -x8), in two device
# calls of at most 10 minutes each (prepared in session 11; no such machine was lent yet):
#   bash bench/device_tp.sh 1   tpla ns and the PyTorch anchors at 1, 2, 4 (and 8) GPUs
#                               (bench/run_ns.sh, NS_TP), then the overlap benchmark at the
#                               largest TP (bench/run_overlap.sh, TP)
#   bash bench/device_tp.sh 2   the whole GPU suite (tests/gpu/run.sh), then AUTO against every
#                               forced algorithm at 4 (and 8) GPUs (bench/ns_auto_check.py)
# Compare with docs/PERFORMANCE.md's predictions (bench/predict_tp.py). Logs: $OUT/logs.tgz.
# Prepare: git archive HEAD -o snap/tp.tar; run (carry ["snap"], kind nvidia-h200-x4 or -x8):
#   mkdir -p /tmp/tp && tar xf snap/tp.tar -C /tmp/tp && cd /tmp/tp && bash bench/device_tp.sh 1
set -u
part=${1:?usage: bash bench/device_tp.sh 1|2}
. bench/device_lib.sh "tp$part"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
say "part $part on $gpus GPU(s)"
tp=2
for p in 4 8; do [ "$gpus" -ge "$p" ] && tp=$p; done
gpu_build tpla_tool
if [ "$part" = 1 ]; then
  OUT=$L/run_ns NS_TP="2 4 8" timeout 330 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
  say "run_ns (NS_TP 2 4 8): exit $? ($(el))"
  grep -E "^## |^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
  pack
  OUT=$L/overlap_tp$tp TP=$tp timeout 200 bash bench/run_overlap.sh > "$L/overlap_tp$tp.log" 2>&1
  say "run_overlap TP=$tp: exit $? ($(el))"
  cat "$L/overlap_tp$tp/compare.txt" >> "$S" 2>/dev/null
else
  OUT=$L/gpu-tests timeout 360 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
  say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
  grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
  pack
  for p in 4 8; do
    [ "$gpus" -ge "$p" ] || continue
    timeout 100 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g $p --reps 1 \
      --out "$L/auto_g$p" 8192x8192 16384x4096 > "$L/auto_g$p.log" 2>&1
    say "ns_auto_check -g $p: exit $? ($(el))"
    grep -E "PASS|MISS|AUTO check" "$L/auto_g$p.log" >> "$S"
    pack
  done
fi
pack
cat "$S"
