#!/usr/bin/env bash
# bench/device_run96.sh - the 2-GPU kind came back late in session 15 with ~10 device minutes
# left: a trimmed run 88 plus the 2-GPU checks of this session's library change.
#  1. test_gpu_overlap of main on 2 GPUs (FP8 op(B) N through the new transpose128 kernel);
#     tpla gemm-rs E4M3 (8192, 4096, 8192) op(B) N and T once each (eff with the new transpose);
#  2. test_gpu_ns of exp-z0split (572895b: Z_0's own rows over K < s/2 inside the Gram's exchange,
#     the new transport op `order`, only checked on a GPU) and of exp-combo (7009f2c: z0split +
#     exp-watch, with TPLA_XP_SPLIT_PULL=1 TPLA_OVERLAP_WATCH=1) on 2 GPUs;
#  3. tpla ns on 16384x4096, 14336x4096 and 8192x8192: 1 GPU (main), 2 GPUs main / z0 / combo
#     (split pulls), rounds alternating while time lasts (at most three).
# exp-mirror (run 88's fourth variant) is left out: run 70 measured the same idea slower.
# Run in the repository root of main with carry ["snap"] (snap/run88_z0.tar, snap/run88_combo.tar):
#   bash bench/device_run96.sh
set -u
. bench/device_lib.sh 96
gpu_build tpla_tool test_gpu_overlap &
tar_build /tmp/s96z snap/run88_z0.tar z0 tpla_tool test_gpu_ns &
tar_build /tmp/s96c snap/run88_combo.tar combo tpla_tool test_gpu_ns &
wait
CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/overlap_main.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap (main), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/overlap_main.log")"
for op in NN NT; do
  CUDA_VISIBLE_DEVICES=0,1 bounded 40 "$L/rs_e4m3_$op.log" build-gpu/tpla gemm-rs -g 2 -d e4m3 \
    --accum=split -t $op -n 20 -w 5 -s 1234 8192 4096 8192
  say "gemm-rs e4m3 $op: exit $? $(grep -E '^  gemm-rs ' "$L/rs_e4m3_$op.log")"
done
CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/test_gpu_ns_z0.log" /tmp/s96z/build-gpu/tests/test_gpu_ns
say "test_gpu_ns (z0), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_z0.log")"
TPLA_XP_SPLIT_PULL=1 TPLA_OVERLAP_WATCH=1 CUDA_VISIBLE_DEVICES=0,1 bounded 120 \
  "$L/test_gpu_ns_combo.log" /tmp/s96c/build-gpu/tests/test_gpu_ns
say "test_gpu_ns (combo, split + watch), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_combo.log")"
pack
ns() { # name build-dir gpus shapes...
  local name=$1 b=$2 g=$3; shift 3
  [ "$(( $(date +%s) - t0 ))" -lt 400 ] || { say "$name: not run (time)"; return; }
  CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/$name.log" "$b/tpla" ns -g "$g" \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
SHAPES="16384x4096 14336x4096 8192x8192"
for rep in 1 2 3; do
  ns "one_$rep" build-gpu 1 16384x4096 8192x8192
  ns "main_$rep" build-gpu 2 $SHAPES
  ns "z0_$rep" /tmp/s96z/build-gpu 2 $SHAPES
  TPLA_XP_SPLIT_PULL=1 ns "combo_$rep" /tmp/s96c/build-gpu 2 $SHAPES
  pack
done
cat "$S"
