#!/usr/bin/env bash
# bench/device_run3.sh - GPU session 3: triage of the 2-GPU overlap hang seen
# in session 2 (each operation x transport alone, under a short timeout,
# then the overlap GPU test with its progress visible), then the Newton-
# Schulz benchmark (bench/run_ns.sh) with the PyTorch anchors.
#   bash bench/device_run3.sh        (on the device machine; logs under $OUT)
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT/logs"
L=$OUT/logs
start=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1 &&
  timeout 400 cmake --build build-gpu -j 32 > "$L/build.log" 2>&1 || { tail -30 "$L/build.log"; exit 1; }
echo "built ($(( $(date +%s) - start )) s)"
{
for op in ag-gemm gemm-rs gemm-ar; do
  for tr in peer sendrecv; do
    timeout 25 build-gpu/tpla $op -g 2 -n 3 -w 1 -c 1 --transport=$tr 4096 1024 1024 \
      > "$L/triage_${op}_$tr.log" 2>&1
    echo "triage $op $tr: exit $? | $(grep -v '^#' "$L/triage_${op}_$tr.log" | tail -n 1)"
  done
done
TPLA_TEST_NO_WATCHDOG=1 timeout 60 build-gpu/tests/test_gpu_overlap > "$L/test_gpu_overlap.log" 2>&1
echo "test_gpu_overlap (2 GPUs): exit $?"; tail -n 6 "$L/test_gpu_overlap.log"
CUDA_VISIBLE_DEVICES=0 timeout 60 build-gpu/tests/test_gpu_ops > "$L/test_gpu_ops_1gpu.log" 2>&1
echo "test_gpu_ops (1 GPU): exit $? $(tail -n 1 "$L/test_gpu_ops_1gpu.log")"
} 2>&1 | tee "$OUT/triage.txt"
echo "triage done ($(( $(date +%s) - start )) s)"
CHECK_SHAPE=1024x1024 OUT=$OUT/ns timeout 420 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
echo "run_ns exit $? ($(( $(date +%s) - start )) s)"
cp "$OUT/ns/compare.txt" "$OUT/ns_compare.txt" 2>/dev/null
tar czf "$OUT/all_logs.tgz" -C "$OUT" logs ns 2>/dev/null
cat "$OUT/triage.txt" | head -0
cat "$OUT/ns_compare.txt" 2>/dev/null || tail -n 40 "$L/run_ns.log"
