#!/usr/bin/env bash
# bench/device_run130.sh - two GPUs (nvidia-h200-x2), session 20: run 129 found the
# owner-summed Gram (exp-gram-owner, 2d236c7) no faster than main (0a2b764) although it was
# built to remove main's fold tail. Per-call timelines of both (run 37's marks plus the Gram
# sum's own, bench/run130_gram_trace_patch.py; call 8 of each rank) at 8192^2 (X iteration)
# and 16384x4096 (Gram iteration), bf16 Gram, to see where each Gram's time goes.
# Prepare: git archive 0a2b764 -o snap/run129_main.tar (carry ["snap"]).
# Run in the repository root on exp-gram-owner: bash bench/device_run130.sh
set -u
. bench/device_lib.sh 130
ROOT=$PWD
patched_build /tmp/s130exp "$ROOT/bench/run130_gram_trace_patch.py"
ns_trace exp_square 8192x8192
ns_trace exp_tall 16384x4096
pack
rm -rf /tmp/s130src && mkdir -p /tmp/s130src && tar xf "$ROOT/snap/run129_main.tar" -C /tmp/s130src
cd /tmp/s130src || exit 1
patched_build /tmp/s130main "$ROOT/bench/run130_gram_trace_patch.py"
ns_trace main_square 8192x8192
ns_trace main_tall 16384x4096
cd "$ROOT" || exit 1
pack
cat "$S"
