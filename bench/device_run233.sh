#!/usr/bin/env bash
# bench/device_run233.sh - one GPU (nvidia-h200), session 37: a whole Muon optimizer step with
# HALF products (this library) against TF32 (the same tree, -DTPLA_NS_HALF_PRODUCTS=0):
# bench/muon_graph_bench.py --adamw (tpla.torch.Muon: fp32 Gram by default, and the bf16 Gram;
# PyTorch's reference recipe in the same process) at widths 2048 x 8 layers and 4096 x 2,
# the two builds alternating. Run in the repository root (no carry): bash bench/device_run233.sh
set -u
. bench/device_lib.sh 233
export CUDA_VISIBLE_DEVICES=0
gpu_build tpla
(cmake -S . -B build-tf32 -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
  -DCMAKE_C_FLAGS=-DTPLA_NS_HALF_PRODUCTS=0 > "$L/configure_tf32.log" 2>&1 &&
  cmake --build build-tf32 -j "$(nproc)" --target tpla > "$L/build_tf32.log" 2>&1)
say "build tf32: exit $? ($(el))"
for spec in "2048 8" "4096 2"; do
  set -- $spec
  for b in gpu tf32; do
    log="$L/muon_${1}x${2}_$b.log"
    TPLA_LIBRARY=$PWD/build-$b/libtpla.so PYTHONPATH=python bounded 200 "$log" \
      python3 bench/muon_graph_bench.py --hidden $1 --layers $2 --adamw
    say "muon $b width $1 x $2: exit $? ($(el))"
    grep -E "^  |^# tpla" "$log" | sed "s/^/$b /" >> "$S"
    pack
  done
done
cat "$S"
