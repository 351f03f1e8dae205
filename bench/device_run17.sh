#!/usr/bin/env bash
# bench/device_run17.sh - prepared for the next GPU session (not yet run):
# the Newton-Schulz block-row sweep. The symmetric products use at most
# TPLA_NS_SYM_MAX_BLOCKS block rows (build-time; default 4): at s = 4096 the
# four 1024-row block rows may each fill at most one wave (docs/PERFORMANCE.md,
# prediction). Builds the tool with 1, 2 and 3 as well, then times every
# build on 1 and 2 GPUs, fp32 and bf16 Gram, with the 2-GPU PyTorch anchors
# in the same run (bench/ns_torch.py). Bounded to ~9 minutes.
set -u
. bench/device_lib.sh 17
left() { echo $(( 540 - ($(date +%s) - t0) )); }
for nb in 4 1 2 3; do
  dir=build-nb$nb
  (cmake -S . -B $dir -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
     -DCMAKE_C_FLAGS=-DTPLA_NS_SYM_MAX_BLOCKS=$nb > "$L/configure_nb$nb.log" 2>&1 &&
   cmake --build $dir -j 16 --target tpla_tool > "$L/build_nb$nb.log" 2>&1)
  say "build nb=$nb: exit $? ($(el))"
done
SH2="16384x4096 14336x4096 8192x8192"
timeout 120 torchrun --standalone --nproc_per_node=2 bench/ns_torch.py --shapes ${SH2// /,} \
  --iters 10 --warmup 3 --error-max-dim 0 > "$L/torch_2gpu.log" 2>&1
say "PyTorch 2 GPUs: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/torch_2gpu.log" >> "$S"
pack
for nb in 4 2 1 3; do
  for g in 2 1; do
    [ "$(left)" -gt 40 ] || break
    CUDA_VISIBLE_DEVICES=$([ $g = 1 ] && echo 0 || echo 0,1) timeout 40 build-nb$nb/tpla ns -g $g \
      -s 1234 -n 10 -w 3 --gram=both --svd-max=0 16384x4096 14336x4096 4096x14336 \
      > "$L/ns_nb${nb}_g$g.log" 2>&1
    say "ns nb=$nb, $g GPU(s): exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_nb${nb}_g$g.log" | sed "s/^/nb$nb /" >> "$S"
  done
  pack
done
cat "$S"
