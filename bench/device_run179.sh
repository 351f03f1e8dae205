#!/usr/bin/env bash
# bench/device_run179.sh - one GPU (nvidia-h200), session 27: where a Muon step's GPU time goes
# (bench/muon_profile.py, torch.profiler's kernel table) at widths 768 x 12, 1024 x 8 (fp32 and
# bf16 Gram) and 2048 x 8, to choose what to speed up next.
# Run in the repository root (no carry): bash bench/device_run179.sh
set -u
. bench/device_lib.sh 179
gpu_build tpla
export CUDA_VISIBLE_DEVICES=0 TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
for spec in "768 12 bf16" "1024 8 bf16" "1024 8 fp32" "2048 8 bf16"; do
  set -- $spec
  bounded 120 "$L/profile_$1x$2_$3.log" python3 bench/muon_profile.py --hidden $1 --layers $2 \
    --gram $3 --adamw --rows 30
  say "profile width $1 x $2 $3 Gram: exit $? ($(el))"
  pack
done
for f in "$L"/profile_*.log; do echo "== $(basename "$f")"; grep -v "^STAGE" "$f" | head -n 34; done
cat "$S"
