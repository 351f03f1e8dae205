#!/usr/bin/env bash
# bench/device_run58.sh - after runs 55/56 made two pull windows and eight symmetric block
# rows the defaults (97dd885), and the pulled products' own rows placed by a copy engine
# and mirrored beside the peer's rows (this commit; host-checked: same bits as NCCL's sums).
# snap/ holds this commit (run58.tar, unpacked here) and 97dd885 (run58_base.tar).
# 1. test_gpu_ops (the mirror of a range of rows) and test_gpu_ns on 2 GPUs; memcheck of
#    GRAM_SHARDED's pulled products (X and Gram iteration);
# 2. tpla ns -g 2, this commit against 97dd885, alternated twice, the four 2-GPU shapes;
# 3. bench/run_ns.sh (issue #3's table, PyTorch in the same run) with the faster build;
# 4. the whole GPU suite (this commit), quiet;
# 5. bench/ns_auto_check.py at 8192^2 and 16384x4096 (bf16 Gram) and 16384x4096 (fp32
#    Gram; run 57: AUTO's Gram iteration 4% slower than GRAM_SHARDED's X), one rep each.
# About 8 minutes.
set -u
. bench/device_lib.sh 58
ROOT=$PWD
gpu_build tpla_tool test_gpu_ops test_gpu_ns
rm -rf /tmp/s58base && mkdir -p /tmp/s58base && tar xf "$ROOT/snap/run58_base.tar" -C /tmp/s58base
(cd /tmp/s58base && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
  > "$L/configure_base.log" 2>&1 && cmake --build build-gpu -j "$(nproc)" --target tpla_tool \
  > "$L/build_base.log" 2>&1)
say "build 97dd885: exit $? ($(el))"
bounded 120 "$L/test_gpu_ops.log" build-gpu/tests/test_gpu_ops
say "test_gpu_ops: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ops.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for it in x gram; do
  CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_$it.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 -c 0 \
    --gram=both --algo=gram_sharded --iterate=$it 1024x512 96x1000
  say "memcheck GRAM_SHARDED $it: exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_$it.log")"
done
pack
ns() { # name tpla args...
  local name=$1 tool=$2; shift 2
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$tool" ns -g 2 -s 1234 -n 20 -w 5 \
    --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  ns "base_$rep" /tmp/s58base/build-gpu/tpla 8192x8192 16384x4096 4096x14336 14336x4096
  ns "new_$rep" build-gpu/tpla 8192x8192 16384x4096 4096x14336 14336x4096
  pack
done
sum() { cat "$L"/"$1"_*.log | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
base=$(sum base) new=$(sum new)
say "sum of medians: 97dd885 $base ms, this commit $new ms"
if awk "BEGIN {exit !($new <= $base)}"; then pick=$ROOT; else pick=/tmp/s58base; fi
say "run_ns with $pick"
(cd "$pick" && OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1)
say "run_ns: exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
OUT=$L/gpu-tests timeout 300 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite, quiet: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed|not checked" "$L/gpu_tests.log" | head -10 >> "$S"
pack
timeout 100 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --out "$L/auto" \
  8192x8192 16384x4096 > "$L/auto_check.log" 2>&1
say "ns_auto_check bf16: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_check.log" >> "$S"
pack
timeout 60 python3 bench/ns_auto_check.py --tpla build-gpu/tpla -g 2 --reps 1 --gram fp32 \
  --out "$L/auto_fp32" 16384x4096 > "$L/auto_fp32.log" 2>&1
say "ns_auto_check fp32: exit $? ($(el))"
grep -E "PASS|MISS|AUTO check" "$L/auto_fp32.log" >> "$S"
pack
cat "$S"
