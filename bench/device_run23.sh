#!/usr/bin/env bash
# bench/device_run23.sh - prepared, not yet run: the first GPU run of the Gram
# iteration (TPLA_NS_ITERATE_GRAM, 8b0d37d). (1) the GPU suite (test_gpu_ns has
# Gram-iteration cases on 1 and 2 GPUs); (2) tpla ns with --iterate=x and
# --iterate=gram, both Gram precisions, on 1 GPU (4096x14336, 16384x4096,
# 14336x4096, 8192x8192) and 2 GPUs (the four DESIGN.md 2-GPU shapes), with
# the PyTorch anchors on 1 and 2 GPUs in the same run; (3) errors against the
# float64 host SVD on 2048x2048 and 4096x1024 for both iterations; (4)
# compute-sanitizer memcheck of a small 2-GPU Gram iteration. Predictions
# (docs/PERFORMANCE.md): bf16 Gram, 16384x4096, 2 GPUs ~17% faster than the
# X iteration; 1 GPU 24-26% faster at 4096x14336 and 16384x4096; slower at
# 8192x8192. About 9 minutes; steps after (1) run while the 560 s last.
set -u
. bench/device_lib.sh 23
left() { echo $(( 560 - ($(date +%s) - t0) )); }
OUT=$L/gpu-tests timeout 240 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "tests/gpu/run.sh: exit $? ($(el)): $(tail -n 1 "$L/gpu_tests.log")"
grep -E "^== " "$L/gpu_tests.log" | tail -n 8 >> "$S"
grep -h "Gram iteration" "$L"/gpu-tests/*.log 2>/dev/null | head -n 8 >> "$S"
pack
T=build-gpu/tpla
SH1="4096x14336 16384x4096 14336x4096 8192x8192"
SH2="16384x4096 14336x4096 4096x14336 8192x8192"
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 bench/ns_torch.py --shapes ${SH1// /,} --iters 10 \
  --warmup 3 --error-max-dim 0 > "$L/torch_1gpu.log" 2>&1
say "PyTorch 1 GPU: exit $? ($(el))"
timeout 120 torchrun --standalone --nproc_per_node=2 bench/ns_torch.py --shapes ${SH2// /,} \
  --iters 10 --warmup 3 --error-max-dim 0 > "$L/torch_2gpu.log" 2>&1
say "PyTorch 2 GPUs: exit $? ($(el))"
grep -hE "^ *[0-9]+x[0-9]+ " "$L/torch_1gpu.log" "$L/torch_2gpu.log" >> "$S"
pack
for it in x gram; do
  for g in 1 2; do
    [ "$(left)" -gt 60 ] || break
    shapes=$([ $g = 1 ] && echo "$SH1" || echo "$SH2")
    CUDA_VISIBLE_DEVICES=$([ $g = 1 ] && echo 0 || echo 0,1) timeout 60 $T ns -g $g -s 1234 \
      -n 10 -w 3 --gram=both --svd-max=0 --iterate=$it $shapes > "$L/ns_${it}_g$g.log" 2>&1
    say "ns --iterate=$it, $g GPU(s): exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_${it}_g$g.log" | sed "s/^/$it /" >> "$S"
    pack
  done
done
for it in x gram; do
  [ "$(left)" -gt 70 ] || break
  timeout 60 $T ns -g 1 -s 1234 -n 3 -w 1 -c 1 --gram=both --iterate=$it 2048x2048 4096x1024 \
    > "$L/ns_check_$it.log" 2>&1
  say "ns -c 1 --iterate=$it: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_check_$it.log" | sed "s/^/check $it /" >> "$S"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "$(left)" -gt 40 ]; then
  bounded $(( $(left) - 10 < 90 ? $(left) - 10 : 90 )) "$L/memcheck_gram_iter.log" "$SAN" \
    --tool memcheck --report-api-errors no --error-exitcode 99 $T ns -g 2 -n 1 -w 0 -c 0 \
    --gram=both --iterate=gram 1024x512 512x1024 96x1000
  say "memcheck tpla ns -g 2 --iterate=gram: exit $? ($(el))"
  grep -E "ERROR SUMMARY|Invalid|misaligned" "$L/memcheck_gram_iter.log" | head -n 4 >> "$S"
fi
pack
cat "$S"
