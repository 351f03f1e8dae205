#!/usr/bin/env bash
# bench/device_run163.sh - one GPU (nvidia-h200), session 25: a whole Muon step with and without
# batched Newton-Schulz groups (src/core/ns_group.c). bench/muon_graph_bench.py (PyTorch's
# reference recipe in the same process) at widths 1024 (8 layers), 768 (12 layers) and 2048
# (8 layers), each with groups (the default), without (TPLA_NS_BATCH_GROUP=1: one matrix at a
# time, as before this change), and with groups again.
# Run in the repository root (no carry): bash bench/device_run163.sh
set -u
. bench/device_lib.sh 163
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
for spec in "1024 8" "768 12" "2048 8"; do
  set -- $spec
  k=0
  for group in default 1 default; do
    k=$((k + 1))
    log="$L/muon_${1}_${k}_group_$group.log"
    if [ $group = default ]; then
      bounded 150 "$log" python3 bench/muon_graph_bench.py --hidden $1 --layers $2
    else
      TPLA_NS_BATCH_GROUP=$group bounded 150 "$log" python3 bench/muon_graph_bench.py \
        --hidden $1 --layers $2
    fi
    say "muon width $1 x $2 layers, TPLA_NS_BATCH_GROUP=$group: exit $? ($(el))"
    grep -E "^  |tpla / torch" "$log" | sed 's/^/    /' >> "$S"
  done
done
pack
cat "$S"
