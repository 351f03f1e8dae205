#!/usr/bin/env bash
# bench/device_run36.sh - prepared (f4a18f4), not yet run: GRAM_SHARDED with
# the Gram iteration (every s x s product split across the ranks; runs only
# when both are forced, no AUTO picks it yet). Predictions (ns_cost.c, CUDA
# constants, bf16 Gram, 5 steps, 2 GPUs; the model ran 6-13% low on 2 GPUs in
# run 23): 16384x4096 3.96 ms against 3.85 for GRAM_ALLREDUCE's Gram iteration
# (measured 4.11-4.30), 14336x4096 3.70 vs 3.59, 8192^2 12.2 vs 11.8 for the
# X iteration's GRAM_SHARDED; at P = 4 / 8 it is predicted 6-14% faster than
# GRAM_ALLREDUCE's on the tall shapes. So on 2 GPUs a win needs the
# all-gathers to hide better than the model assumes.
# 1. test_gpu_ns on 1 and 2 GPUs (its Gram-iteration cases now include GRAM_SHARDED);
# 2. compute-sanitizer memcheck of `tpla ns -g 2 --algo=gram_sharded --iterate=gram`;
# 3. `tpla ns -g 2` bf16 Gram, forced (gram_sharded, gram) against AUTO and
#    (gram_allreduce, gram) on the 2-GPU shapes, PyTorch's Gram all-reduce in
#    the same run. About 6 minutes.
set -u
. bench/device_lib.sh 36
left() { echo $(( 540 - ($(date +%s) - t0) )); }
gpu_build tpla_tool test_gpu_ns
for g in 1 2; do
  CUDA_VISIBLE_DEVICES=$([ $g = 1 ] && echo 0 || echo 0,1) bounded 150 "$L/test_gpu_ns_$g.log" \
    build-gpu/tests/test_gpu_ns
  say "test_gpu_ns, $g GPU(s): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_$g.log")"
done
grep -E "GRAM_SHARDED|Gram iteration" "$L"/test_gpu_ns_*.log >> "$S"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
bounded 90 "$L/memcheck.log" "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 \
  build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 --gram=both --iterate=gram --algo=gram_sharded \
  1024x512 512x1024 96x1000
say "memcheck ns gram_sharded+gram: exit $? ($(el)) $(grep 'ERROR SUMMARY' "$L/memcheck.log")"
pack
SH2="16384x4096 14336x4096 4096x14336 8192x8192"
[ "$(left)" -gt 150 ] && { bounded 120 "$L/torch_2gpu.log" torchrun --standalone \
  --nproc_per_node=2 bench/ns_torch.py --shapes ${SH2// /,} --iters 20 --warmup 3 --error-max-dim 0
  say "PyTorch 2 GPUs: exit $? ($(el))"; grep -E "^ *[0-9]+x[0-9]+ " "$L/torch_2gpu.log" >> "$S"; }
for rep in 1 2; do
  for cfg in "auto auto" "gram_sharded gram" "gram_allreduce gram"; do
    set -- $cfg
    [ "$(left)" -gt 40 ] || break
    log="$L/ns_${1}_${2}_$rep.log"
    bounded 90 "$log" build-gpu/tpla ns -g 2 -s 1234 -n 20 -w 5 --gram=input --svd-max=0 \
      --algo=$1 --iterate=$2 $SH2
    say "ns -g 2 --algo=$1 --iterate=$2 #$rep: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$1,$2 /" >> "$S"
  done
  pack
done
cat "$S"
