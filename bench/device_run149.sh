#!/usr/bin/env bash
# bench/device_run149.sh - one GPU (nvidia-h200), session 23: does initcheck see cuBLASLt's GEMMs
# write their output (bench/initcheck_probe.c)? Runs 147-148 reported uninitialized reads only of
# memory that cuBLASLt's GEMMs alone had written.
# Run in the repository root (no carry): bash bench/device_run149.sh
set -u
. bench/device_lib.sh 149
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvcc -O2 -o "$L/probe" bench/initcheck_probe.c -lcublasLt > "$L/build.log" 2>&1
say "build: exit $? ($(el))"
CUDA_VISIBLE_DEVICES=0 bounded 60 "$L/plain.log" "$L/probe"
say "plain: exit $? ($(el))"
CUDA_VISIBLE_DEVICES=0 bounded 240 "$L/initcheck.log" "$SAN" --tool initcheck --print-limit 200 "$L/probe"
say "initcheck: exit $? ($(el))"
# each case's marker lines and the reports between them, one line per report
awk '/^probe .*: begin/ {n = 0} /^probe .*: end/ {print $0 ", reports: " n; next} \
  /Host API memory access error|Uninitialized __global__/ {n++} /ERROR SUMMARY/ {print}' "$L/initcheck.log" | tee -a "$S"
pack
