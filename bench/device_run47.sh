#!/usr/bin/env bash
# bench/device_run47.sh - GRAM_SHARDED's split products by copy-engine pulls at P = 2
# (ns_shard.c pulled_product, on the pulled Gram's transport): run 44's timelines showed
# the NCCL all-gathers of the products taking 75-600 us beside the GEMMs (products
# 197-709 us against ~160 for a redundant product + mirror). Predicted: GRAM_SHARDED
# with the Gram iteration at 16384x4096 ~3.3-3.6 ms (AUTO's GRAM_ALLREDUCE 3.9-4.1).
# 1. test_gpu_ns on 2 GPUs (its GRAM_SHARDED cases now pull their products);
# 2. tpla ns -g 2: GRAM_SHARDED + Gram iteration (pulled products, and NCCL sums as
#    before), AUTO; 1 GPU for the speed-up. About 2 minutes; device time was short.
set -u
. bench/device_lib.sh 47
gpu_build tpla_tool test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/test_gpu_ns_2.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_2.log")"
grep -E "^# 2 ranks, bf16 +GRAM_SHARDED|Gram iteration" "$L/test_gpu_ns_2.log" >> "$S"
pack
ns() { # name limit args...
  local name=$1 limit=$2; shift 2
  bounded "$limit" "$L/$name.log" build-gpu/tpla ns -s 1234 -n 20 -w 5 --gram=input \
    --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
ns sharded_gram_pulled 40 -g 2 --algo=gram_sharded --iterate=gram 16384x4096 14336x4096
ns sharded_x_pulled 40 -g 2 --algo=gram_sharded --iterate=x 8192x8192 16384x4096
TPLA_NS_GRAM_SUM=nccl ns sharded_gram_nccl 40 -g 2 --algo=gram_sharded --iterate=gram 16384x4096
ns auto_2gpu 40 -g 2 16384x4096 8192x8192
CUDA_VISIBLE_DEVICES=0 ns auto_1gpu 40 -g 1 16384x4096 8192x8192
pack
cat "$S"
