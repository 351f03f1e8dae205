#!/usr/bin/env bash
# bench/device_run80.sh - issue #7 on nvidia-h200-x4 with the session's last ~6 device minutes
# (the 4-GPU kind was lent for the first time; bench/device_tp.sh's two parts need ~18):
# 1. build, then the GPU tests (CTest label gpu) with all four GPUs visible; 2. the overlap
# benchmark at TP = 4 (bench/run_overlap.sh, PyTorch anchors in the same run); 3. while the time
# lasts, bench/run_ns.sh with NS_TP=4 (1 GPU and 4 GPUs, PyTorch anchors). Each part packed as
# it ends. Run in the repository root of main: bash bench/device_run80.sh
set -u
. bench/device_lib.sh 80
left() { echo $(( 320 - ($(date +%s) - t0) )); }
say "GPUs: $(nvidia-smi -L 2>/dev/null | wc -l)"
nvidia-smi topo -m > "$L/topo.log" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build: exit $? ($(el)), warnings: $(grep -c warning "$L/build.log")"
(cd build-gpu && timeout 110 ctest -L gpu --output-on-failure) > "$L/ctest_4gpu.log" 2>&1
say "ctest -L gpu, 4 GPUs: exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest_4gpu.log")"
grep -E "Failed|Timeout|Skipped|\*\*\*" "$L/ctest_4gpu.log" | head -10 >> "$S"
pack
OUT=$L/overlap_tp4 TP=4 timeout 110 bash bench/run_overlap.sh > "$L/overlap_tp4.log" 2>&1
say "run_overlap TP=4: exit $? ($(el))"
cat "$L/overlap_tp4/compare.txt" >> "$S" 2>/dev/null
pack
if [ "$(left)" -gt 60 ]; then
  OUT=$L/run_ns NS_TP=4 timeout "$(left)" bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
  say "run_ns NS_TP=4: exit $? ($(el))"
  grep -E "^## |^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
else
  say "run_ns NS_TP=4: not run ($(left) s left)"
fi
pack
cat "$S"
