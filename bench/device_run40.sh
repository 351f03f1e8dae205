#!/usr/bin/env bash
# bench/device_run40.sh - after run 39 (Gram sums by copy-engine pulls at P = 2:
# 16384x4096 3.85-4.02 ms against 4.05-4.29 with NCCL, 8192^2 10.82 against
# 11.42-11.77; but test_gpu_ns hung on 2 GPUs): plan creation now rehearses one
# execute when the Gram is pulled (ns_pull_rehearse), so no call loads a kernel
# while a peer waits (the suspected hang). This run:
# 1. test_gpu_ns on 2 GPUs alone, under 100 s; if it fails, everything after runs
#    with TPLA_NS_GRAM_SUM=nccl (NCCL sums), and the summary says so;
# 2. the whole GPU suite (tests/gpu/run.sh: 1 GPU, both GPUs, MPI);
# 3. issue #3's benchmark as a user runs it (bench/run_ns.sh: AUTO, 1 and 2 GPUs,
#    PyTorch's anchors in the same run; no float64 check, CHECK_SHAPE="").
# About 8 minutes.
set -u
. bench/device_lib.sh 40
gpu_build tpla_tool test_gpu_ns
CUDA_VISIBLE_DEVICES=0,1 bounded 100 "$L/test_gpu_ns_2.log" build-gpu/tests/test_gpu_ns
rc=$?
say "test_gpu_ns, 2 GPUs (pulls): exit $rc ($(el)) $(tail -n 1 "$L/test_gpu_ns_2.log")"
grep -E "^# (2 ranks|AUTO)" "$L/test_gpu_ns_2.log" | head -30 >> "$S"
if [ $rc != 0 ]; then
  export TPLA_NS_GRAM_SUM=nccl
  say "FALLBACK: TPLA_NS_GRAM_SUM=nccl for the rest of this run"
fi
pack
OUT=$L/gpu-tests timeout 330 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG" "$L/gpu_tests.log" | head -10 >> "$S"
pack
OUT=$L/ns BUILD=$PWD/build-gpu CHECK_SHAPE="" timeout 280 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns.sh: exit $? ($(el))"
cat "$L/ns/compare.txt" >> "$S" 2>/dev/null
pack
cat "$S"
