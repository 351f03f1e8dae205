#!/usr/bin/env bash
# bench/device_run25.sh - the Gram iteration's block rows (run 25). Its five
# s x s products per segment use the Gram's block rows (TPLA_NS_SYM_MAX_BLOCKS,
# 4): at s = 4096 four 1024-row GEMMs of 4096/3072/2048/1024 columns, whose
# tiles may fill one wave each (4 waves for 2.4 waves of tiles), against 3
# waves for two block rows (75% of the square's FLOPs instead of 62.5%).
# Builds (Gram blocks, product blocks): (4, 4) as committed, (4, 2), (4, 3),
# (4, 1) and (2, 2) (-DTPLA_NS_GRAM_PRODUCT_BLOCKS, -DTPLA_NS_SYM_MAX_BLOCKS);
# times the Gram iteration with a bf16 Gram on 2 GPUs (16384x4096, 14336x4096,
# 4096x14336) and 1 GPU (16384x4096, 4096x14336), the committed build first
# and last, with the 2-GPU PyTorch anchors in the same run. About 4 minutes.
set -u
. bench/device_lib.sh 25
left() { echo $(( 560 - ($(date +%s) - t0) )); }
VARIANTS="4_0 4_2 4_3 4_1 2_0"
for v in $VARIANTS; do
  dir=build-v$v
  (cmake -S . -B $dir -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
     "-DCMAKE_C_FLAGS=-DTPLA_NS_SYM_MAX_BLOCKS=${v%_*} -DTPLA_NS_GRAM_PRODUCT_BLOCKS=${v#*_}" \
     > "$L/configure_$v.log" 2>&1 &&
   cmake --build $dir -j "$(nproc)" --target tpla_tool > "$L/build_$v.log" 2>&1)
  say "build $v: exit $? ($(el))"
done
SH2="16384x4096 14336x4096 4096x14336"
timeout 120 torchrun --standalone --nproc_per_node=2 bench/ns_torch.py --shapes ${SH2// /,} \
  --iters 20 --warmup 3 --error-max-dim 0 > "$L/torch_2gpu.log" 2>&1
say "PyTorch 2 GPUs: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/torch_2gpu.log" >> "$S"
pack
n=0
for v in $VARIANTS 4_0; do
  n=$((n + 1))
  for g in 2 1; do
    [ "$(left)" -gt 30 ] || break
    shapes=$([ $g = 1 ] && echo "16384x4096 4096x14336" || echo "$SH2")
    CUDA_VISIBLE_DEVICES=$([ $g = 1 ] && echo 0 || echo 0,1) timeout 60 build-v$v/tpla ns -g $g \
      -s 1234 -n 20 -w 5 --gram=input --svd-max=0 --iterate=gram $shapes \
      > "$L/ns_${n}_v${v}_g$g.log" 2>&1
    say "v$v (gram blocks ${v%_*}, product blocks ${v#*_}; 0 = the Gram's), $g GPU(s): exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_${n}_v${v}_g$g.log" | sed "s/^/v$v /" >> "$S"
  done
  pack
done
cat "$S"
