#!/usr/bin/env bash
# bench/device_run77.sh - the row split's chunks (ns_rowsplit.c): each published product in one
# 2048-row GEMM (-DTPLA_NS_ROWSPLIT_CHUNKS=1, `c1`) against two 1024-row chunks (main, `c2`).
# Run 75's timeline at 16384x4096: a 1024-row chunk took 49-65 us, H's single 2048-row GEMM 99
# us (~112 against ~99 a product); with the update by halves of W's rows every published
# product's pull has a GEMM to hide behind (Z_0 behind H, G_1 behind Z_1's first K-half, W and a
# one-step segment's Z_0 behind the update's first half), so one chunk may cost no exposed pull.
# 1. test_gpu_ns of c1 on 2 GPUs; 2. tpla ns -g 2 on the three Gram-iteration 2-GPU shapes, c2
# and c1, three rounds, tpla ns -g 1 16384x4096 (c2) before each; 3. bench/run_ns.sh in the
# build with the smaller sum; 4. timelines (bench/run75_rowsplit_trace_patch.py): c1 on 2 GPUs
# and 16384x4096 on 1 GPU (LOCAL; run 37's marks: products, mirrors, Gram, update), the
# measured side of run 75's FLOP-count estimate. About 6 minutes.
# Run in the repository root of main: bash bench/device_run77.sh
set -u
. bench/device_lib.sh 77
ROOT=$PWD
c1_build() {
  CFLAGS=-DTPLA_NS_ROWSPLIT_CHUNKS=1 cmake -S . -B build-c1 -DCMAKE_BUILD_TYPE=Release \
    -DTPLA_CUDA=ON > "$L/configure_c1.log" 2>&1 &&
    cmake --build build-c1 -j "$(nproc)" --target tpla_tool test_gpu_ns > "$L/build_c1.log" 2>&1
  say "build c1: exit $? ($(el)), warnings: $(grep -c warning "$L/build_c1.log")"
}
c1_build &
gpu_build tpla_tool test_gpu_ns
wait
grep -c "TPLA_NS_ROWSPLIT_CHUNKS=1" build-c1/CMakeCache.txt | sed 's/^/c1 define in the cache: /' >> "$S"
pack
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_c1.log" build-c1/tests/test_gpu_ns
say "test_gpu_ns (c1), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_c1.log")"
grep -E "Gram iteration" "$L/test_gpu_ns_c1.log" >> "$S"
pack
ns() { # name build-dir gpus shapes...
  local name=$1 b=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$b/tpla" ns -g "$g" \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2 3; do
  ns "one_$rep" build-gpu 1 16384x4096
  ns "c2_$rep" build-gpu 2 16384x4096 4096x14336 14336x4096
  ns "c1_$rep" build-c1 2 16384x4096 4096x14336 14336x4096
  pack
done
sum() { cat "$L"/"$1"_?.log | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
best=c2
awk "BEGIN {exit !($(sum c1) < $(sum c2))}" && best=c1
say "sums of medians: c2 $(sum c2), c1 $(sum c1) ms; run_ns in $best"
dir=build-gpu; [ $best = c1 ] && dir=build-c1
BUILD=$ROOT/$dir OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns ($best): exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
CFLAGS=-DTPLA_NS_ROWSPLIT_CHUNKS=1 patched_build /tmp/s77c1 "$ROOT/bench/run75_rowsplit_trace_patch.py"
ns_trace tall_c1 16384x4096
CUDA_VISIBLE_DEVICES=0 TPLA_TRACE_NS=8 bounded 60 "$L/tall_one.log" build-exp/tpla ns -g 1 \
  -s 1234 -n 20 -w 5 --gram=input --svd-max=0 16384x4096
say "tall_one: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/tall_one.log") trace lines"
grep -E "^ *[0-9]+x[0-9]+ " "$L/tall_one.log" >> "$S"
cd "$ROOT" || exit 1
pack
cat "$S"
