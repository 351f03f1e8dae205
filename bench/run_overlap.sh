#!/usr/bin/env bash
# bench/run_overlap.sh - issue #4's overlap benchmark on a GPU machine (2x H200): `tpla ag-gemm`,
# `tpla gemm-rs`, `tpla gemm-ar` on DESIGN.md's shapes and the PyTorch anchors
# (bench/overlap_torch.py: matmul, NCCL collective, serial, symmetric-memory fused ops) in
# the same run, then bench/overlap_compare.py's combined table with the targets. A few minutes.
#
#   bash bench/run_overlap.sh                  logs under ${OUT:-bench/out}
#   BUILD=build-gpu ITERS=50 bash bench/run_overlap.sh
#   TPLA_OVERLAP_CHUNKS=4 TPLA_OVERLAP_TRANSPORT=sendrecv bash bench/run_overlap.sh
#   DTYPE=e4m3 ACCUM=fast bash bench/run_overlap.sh   FP8 (tpla -d e4m3 --accum=..., PyTorch
#                                                       torch._scaled_mm; bf16 outputs)
#   STEP_TIMEOUT=90 bash bench/run_overlap.sh    each tpla/PyTorch step at most 90 s (default 900)
#   TP=4 OUT=bench/out/tp4 bash bench/run_overlap.sh  4 GPUs (issue #7), DESIGN.md's shapes
#                                                       read as at TP = 2 by both tools (AG: M
#                                                       global; RS/AR: M, K per rank, N)
#
# Each step runs under `timeout`; a failed step is reported and the others still run.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1).
# Exit status: 0 when every step ran (target misses are results, not failures), 1 otherwise.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/bench/out}"
BUILD="${BUILD:-$ROOT/build-gpu}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-5}"
SEED="${SEED:-1234}"
DTYPE="${DTYPE:-bf16}"
ACCUM="${ACCUM:-split}"
TP="${TP:-2}"
STEP_TIMEOUT="${STEP_TIMEOUT:-900}"
FP8_TPLA=()
FP8_TORCH=()
if [ "$DTYPE" != bf16 ]; then
  FP8_TPLA=(--accum="$ACCUM")
  FP8_TORCH=(--fp8 --accum "$ACCUM")
fi
PY="${PYTHON:-python3}"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
FAILED=()
mkdir -p "$OUT"
rm -f "$OUT"/torch_overlap.jsonl

step() { # step NAME LOG TIMEOUT command...
  local name=$1 log=$2 limit=$3 t0=$SECONDS rc
  shift 3
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "   timed out after $limit s"
  echo "   ($((SECONDS - t0)) s, exit $rc)"
  [ "$rc" -eq 0 ] || FAILED+=("$name: exit $rc (see $OUT/$log)")
}

if [ ! -x "$BUILD/tpla" ]; then
  step "configure $BUILD" build.log 600 cmake -S "$ROOT" -B "$BUILD" -DTPLA_CUDA=ON \
    -DCMAKE_BUILD_TYPE=Release
fi
step "build" build.log 900 cmake --build "$BUILD" -j --target tpla_tool
for op in ag-gemm gemm-rs gemm-ar; do
  step "tpla $op -g $TP" "tpla_$op.log" "$STEP_TIMEOUT" "$BUILD/tpla" "$op" -g "$TP" -d "$DTYPE" \
    -n "$ITERS" -w "$WARMUP" -s "$SEED" "${FP8_TPLA[@]}"
done
step "PyTorch anchors (torchrun, $TP GPUs)" torch_overlap.log "$STEP_TIMEOUT" \
  torchrun --nproc_per_node="$TP" "$ROOT/bench/overlap_torch.py" --iters "$ITERS" \
  --warmup "$WARMUP" --json "$OUT/torch_overlap.jsonl" "${FP8_TORCH[@]}"
step "compare" compare.txt 60 "$PY" "$ROOT/bench/overlap_compare.py" \
  --tpla "$OUT/tpla_ag-gemm.log" "$OUT/tpla_gemm-rs.log" "$OUT/tpla_gemm-ar.log" \
  --torch "$OUT/torch_overlap.jsonl"

if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'FAILED step: %s\n' "${FAILED[@]}"
  exit 1
fi
echo "all steps ran; table in $OUT/compare.txt"
