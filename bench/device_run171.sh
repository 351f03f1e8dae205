#!/usr/bin/env bash
# bench/device_run171.sh - one GPU (nvidia-h200), session 26: the Python checks on one rank
# (checks_graphs' new captured Muon step with tensor lr / weight decay, capturable AdamW and
# an lr schedule written in place between replays), then bench/product_split_bench.py (what
# one of two ranks would spend on a symmetric product's GEMMs under the halves split and under
# a wide-rows + corner-triangle split, against one GPU's triangle).
# Run in the repository root (no carry): bash bench/device_run171.sh
set -u
. bench/device_lib.sh 171
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 150 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
grep -E "^check_graphs" "$L/python_1gpu.log" | cut -c1-600 >> "$S"
bounded 120 "$L/product_split.log" python3 bench/product_split_bench.py
say "product_split_bench: exit $? ($(el))"
grep -vE "^# " "$L/product_split.log" >> "$S"
pack
cat "$S"
