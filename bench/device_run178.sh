#!/usr/bin/env bash
# bench/device_run178.sh - one GPU (nvidia-h200), session 27: Muon's momentum and update by
# multi-tensor ops, the Nesterov blend orthogonalized without a copy, and decay as
# p - p (lr wd) (f640f97, 1c13611) against 42f79d6's _muon.py (run 177's new AdamW, per-matrix
# momentum and update; carried as snap/muon_42f79d6.py), in bench/muon_graph_bench.py, new and
# old alternating in separate processes; then the Python checks on one rank.
# Run in the repository root, carry ["snap"]: bash bench/device_run178.sh
set -u
. bench/device_lib.sh 178
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
old=/tmp/old178
rm -rf "$old" && mkdir -p "$old" && cp -r python bench "$old/" \
  && cp snap/muon_42f79d6.py "$old/python/tpla/torch/_muon.py"
say "old tree: $(cmp -s python/tpla/torch/_muon.py "$old/python/tpla/torch/_muon.py" && echo SAME || echo differs)"
for spec in "768 12 0" "1024 8 0" "1024 24 32768" "2048 8 0"; do
  set -- $spec
  for tree in new old; do
    root=$PWD; [ $tree = old ] && root=$old
    log="$L/muon_${1}x${2}_v${3}_$tree.log"
    bounded 200 "$log" python3 "$root/bench/muon_graph_bench.py" --hidden $1 --layers $2 \
      --adamw --vocab $3
    say "muon $tree width $1 x $2 layers vocab $3: exit $? ($(el))"
    grep -E "^  |^# tpla" "$log" | sed "s/^/$tree /" >> "$S"
    pack
  done
done
bounded 200 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
