#!/usr/bin/env bash
# bench/device_run56.sh - prepared in session 9, not run: TPLA_NS_PULL_WINDOWS=2 (two pull
# windows in turn; an exchange that waited for a peer piece ends without the closing
# handshake, run 50: 10-21 us per exchange; ns_pull_settle closes each call's last one).
# 1. test_gpu_ns on 2 GPUs with TPLA_NS_PULL_WINDOWS=2 (correctness, no hang);
# 2. memcheck (EAGER) of tpla ns -g 2 with it, GRAM_SHARDED + Gram iteration, one shape;
# 3. tpla ns -g 2 on the four 2-GPU shapes (AUTO, bf16 Gram), windows 1 against 2,
#    alternated twice; 1 GPU 8192^2 and 16384x4096 once for the speed-up. About 5 minutes.
set -u
. bench/device_lib.sh 56
gpu_build tpla_tool test_gpu_ns
TPLA_NS_PULL_WINDOWS=2 CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_w2.log" \
  build-gpu/tests/test_gpu_ns
say "test_gpu_ns, 2 windows, 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_w2.log")"
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TPLA_NS_PULL_WINDOWS=2 CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_w2.log" "$SAN" \
  --tool memcheck --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 \
  -c 0 --gram=both --algo=gram_sharded --iterate=gram 1024x512 96x1000
say "memcheck, 2 windows: exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_w2.log")"
pack
ns() { # name windows gpus args...
  local name=$1 w=$2 g=$3; shift 3
  TPLA_NS_PULL_WINDOWS=$w CUDA_VISIBLE_DEVICES=$([ "$g" = 1 ] && echo 0 || echo 0,1) \
    bounded 90 "$L/$name.log" build-gpu/tpla ns -g "$g" -s 1234 -n 20 -w 5 --gram=input \
    --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2; do
  for w in 1 2; do
    ns "w${w}_$rep" $w 2 8192x8192 16384x4096 4096x14336 14336x4096
  done
  pack
done
ns one_gpu 1 1 8192x8192 16384x4096
pack
cat "$S"
