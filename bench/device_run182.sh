#!/usr/bin/env bash
# bench/device_run182.sh - one GPU (nvidia-h200), session 27: the Gram iteration's s x s products
# in two block rows (a triangle, then the mirror it keeps anyway) against one (the whole product,
# then the mirror) at s = 1024 and 1536, where the default takes one block row: the library
# built with -DTPLA_NS_GRAM_PRODUCT_BLOCKS=2 (pb2) against the default build, alternating, in
# bench/ns_batch_bench.py (bf16-Gram rows take the Gram iteration) and the Muon step with
# ns_gram_dtype=bf16 (bench/muon_graph_bench.py --adamw, width 1024 x 8).
# Run in the repository root (no carry): bash bench/device_run182.sh
set -u
. bench/device_lib.sh 182
gpu_build tpla
cmake -S . -B build-pb2 -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
  -DCMAKE_C_FLAGS=-DTPLA_NS_GRAM_PRODUCT_BLOCKS=2 > "$L/configure_pb2.log" 2>&1
cmake --build build-pb2 -j "$(nproc)" --target tpla > "$L/build_pb2.log" 2>&1
say "build pb2: exit $? ($(el)), define in the cache: $(grep -c 'TPLA_NS_GRAM_PRODUCT_BLOCKS=2' build-pb2/CMakeCache.txt)"
export CUDA_VISIBLE_DEVICES=0
for round in 1 2; do
  for lib in default pb2; do
    so=$PWD/build-gpu/libtpla.so; [ $lib = pb2 ] && so=$PWD/build-pb2/libtpla.so
    TPLA_LIBRARY=$so bounded 150 "$L/ns_batch_${lib}_$round.log" python3 bench/ns_batch_bench.py \
      --batches 8x4096x1024,8x1024x4096,8x6144x1536
    say "ns_batch_bench $lib round $round: exit $? ($(el))"
    grep -E "tpla_batch" "$L/ns_batch_${lib}_$round.log" | sed "s/^/$lib $round /" >> "$S"
    pack
  done
done
for lib in default pb2; do
  so=$PWD/build-gpu/libtpla.so; [ $lib = pb2 ] && so=$PWD/build-pb2/libtpla.so
  TPLA_LIBRARY=$so bounded 150 "$L/muon_$lib.log" python3 bench/muon_graph_bench.py \
    --hidden 1024 --layers 8 --adamw
  say "muon $lib: exit $? ($(el))"
  grep -E "^  tpla" "$L/muon_$lib.log" | sed "s/^/$lib /" >> "$S"
  pack
done
cat "$S"
