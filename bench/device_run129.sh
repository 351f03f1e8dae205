#!/usr/bin/env bash
# bench/device_run129.sh - two GPUs (nvidia-h200-x2), session 20: the Gram sum by pulls with
# each block row summed by its owner (branch exp-gram-owner, 2d236c7: the other rank's partial
# pulled first and added as the owner's GEMM's C, the sum pulled back; no fold kernels, only
# the narrowest own row's pull after the last GEMM) against main (0a2b764, whose Gram pulls
# every row to both ranks and folds it on lane 1: its last fold ends 48-89 us after the last
# GEMM at 8192^2, runs 44 and 72).
# 1. test_gpu_ns and test_gpu_ns_api on 2 GPUs (the exp build); compute-sanitizer memcheck of
#    `tpla ns -g 2` through the pulled Gram (GRAM_ALLREDUCE and GRAM_SHARDED, both iterations).
# 2. `tpla ns` A/B, three rounds: 1 GPU (8192^2, 16384x4096; the 1-GPU code is unchanged),
#    main on 2 GPUs, exp on 2 GPUs, the four 2-GPU shapes, -n 60 -w 20 (longer than run_ns.sh's
#    -n 20 -w 5: run 128 saw the power cap settle within the first ~0.1 s of load).
# Prepare: git archive 0a2b764 -o snap/run129_main.tar (carry ["snap"]).
# Run in the repository root on exp-gram-owner: bash bench/device_run129.sh
set -u
. bench/device_lib.sh 129
ROOT=$PWD
tar_build /tmp/s129main "$ROOT/snap/run129_main.tar" main tpla_tool &
gpu_build tpla_tool test_gpu_ns test_gpu_ns_api
wait
pack
CUDA_VISIBLE_DEVICES=0,1 bounded 240 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns (exp), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns_api.log" build-gpu/tests/test_gpu_ns_api
say "test_gpu_ns_api (exp): exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns_api.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for a in gram_allreduce gram_sharded; do
  for i in x gram; do
    CUDA_MODULE_LOADING=EAGER bounded 120 "$L/memcheck_${a}_$i.log" "$SAN" --tool memcheck \
      --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 -c 0 \
      --gram=both --algo=$a --iterate=$i 1024x512 96x1000 2048x2048
    say "memcheck (exp) $a $i: exit $? ($(el))" \
      "$(grep 'ERROR SUMMARY' "$L/memcheck_${a}_$i.log" | tr '\n' ' ')"
  done
done
pack
dir_of() { [ "$1" = exp ] && echo "$ROOT" || echo "/tmp/s129$1"; }
ns() { # name build gpus shapes...
  local name=$1 b=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/$name.log" "$(dir_of "$b")/build-gpu/tpla" ns -g "$g" \
    -s 1234 -n 60 -w 20 --gram=input --svd-max=0 -c 0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2 3; do
  [ "$(( $(date +%s) - t0 ))" -lt 470 ] || { say "round $rep: not run (time)"; break; }
  ns "one_$rep" exp 1 8192x8192 16384x4096
  ns "main_$rep" main 2 8192x8192 16384x4096 4096x14336 14336x4096
  ns "exp_$rep" exp 2 8192x8192 16384x4096 4096x14336 14336x4096
  pack
done
cat "$S"
