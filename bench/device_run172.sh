#!/usr/bin/env bash
# bench/device_run172.sh - two GPUs (nvidia-h200-x2), session 26, in order of value, each part
# packed as it ends (the call may be cut short):
#  1. the Python checks on 2 ranks (checks_graphs' captured Muon step with a scheduled tensor lr
#     and capturable AdamW, now with comm over 2 ranks);
#  2. bench/muon_graph_bench.py, a data-parallel Muon step on 2 ranks (tpla's batched plan with
#     owners and groups against the reference recipe dealt by shape with NCCL all_gathers) and
#     the same step on 1 GPU in the same call, at widths 1024 and 2048 (8 layers);
#  3. run 142's library A/B at (8192, 4096, 8192), -n 100 -w 20, never measured: E4M3 split
#     GEMM+RS, bf16 GEMM+RS and GEMM+AR, as main does them, with direct partials
#     (TPLA_OVERLAP_DIRECT=1; automatic chunks and one chunk) and with the rehearsal's GEMM
#     tuning (TPLA_OVERLAP_TUNE=1); then test_gpu_overlap with direct partials.
# Run in the repository root (no carry), kind nvidia-h200-x2: bash bench/device_run172.sh
set -u
. bench/device_lib.sh 172
gpu_build tpla tpla_tool test_gpu_overlap
export TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 120 "$L/python_2gpu.log" torchrun --standalone --nproc_per_node=2 \
  tests/python/gpu/run_checks.py
say "python checks (2 ranks): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_2gpu.log" | tr '\n' ' ')"
grep -E "^check_graphs" "$L/python_2gpu.log" | grep -oE "'muon': \{[^}]*\}" >> "$S"
pack
for width in 1024 2048; do
  for ranks in 2 1; do
    log="$L/muon_${width}_$ranks.log"
    if [ $ranks = 1 ]; then
      CUDA_VISIBLE_DEVICES=0 bounded 100 "$log" python3 bench/muon_graph_bench.py \
        --hidden $width --layers 8
    else
      bounded 120 "$log" torchrun --standalone --nproc_per_node=2 bench/muon_graph_bench.py \
        --hidden $width --layers 8
    fi
    say "muon width $width x 8 layers, $ranks rank(s): exit $? ($(el))"
    grep -E "^  |^# (tpla|ranks|.*no graph)" "$log" | sed 's/^/    /' >> "$S"
    pack
  done
done
export TPLA_TOOL_TIMEOUT_MS=15000
ab() { # ab NAME ENV... -- ARGS...: one invocation, its table line to the summary
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  bounded 60 "$L/ab_$name.log" env "${envs[@]}" build-gpu/tpla "$@" -n 100 -w 20 -s 1234 \
    8192 4096 8192
  say "$name: exit $? $(grep -E '^ +gemm-' "$L/ab_$name.log" | tr -s ' ')"
}
RS8=(gemm-rs -g 2 -d e4m3 --accum=split)
ab rs8_main X=0 -- "${RS8[@]}"
ab rs8_direct TPLA_OVERLAP_DIRECT=1 -- "${RS8[@]}"
ab rs8_direct_c1 TPLA_OVERLAP_DIRECT=1 -- "${RS8[@]}" --chunks=1
ab rs8_direct_c1_tune TPLA_OVERLAP_DIRECT=1 TPLA_OVERLAP_TUNE=1 -- "${RS8[@]}" --chunks=1
ab rs16_main X=0 -- gemm-rs -g 2
ab rs16_direct_c1 TPLA_OVERLAP_DIRECT=1 -- gemm-rs -g 2 --chunks=1
ab ar16_main X=0 -- gemm-ar -g 2
ab ar16_direct TPLA_OVERLAP_DIRECT=1 -- gemm-ar -g 2
ab rs8_main_again X=0 -- "${RS8[@]}"
pack
TPLA_OVERLAP_DIRECT=1 bounded 150 "$L/overlap_direct.log" build-gpu/tests/test_gpu_overlap
say "test_gpu_overlap, DIRECT=1: exit $? ($(el)) $(tail -n 1 "$L/overlap_direct.log")"
pack
cat "$S"
