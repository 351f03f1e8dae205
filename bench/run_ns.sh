#!/usr/bin/env bash
# bench/run_ns.sh - issue #3's Newton-Schulz benchmark on a GPU machine (2x H200): `tpla ns`
# and the PyTorch anchors (bench/ns_torch.py) in the same run, then bench/ns_compare.py's
# table with a PASS/MISS per target. About 3-5 minutes on 2 H200s.
#
#   bash bench/run_ns.sh                       logs and JSON lines in ${OUT:-bench/out}
#   BUILD=build-gpu SEED=1234 NS_CHECK_TIMEOUT=150 bash bench/run_ns.sh
#
# Steps (each under `timeout`; a failed step is reported and the others still run):
#   build   cmake --build $BUILD --target tpla_tool ($BUILD = build-gpu, the directory
#           tests/gpu/run.sh builds; configured here, Release + CUDA, if it is missing)
#   1 GPU   (the first visible GPU) tpla ns on the 1-GPU shapes of DESIGN.md and on the
#           2-GPU shapes 16384x4096 and 14336x4096 (the 1-GPU baseline of the speed-up),
#           fp32 and bf16 Gram, orth_max from an fp32 GEMM (--svd-max=0: no host SVD);
#           then the PyTorch Muon NS5 anchor (its SVD errors up to 14336)
#   2 GPUs  tpla ns -g 2 and torchrun --nproc_per_node=2 bench/ns_torch.py (Gram all-reduce
#           and gather variants) on the 2-GPU shapes; the same at every P of NS_TP (default
#           "2 4 8") that the machine has GPUs for (issue #7: TP = 4 and 8)
#   check   tpla ns -c 1 on 4096x4096 with the float64 host SVD (polar_rel), last and under
#           NS_CHECK_TIMEOUT seconds: its speed depends on the machine's LAPACK
#   compare python3 bench/ns_compare.py --out $OUT (also in $OUT/compare.txt)
# Big shapes (16384x16384) run -n 10 -w 3, the others -n 20 -w 5 (PyTorch: -w 3).
# For a quick subset: SHAPES_1GPU, SHAPES_BIG, SHAPES_2GPU, CHECK_SHAPE (space-separated
# MxN; empty skips), TPLA_NS_FLAGS (added to every tpla ns, e.g. "--algo=gather").
# NVLink multicast stays off. Exit status: 0 when every step ran (the PASS/MISS verdicts
# are results, not failures), 1 otherwise.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/bench/out}"
BUILD="${BUILD:-$ROOT/build-gpu}"
SEED="${SEED:-1234}"
PY="${PYTHON:-python3}"
CHECK_TIMEOUT="${NS_CHECK_TIMEOUT:-150}"
TPLA="$BUILD/tpla"
# the 1-GPU steps use the first GPU the machine gives us
FIRST_GPU=0
[ -n "${CUDA_VISIBLE_DEVICES-}" ] && FIRST_GPU="${CUDA_VISIBLE_DEVICES%%,*}"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

SHAPES_1GPU="${SHAPES_1GPU-4096x4096 4096x14336 8192x8192}"
SHAPES_BIG="${SHAPES_BIG-16384x16384}" # fewer iterations
SHAPES_2GPU="${SHAPES_2GPU-8192x8192 16384x4096 4096x14336 14336x4096}"
NS_TP="${NS_TP-2 4 8}" # GPU counts for the multi-GPU steps (those the machine has)
CHECK_SHAPE="${CHECK_SHAPE-4096x4096}"
read -r -a FLAGS <<< "${TPLA_NS_FLAGS:-}"
BASELINE="" # 2-GPU shapes that also run on 1 GPU, for the speed-up
for s in $SHAPES_2GPU; do
  case " $SHAPES_1GPU $SHAPES_BIG " in *" $s "*) ;; *) BASELINE="$BASELINE $s" ;; esac
done
FAILED=()

mkdir -p "$OUT"
rm -f "$OUT"/tpla_*.jsonl "$OUT"/torch_*.jsonl "$OUT"/tpla_*.log "$OUT"/torch_*.log # appended to

# step NAME LOG TIMEOUT command...: runs it with its output shown and kept in $OUT/LOG.
step() {
  local name=$1 log=$2 limit=$3 t0=$SECONDS rc
  shift 3
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | tee -a "$OUT/$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && echo "   timed out after $limit s"
  echo "   ($((SECONDS - t0)) s, exit $rc)"
  [ "$rc" -eq 0 ] || FAILED+=("$name: exit $rc (see $OUT/$log)")
  return 0
}

# ---- build ---------------------------------------------------------------------------------
echo "== build ($BUILD)"
if [ ! -f "$BUILD/CMakeCache.txt" ] &&
   ! cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
     > "$OUT/ns_build.log" 2>&1; then
  tail -n 30 "$OUT/ns_build.log"
  echo "configure failed (see $OUT/ns_build.log)"
  exit 1
fi
if ! cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 8)" --target tpla_tool \
     >> "$OUT/ns_build.log" 2>&1; then
  tail -n 30 "$OUT/ns_build.log"
  echo "build failed (see $OUT/ns_build.log)"
  exit 1
fi
{
  nvidia-smi -L 2>&1 || true
  nvidia-smi topo -m 2>&1 || true
  "$TPLA" info 2>&1
} > "$OUT/ns_info.log"
GPUS=${NS_GPUS:-$("$TPLA" info 2>/dev/null | awk '$1 == "gpu"' | wc -l)}
echo "   $GPUS GPU(s); tpla info in $OUT/ns_info.log"

HAVE_TORCH=0
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
then
  HAVE_TORCH=1
else
  echo "   PyTorch with CUDA not found ($PY): the anchors are skipped"
  FAILED+=("PyTorch anchors: torch with CUDA not importable by $PY")
fi

# ---- 1 GPU ---------------------------------------------------------------------------------
T1=(env CUDA_VISIBLE_DEVICES="$FIRST_GPU" "$TPLA" ns -g 1 -s "$SEED" --gram=both --svd-max=0
    --json="$OUT/tpla_1gpu.jsonl" "${FLAGS[@]}")
P1=(env CUDA_VISIBLE_DEVICES="$FIRST_GPU" "$PY" "$ROOT/bench/ns_torch.py"
    --json "$OUT/torch_1gpu.jsonl")
commas() { # "a b" -> "a,b"
  local words
  read -r -a words <<< "$1"
  local IFS=,
  echo "${words[*]}"
}
# shellcheck disable=SC2086
if [ -n "${SHAPES_1GPU// }${BASELINE// }" ]; then
  step "tpla ns, 1 GPU" tpla_1gpu.log 300 "${T1[@]}" -n 20 -w 5 $SHAPES_1GPU $BASELINE
fi
# shellcheck disable=SC2086
if [ -n "${SHAPES_BIG// }" ]; then
  step "tpla ns, 1 GPU, $SHAPES_BIG" tpla_1gpu.log 240 "${T1[@]}" -n 10 -w 3 $SHAPES_BIG
fi
if [ "$HAVE_TORCH" -eq 1 ] && [ -n "${SHAPES_1GPU// }" ]; then
  step "PyTorch, 1 GPU" torch_1gpu.log 300 "${P1[@]}" --shapes "$(commas "$SHAPES_1GPU")" \
    --iters 20 --warmup 3 --error-max-dim 14336
fi
if [ "$HAVE_TORCH" -eq 1 ] && [ -n "${SHAPES_BIG// }" ]; then
  step "PyTorch, 1 GPU, $SHAPES_BIG" torch_1gpu.log 240 "${P1[@]}" \
    --shapes "$(commas "$SHAPES_BIG")" --iters 10 --warmup 3 --error-max-dim 0
fi

# ---- 2 GPUs (and 4, 8 where the machine has them) ------------------------------------------
for P in $NS_TP; do
  if [ -z "${SHAPES_2GPU// }" ]; then
    echo "== $P GPUs: no shapes"
  elif [ "$GPUS" -ge "$P" ]; then
    # shellcheck disable=SC2086
    step "tpla ns, $P GPUs" "tpla_${P}gpu.log" 300 "$TPLA" ns -g "$P" -s "$SEED" -n 20 -w 5 \
      --gram=both --svd-max=0 --json="$OUT/tpla_${P}gpu.jsonl" "${FLAGS[@]}" $SHAPES_2GPU
    if [ "$HAVE_TORCH" -eq 1 ]; then
      step "PyTorch, $P GPUs" "torch_${P}gpu.log" 300 "$PY" -m torch.distributed.run \
        --standalone --nproc_per_node="$P" "$ROOT/bench/ns_torch.py" \
        --shapes "$(commas "$SHAPES_2GPU")" --iters 20 --warmup 3 \
        --error-max-dim "${TORCH_ERROR_MAX_2GPU:-0}" --json "$OUT/torch_${P}gpu.jsonl"
    fi
  elif [ "$P" -eq 2 ]; then
    echo "== 2 GPUs: skipped ($GPUS GPU visible)"
    FAILED+=("2-GPU steps: only $GPUS GPU visible")
  else
    echo "== $P GPUs: skipped ($GPUS GPU visible)"
  fi
done

# ---- float64 check -----------------------------------------------------------------------------
# shellcheck disable=SC2086
if [ -n "${CHECK_SHAPE// }" ]; then
  step "tpla ns, float64 check of $CHECK_SHAPE (limit ${CHECK_TIMEOUT} s)" tpla_check.log \
    "$CHECK_TIMEOUT" env CUDA_VISIBLE_DEVICES="$FIRST_GPU" "$TPLA" ns -g 1 -s "$SEED" -n 1 \
    -w 0 -c 1 --svd-max=16384 --json="$OUT/tpla_check.jsonl" "${FLAGS[@]}" $CHECK_SHAPE
fi

# ---- compare -------------------------------------------------------------------------------------
echo "== compare"
"$PY" "$ROOT/bench/ns_compare.py" --out "$OUT" | tee "$OUT/compare.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || FAILED+=("ns_compare.py")
"$PY" "$ROOT/bench/ns_compare.py" --out "$OUT" --markdown > "$OUT/compare.md" 2>&1 || true

echo
echo "== logs, JSON lines and compare.txt / compare.md in $OUT"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "== steps that did not complete:"
  printf '   %s\n' "${FAILED[@]}"
  exit 1
fi
echo "== all steps ran"
