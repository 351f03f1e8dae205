#!/usr/bin/env bash
# bench/device_run62.sh - prepared in session 10, not run: GEMM+AllReduce with its last reduced
# chunk pulled by a kernel on the SMs (branch exp-sm-tail-pull, snap/run62_exp.tar = its `git
# archive`) against main (this tree), bf16, 2 GPUs. Run 30: the call ends 71-83 us after the
# last GEMM, the last chunk's copy-engine pull taking 61-64 us (eff 0.84, target 0.90); the SMs
# are idle by then. 1. test_gpu_overlap on 2 GPUs with the branch; memcheck and racecheck of
# one branch gemm-ar call; 2. tpla gemm-ar -g 2 -d bf16 on DESIGN.md's three AR shapes, main
# against the branch, alternated twice (each line has eff). About 4 minutes.
# Prepare: git archive HEAD -o snap/run62.tar && git archive exp-sm-tail-pull -o snap/run62_exp.tar;
# run (carry ["snap"]): mkdir -p /tmp/s62/snap && tar xf snap/run62.tar -C /tmp/s62 &&
#   cp snap/run62_exp.tar /tmp/s62/snap/ && cd /tmp/s62 && bash bench/device_run62.sh
set -u
. bench/device_lib.sh 62
ROOT=$PWD
gpu_build tpla_tool
EXP=/tmp/s62exp
tar_build "$EXP" "$ROOT/snap/run62_exp.tar" exp-sm-tail-pull tpla_tool test_gpu_overlap
CUDA_VISIBLE_DEVICES=0,1 bounded 240 "$L/test_gpu_overlap_exp.log" \
  "$EXP/build-gpu/tests/test_gpu_overlap"
say "test_gpu_overlap (exp), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_overlap_exp.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  CUDA_MODULE_LOADING=EAGER bounded 150 "$L/${tool}_exp.log" "$SAN" --tool $tool \
    --report-api-errors no --error-exitcode 99 "$EXP/build-gpu/tpla" gemm-ar -g 2 -d bf16 \
    -n 2 -w 0 1024 512 768
  say "$tool (exp) gemm-ar: exit $? $(grep 'ERROR SUMMARY\|RACECHECK SUMMARY' "$L/${tool}_exp.log")"
done
pack
ar() { # name tpla
  CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/$1.log" "$2" gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234
  say "$1: exit $? ($(el))"
  grep -E "^  gemm-ar " "$L/$1.log" | sed "s/^/$1 /" >> "$S"
}
for rep in 1 2; do
  ar "main_$rep" build-gpu/tpla
  ar "exp_$rep" "$EXP/build-gpu/tpla"
  pack
done
cat "$S"
