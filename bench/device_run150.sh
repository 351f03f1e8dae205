#!/usr/bin/env bash
# bench/device_run150.sh - one GPU (nvidia-h200), session 23: run 149 again with each case of
# bench/initcheck_probe.c in its own process under initcheck, so that each case's report count is
# its own (run 149's print limit hid the attribution; only its total, 1245632, was per case).
# The 4096^3 case is left out (run 149: most of its 184 s).
# Run in the repository root (no carry): bash bench/device_run150.sh
set -u
. bench/device_lib.sh 150
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvcc -O2 -o /tmp/probe bench/initcheck_probe.c -lcublasLt > "$L/build.log" 2>&1
say "build: exit $? ($(el))"
for c in 0 1 2 3 5 6; do
  CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/initcheck_$c.log" "$SAN" --tool initcheck --print-limit 1 /tmp/probe $c
  say "case $c: exit $? ($(el)) $(grep -E '^probe .*: begin' "$L/initcheck_$c.log" | sed 's/: begin//') $(grep -m1 'ERROR SUMMARY' "$L/initcheck_$c.log")"
done
pack
