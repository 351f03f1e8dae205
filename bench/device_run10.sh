#!/usr/bin/env bash
# bench/device_run10.sh - GPU session 10: Newton-Schulz with GRAM_SHARDED
# (commit 9fe3fc7): bench/run_ns.sh on the 2-GPU shapes (AUTO) with the
# 1-GPU baselines and the PyTorch anchors, then the forced A/B lines
# (--algo=gram / sharded / redist) on 2 GPUs. Logs in $OUT/logs.tgz.
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run10-logs; mkdir -p "$L"
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
S=$OUT/summary.txt; : > "$S"
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "$*" | tee -a "$S"; }
(cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  cmake --build build-gpu -j 16 --target tpla_tool > "$L/build.log" 2>&1)
say "build: exit $? ($(el))"
SHAPES_1GPU="4096x14336 8192x8192" SHAPES_BIG="" CHECK_SHAPE="" OUT=$L/ns BUILD=$PWD/build-gpu \
  timeout 330 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns.sh (AUTO): exit $? ($(el))"
cp "$L/ns/compare.txt" "$OUT/ns_compare.txt" 2>/dev/null
pack
T=build-gpu/tpla
for algo in gram sharded; do
  timeout 75 $T ns -g 2 -s 1234 -n 20 -w 5 --gram=both --svd-max=0 --algo=$algo \
    8192x8192 16384x4096 14336x4096 4096x14336 > "$L/ns_$algo.log" 2>&1
  say "tpla ns -g 2 --algo=$algo: exit $? ($(el))"
  pack
done
cat "$S"; tail -n 40 "$OUT/ns_compare.txt" 2>/dev/null
for algo in gram sharded; do grep -vE "^#" "$L/ns_$algo.log" | head -n 12; done
