#!/usr/bin/env bash
# bench/device_run55.sh - prepared in session 9, not run: eight block rows for the symmetric
# products at s >= 8192 (-DTPLA_NS_SYM_MAX_BLOCKS=8; the default 4 caps 8192's Gram at
# 2048-row blocks). Why: 10% fewer FLOPs in every symmetric Gram and square (nb(nb+1)/2 of
# nb^2 blocks: 36/64 against 10/16), and at P = 2 a smaller last Gram row to pull and fold
# (run 50: the folds end 60-89 us after the last Gram GEMM at 8192^2). Run 17 swept nb <= 4
# at s = 4096 only (1024-row blocks, the same size as nb 8 at 8192). s = 4096 is unchanged
# (1024-row minimum). Host: ctest -R test_ns passes with nb 8 (session 9).
# 1. test_gpu_ns on 2 GPUs with nb 8 (its pulled Gram then has 9 flags);
# 2. tpla ns, default build against nb 8, alternated twice: 8192^2 on 1 and 2 GPUs (both Gram
#    dtypes), 16384^2 on 1 GPU (bf16 Gram, -n 10). About 6 minutes.
set -u
. bench/device_lib.sh 55
ROOT=$PWD
gpu_build tpla_tool
cmake -S . -B build-nb8 -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
  -DCMAKE_C_FLAGS=-DTPLA_NS_SYM_MAX_BLOCKS=8 > "$L/configure_nb8.log" 2>&1
cmake --build build-nb8 -j "$(nproc)" --target tpla_tool test_gpu_ns > "$L/build_nb8.log" 2>&1
say "build nb 8: exit $? ($(el)), warnings: $(grep -c warning "$L/build_nb8.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/test_gpu_ns_nb8.log" build-nb8/tests/test_gpu_ns
say "test_gpu_ns, nb 8, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_nb8.log")"
pack
ns() { # name build gpus args...
  local name=$1 build=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=$([ "$g" = 1 ] && echo 0 || echo 0,1) bounded 90 "$L/$name.log" \
    "$build/tpla" ns -g "$g" -s 1234 -w 3 --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  for nb in 4 8; do
    b=$([ $nb = 4 ] && echo build-gpu || echo build-nb8)
    ns "nb${nb}_2gpu_$rep" $b 2 -n 20 --gram=both 8192x8192
    ns "nb${nb}_1gpu_$rep" $b 1 -n 20 --gram=both 8192x8192
    ns "nb${nb}_big_$rep" $b 1 -n 10 --gram=input 16384x16384
    pack
  done
done
cat "$S"
