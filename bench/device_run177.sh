#!/usr/bin/env bash
# bench/device_run177.sh - one GPU (nvidia-h200), session 27: Muon's AdamW by multi-tensor
# ops (0ea29e3) against the per-parameter AdamW before it (1d48369's _muon.py, carried as
# snap/muon_1d48369.py), in bench/muon_graph_bench.py --adamw (norm weights, final norm, and
# with --vocab an embedding and a head), new and old alternating in separate processes, then
# the Python checks on one rank (the capturable and bf16 tensor-hyperparameter checks).
# Run in the repository root, carry ["snap"]: bash bench/device_run177.sh
set -u
. bench/device_lib.sh 177
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
old=/tmp/old177
rm -rf "$old" && mkdir -p "$old" && cp -r python bench "$old/" \
  && cp snap/muon_1d48369.py "$old/python/tpla/torch/_muon.py"
say "old tree: $(cmp -s python/tpla/torch/_muon.py "$old/python/tpla/torch/_muon.py" && echo SAME || echo differs)"
for spec in "1024 8 0" "1024 24 32768" "2048 16 32768"; do
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
