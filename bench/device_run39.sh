#!/usr/bin/env bash
# bench/device_run39.sh - the distributed Gram summed by copy-engine pulls on the
# overlap transport at P = 2 (src/core/ns_pull.c), against NCCL's all-reduce
# (TPLA_NS_GRAM_SUM=nccl), after runs 37/38 showed NCCL's kernels and the Gram's
# GEMMs sharing the SMs (16384x4096 bf16: Gram 400 us against 235 of GEMMs).
# Predicted: 16384x4096 ~3.8 ms (4.1-4.2 with NCCL), 8192^2 ~10 ms (11.6).
# 1. test_gpu_ns on 1 and 2 GPUs (every distributed Gram at P = 2 now pulls);
# 2. compute-sanitizer memcheck of `tpla ns -g 2` (GRAM_ALLREDUCE X and Gram
#    and Gram iteration, GRAM_SHARDED both; --report-api-errors no: cuBLASLt's and NCCL's
#    probing) and of the 1-GPU mirror shapes of run 38 (whose memcheck lacked it);
# 3. `tpla ns -g 2`, the four 2-GPU shapes, bf16 Gram, AUTO: pulls vs NCCL,
#    alternated twice; 1 GPU tall and square for the speed-up;
# 4. run 38's test_gpu_overlap hang (SENDRECV case, rank 1 inside cuLibraryLoadData)
#    replayed with its seed, twice with the tests' EAGER loading, once LAZY.
set -u
. bench/device_lib.sh 39
gpu_build tpla_tool test_gpu_ns test_gpu_overlap
for g in 1 2; do
  CUDA_VISIBLE_DEVICES=$([ $g = 1 ] && echo 0 || echo 0,1) bounded 150 "$L/test_gpu_ns_$g.log" \
    build-gpu/tests/test_gpu_ns
  say "test_gpu_ns, $g GPU(s): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_$g.log")"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for algo in gram_allreduce gram_sharded; do
  for iter in x gram; do
    bounded 120 "$L/memcheck_${algo}_$iter.log" "$SAN" --tool memcheck --report-api-errors no \
      --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 --gram=both --algo=$algo \
      --iterate=$iter 1024x512 96x1000
    say "memcheck ns -g 2 $algo $iter: exit $? ($(el)) $(grep 'ERROR SUMMARY' "$L/memcheck_${algo}_$iter.log")"
  done
done
CUDA_VISIBLE_DEVICES=0 bounded 120 "$L/memcheck_1gpu.log" "$SAN" --tool memcheck \
  --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 1 -n 1 -w 0 -c 0 --gram=both \
  1024x512 96x1000 200x136
say "memcheck ns -g 1 (mirror kernels): exit $? ($(el)) $(grep 'ERROR SUMMARY' "$L/memcheck_1gpu.log")"
pack
SH2="16384x4096 14336x4096 4096x14336 8192x8192"
for rep in 1 2; do
  for sum in pull nccl; do
    log="$L/ns_2gpu_${sum}_$rep.log"
    ( [ $sum = nccl ] && export TPLA_NS_GRAM_SUM=nccl
      bounded 90 "$log" build-gpu/tpla ns -g 2 -s 1234 -n 20 -w 5 --gram=input --svd-max=0 $SH2 )
    say "ns -g 2 ($sum) #$rep: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$sum /" >> "$S"
  done
done
CUDA_VISIBLE_DEVICES=0 bounded 90 "$L/ns_1gpu.log" build-gpu/tpla ns -g 1 -s 1234 -n 20 -w 5 \
  --gram=input --svd-max=0 16384x4096 8192x8192
say "ns -g 1: exit $? ($(el))"
grep -E "^ *[0-9]+x[0-9]+ " "$L/ns_1gpu.log" | sed "s/^/1gpu /" >> "$S"
pack
for try in eager1 eager2 lazy; do
  ( [ $try = lazy ] && export TPLA_TEST_LAZY=1
    CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_SEED=1883259916312822 bounded 75 \
      "$L/overlap_replay_$try.log" build-gpu/tests/test_gpu_overlap )
  say "test_gpu_overlap replay ($try): exit $? ($(el)) $(grep -E '^HANG|passed' "$L/overlap_replay_$try.log" | head -2 | tr '\n' ' ')"
done
pack
cat "$S"
