#!/usr/bin/env bash
# bench/device_run183.sh - one GPU (nvidia-h200), session 27: Muon's batched-plan descriptors
# built only for a new plan key, against 842ce2c's _muon.py (built every step; carried as
# snap/muon_842ce2c.py), in bench/muon_graph_bench.py --adamw (eager shows the host time) at
# 768 x 12 and 1024 x 32 (192 matrices), new and old alternating; then the Python checks.
# Run in the repository root, carry ["snap"]: bash bench/device_run183.sh
set -u
. bench/device_lib.sh 183
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
old=/tmp/old183
rm -rf "$old" && mkdir -p "$old" && cp -r python bench "$old/" \
  && cp snap/muon_842ce2c.py "$old/python/tpla/torch/_muon.py"
say "old tree: $(cmp -s python/tpla/torch/_muon.py "$old/python/tpla/torch/_muon.py" && echo SAME || echo differs)"
for spec in "768 12 0" "1024 32 0"; do
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
