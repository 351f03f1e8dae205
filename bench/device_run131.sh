#!/usr/bin/env bash
# bench/device_run131.sh - two GPUs (nvidia-h200-x2), session 20: GRAM_SHARDED's pulled
# products mirrored row by row (branch exp-row-mirror2: each block row's part right of its
# diagonal block transposed into the lower blocks, the own rows while the peer's rows arrive,
# the peer's after each arrives; the exchange no longer closed before a whole-triangle mirror)
# against main (0a2b764). Run 130's 8192^2 timeline of main: per step the product's close
# took 8-31 us and its mirror ~49 us after the last arrival.
# 1. test_gpu_ops (1 GPU: the new transpose kernel), test_gpu_ns and test_gpu_ns_api (2 GPUs);
#    memcheck and racecheck of `tpla ns -g 2 --algo=sharded` (X iteration: the pulled
#    polynomial; Gram iteration at a small s: the pulled products).
# 2. `tpla ns` A/B, three rounds: 1 GPU (8192^2, 16384x4096), main and exp on 2 GPUs, the four
#    2-GPU shapes, -n 60 -w 20.
# Prepare: git archive 0a2b764 -o snap/run129_main.tar (carry ["snap"]).
# Run in the repository root on exp-row-mirror2: bash bench/device_run131.sh
set -u
. bench/device_lib.sh 131
ROOT=$PWD
tar_build /tmp/s131main "$ROOT/snap/run129_main.tar" main tpla_tool &
gpu_build tpla_tool test_gpu_ops test_gpu_ns test_gpu_ns_api
wait
pack
CUDA_VISIBLE_DEVICES=0 bounded 200 "$L/test_gpu_ops.log" build-gpu/tests/test_gpu_ops
say "test_gpu_ops (exp), 1 GPU: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ops.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 240 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns (exp), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_api.log" build-gpu/tests/test_gpu_ns_api
say "test_gpu_ns_api (exp): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_api.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  for i in x gram; do
    CUDA_MODULE_LOADING=EAGER bounded 120 "$L/${tool}_$i.log" "$SAN" --tool $tool \
      --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 -c 0 \
      --gram=both --algo=sharded --iterate=$i 1024x512 96x1000 $([ $tool = memcheck ] && echo 2048x2048)
    say "$tool (exp) sharded $i: exit $? ($(el))" \
      "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/${tool}_$i.log" | tr '\n' ' ')"
  done
done
pack
dir_of() { [ "$1" = exp ] && echo "$ROOT" || echo "/tmp/s131$1"; }
ns() { # name build gpus shapes...
  local name=$1 b=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/$name.log" "$(dir_of "$b")/build-gpu/tpla" ns -g "$g" \
    -s 1234 -n 60 -w 20 --gram=input --svd-max=0 -c 0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2 3; do
  [ "$(( $(date +%s) - t0 ))" -lt 480 ] || { say "round $rep: not run (time)"; break; }
  ns "one_$rep" exp 1 8192x8192 16384x4096
  ns "main_$rep" main 2 8192x8192 16384x4096 4096x14336 14336x4096
  ns "exp_$rep" exp 2 8192x8192 16384x4096 4096x14336 14336x4096
  pack
done
cat "$S"
