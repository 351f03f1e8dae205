#!/usr/bin/env bash
# bench/device_run210.sh - one GPU (nvidia-h200), session 33: the tool's new Newton-Schulz check
# (ns_rel: the result against the same steps in exact arithmetic, U p(S) V^T from a float64
# SVD) on cuBLASLt's results: presets x dtypes x Gram dtypes x iterations, shapes up to 4096,
# each row must pass its bound; the tool's refusals and rotation notes on the GPU; CTest (the
# new test_tool among them) and the Python checks on one rank (the layers' new initialization,
# the device guard of the communicator).
# Run in the repository root (no carry): bash bench/device_run210.sh
set -u
. bench/device_lib.sh 210
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
T=build-gpu/tpla
export CUDA_VISIBLE_DEVICES=0
n=0 bad=0
for d in bf16 fp16 fp32; do
  for preset in muon muon5 polar cubic; do
    for it in x gram; do
      log=$L/ns_${d}_${preset}_${it}.log
      bounded 120 "$log" $T ns -g 1 -n 3 -w 1 -s 11 -d $d --preset=$preset --iterate=$it \
        --gram=both 1024x1024 2048x512 512x2048 1536x1536
      rc=$?; n=$((n + 1)); [ $rc -ne 0 ] && bad=$((bad + 1))
      awk -v d=$d -v p=$preset -v it=$it '$3=="tpla"{print "ns", d, p, it, $1, $8, $10, $15}' \
        "$log" >> "$L/ns_rel.txt"
      grep -E "BAD|FAILED" "$log" | head -n 3 >> "$S"
    done
  done
done
say "ns check on cuBLASLt (1 GPU, 24 invocations x 4 shapes x 2 Grams): $bad of $n failed ($(el))"
awk '{k=$2" "$7; if ($8+0 > m[k]) m[k]=$8+0} END {for (k in m) print "max ns_rel", k, m[k]}' \
  "$L/ns_rel.txt" | sort >> "$S"
bounded 200 "$L/ns_4096.log" $T ns -g 1 -n 3 -w 1 -s 11 --gram=both 4096x4096
say "ns 4096x4096 bf16, both Grams: exit $? ($(el)) $(awk '$3=="tpla"{printf "%s ns_rel %s; ", $10, $15}' "$L/ns_4096.log")"
TPLA_TOOL_NS_PERTURB=0.05 bounded 120 "$L/ns_perturbed.log" $T ns -g 1 -n 1 -w 0 1024x1024
say "ns, result off by 5%: exit $? (must be 1) $(grep -c 'above its bound' "$L/ns_perturbed.log") rows flagged"
bounded 120 "$L/gemm_small.log" $T gemm -g 1 -n 5 -w 2 -b 256 -e 1024
say "gemm 256..1024 bf16: exit $? ($(grep -c NOTE "$L/gemm_small.log") rotation notes) $(awk '$1==1{printf "%s:%s sets ", $5, $8}' "$L/gemm_small.log")"
bounded 200 "$L/rs_fp8_cache_b.log" $T gemm-rs -g 1 -n 20 -w 5 -d e4m3 --cache-b 8192 4096 8192
say "gemm-rs e4m3 --cache-b 1 GPU: exit $? $(awk '$1=="gemm-rs"{print "time", $9, "gemm", $12, "eff", $15, "wrong", $17}' "$L/rs_fp8_cache_b.log")"
pack
(cd build-gpu && bounded 300 "$L/ctest.log" ctest --output-on-failure --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run" "$L/ctest.log" | head -n 10 >> "$S"
pack
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 200 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
