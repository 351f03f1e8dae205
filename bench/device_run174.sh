#!/usr/bin/env bash
# bench/device_run174.sh - one GPU (nvidia-h200), session 26, after run 173 (the tensor path
# failed its bf16 check: CUDA rounds a 0-dim weight to bf16; momentum now weighs by 1 - m): the Python checks on one rank (checks_graphs' scheduled Muon step,
# now with the bf16 tensor-against-number comparison), bench/run173_bf16_mutant.py (that
# comparison fails on each of the two roundings it guards against), and
# bench/muon_graph_bench.py at width 1024 on one rank (the bench's new round alignment and
# capture agreement are no-ops there; a check that it still runs and reads as in run 166).
# Run in the repository root (no carry): bash bench/device_run174.sh
set -u
. bench/device_lib.sh 174
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 150 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -E "^check_graphs" "$L/python_1gpu.log" | grep -oE "'muon': \{.*\}\}" | cut -c1-200 >> "$S"
bounded 90 "$L/mutant.log" python3 bench/run173_bf16_mutant.py
say "run173_bf16_mutant: exit $? ($(el))"
cut -c1-220 "$L/mutant.log" >> "$S"
bounded 100 "$L/muon_1024.log" python3 bench/muon_graph_bench.py --hidden 1024 --layers 8
say "muon width 1024 x 8: exit $? ($(el))"
grep -E "^  |^# tpla" "$L/muon_1024.log" >> "$S"
pack
cat "$S"
