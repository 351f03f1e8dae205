#!/usr/bin/env bash
# tests/gpu/run.sh - the whole test suite on a GPU machine, from a fresh tree.
#
#   bash tests/gpu/run.sh [--memcheck] [--no-clean]
#
# 1. configures and builds (Release, -DTPLA_CUDA=ON) into build-gpu;
# 2. runs every CTest test (unit + gpu) with CUDA_VISIBLE_DEVICES=0, then
#    again with all the GPUs the machine gives us;
# 3. runs the MPI test under `mpirun -np 2` (if MPI was found);
# 4. with --memcheck, runs MEMCHECK_TESTS (the GEMM, ops and NS tests) under
#    compute-sanitizer memcheck.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends). Logs go to
# $OUT if set, else ./gpu-logs. Needs only cmake, a C compiler, the CUDA
# toolkit and NCCL (and mpirun for step 3); installs nothing. The last line
# is "N passed, N failed[, N skipped]", counting every test of every step.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$ROOT/build-gpu"
LOGS="${OUT:-$PWD/gpu-logs}"
MEMCHECK=0
MEMCHECK_TESTS=${MEMCHECK_TESTS:-"test_gpu_gemm test_gpu_ops test_gpu_norm test_gpu_alltoallv test_gpu_ns test_gpu_ns_batch test_gpu_ops_batch"}
CLEAN=1
for arg in "$@"; do
  case "$arg" in
    --memcheck) MEMCHECK=1 ;;
    --no-clean) CLEAN=0 ;;
    *) echo "usage: $0 [--memcheck] [--no-clean]" >&2; exit 2 ;;
  esac
done
mkdir -p "$LOGS"

export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# Keep whatever device list the machine imposes for the "all GPUs" runs.
ALL_GPUS_SET=${CUDA_VISIBLE_DEVICES+x}
ALL_GPUS=${CUDA_VISIBLE_DEVICES-}
JOBS=$(nproc 2>/dev/null || echo 4)

PASSED=0
FAILED=0
SKIPPED=0
FAILURES=()

note() { echo "== $*"; }
fail_step() { FAILED=$((FAILED + 1)); FAILURES+=("$1"); }
show_tail() { echo "---- last lines of $1 ----"; tail -n "${2:-40}" "$1"; echo "----"; }

with_all_gpus() {
  if [ -n "$ALL_GPUS_SET" ]; then
    CUDA_VISIBLE_DEVICES="$ALL_GPUS" "$@"
  else
    env -u CUDA_VISIBLE_DEVICES "$@"
  fi
}

finish() {
  echo
  note "logs in $LOGS"
  if [ ${#FAILURES[@]} -gt 0 ]; then
    note "failed:"
    printf '   %s\n' "${FAILURES[@]}"
  fi
  local line="$PASSED passed, $FAILED failed"
  [ "$SKIPPED" -gt 0 ] && line="$line, $SKIPPED skipped"
  echo "$line" | tee "$LOGS/summary.txt"
  [ "$FAILED" -eq 0 ]
  exit $?
}

# ---- machine ------------------------------------------------------------------
{
  nvidia-smi -L 2>&1 || echo "nvidia-smi not available"
  nvidia-smi topo -m 2>&1 || true
  command -v nvcc && nvcc --version | tail -n 2
  cmake --version | head -n 1
} > "$LOGS/machine.log" 2>&1
note "machine: $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s) listed; details in machine.log"

# ---- configure and build ----------------------------------------------------------
[ "$CLEAN" -eq 1 ] && rm -rf "$BUILD"
note "configure (Release, TPLA_CUDA=ON) into $BUILD"
if ! cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
    > "$LOGS/configure.log" 2>&1; then
  show_tail "$LOGS/configure.log"
  fail_step "configure"
  finish
fi
note "build (-j$JOBS)"
if ! cmake --build "$BUILD" -j "$JOBS" > "$LOGS/build.log" 2>&1; then
  show_tail "$LOGS/build.log" 60
  fail_step "build"
  finish
fi
WARNINGS=$(grep -c "warning:" "$LOGS/build.log" || true)
note "built ($WARNINGS compiler warnings; see build.log)"

# ---- CTest, one GPU then all --------------------------------------------------------
# Counts one CTest run's results from its log: "Passed" lines, "***Skipped"
# lines, and the total from "tests failed out of N".
count_ctest() {
  local log="$1" label="$2" total passed skipped failed
  # "95% tests passed, 1 tests failed out of 20", or with CTest 4 and no
  # failure "100% tests passed out of 20"; skipped tests count as not failed
  total=$(sed -n 's/.*% tests passed.* out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
  failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of .*/\1/p' "$log" | tail -n 1)
  [ -n "$total" ] && [ -z "$failed" ] && failed=0
  skipped=$(grep -cE '\*\*\*Skipped' "$log" || true)
  if [ -z "$total" ] || [ -z "$failed" ]; then
    show_tail "$log"
    fail_step "$label: ctest gave no summary"
    return
  fi
  passed=$((total - failed - skipped))
  PASSED=$((PASSED + passed))
  SKIPPED=$((SKIPPED + skipped))
  FAILED=$((FAILED + failed))
  while read -r name; do
    [ -n "$name" ] && FAILURES+=("$label: $name")
  done < <(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$log" | grep -vE 'Passed|Skipped' |
           sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+).*/\1/')
  note "$label: $passed passed, $failed failed, $skipped skipped (of $total)"
  [ "$failed" -gt 0 ] && show_tail "$log" 80
}

note "ctest, CUDA_VISIBLE_DEVICES=0"
(cd "$BUILD" && CUDA_VISIBLE_DEVICES=0 ctest --output-on-failure --no-tests=error) \
  > "$LOGS/ctest-1gpu.log" 2>&1
count_ctest "$LOGS/ctest-1gpu.log" "ctest 1 GPU"

note "ctest, all GPUs (${ALL_GPUS:-unrestricted})"
(cd "$BUILD" && with_all_gpus ctest --output-on-failure --no-tests=error) \
  > "$LOGS/ctest-all.log" 2>&1
count_ctest "$LOGS/ctest-all.log" "ctest all GPUs"

# ---- MPI -------------------------------------------------------------------------------
MPI_TEST="$BUILD/tests/gpu/mpi/test_gpu_mpi"
if ! command -v mpirun > /dev/null 2>&1; then
  note "mpi: no mpirun on this machine: skipped"
  SKIPPED=$((SKIPPED + 1))
elif [ ! -x "$MPI_TEST" ]; then
  note "mpi: test_gpu_mpi was not built (CMake found no MPI; see configure.log): skipped"
  SKIPPED=$((SKIPPED + 1))
else
  note "mpi: mpirun -np 2 test_gpu_mpi"
  XS=(-x NCCL_NVLS_ENABLE -x NVSHMEM_DISABLE_NVLS -x TORCH_SYMM_MEM_DISABLE_MULTICAST)
  [ -n "$ALL_GPUS_SET" ] && XS+=(-x CUDA_VISIBLE_DEVICES)
  with_all_gpus timeout 600 mpirun -np 2 --allow-run-as-root --oversubscribe "${XS[@]}" \
    "$MPI_TEST" > "$LOGS/mpi.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    PASSED=$((PASSED + 1)); note "mpi: passed"
  elif [ $rc -eq 77 ] || grep -q "^skip test_gpu_mpi" "$LOGS/mpi.log"; then
    SKIPPED=$((SKIPPED + 1)); note "mpi: skipped ($(grep -m1 '^skip' "$LOGS/mpi.log"))"
  else
    show_tail "$LOGS/mpi.log" 60
    fail_step "mpi: test_gpu_mpi under mpirun -np 2 (exit $rc)"
  fi
fi

# ---- compute-sanitizer ------------------------------------------------------------------
if [ "$MEMCHECK" -eq 1 ]; then
  SAN=$(command -v compute-sanitizer)
  for c in /usr/local/cuda/bin/compute-sanitizer \
           /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -z "$SAN" ] && [ -x "$c" ] && SAN=$c
  done
  if [ -z "$SAN" ]; then
    note "memcheck: compute-sanitizer not found: skipped"
    SKIPPED=$((SKIPPED + 1))
  else
    # API errors are not reported: tests provoke some on purpose (an
    # out-of-memory context) and NCCL probes kernels; memory errors are.
    for t in $MEMCHECK_TESTS; do
      [ -x "$BUILD/tests/$t" ] || continue
      note "memcheck: compute-sanitizer --tool memcheck $t (slow)"
      CUDA_VISIBLE_DEVICES=0 TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 timeout 1800 \
        "$SAN" --tool memcheck --report-api-errors no --error-exitcode 99 "$BUILD/tests/$t" \
        > "$LOGS/memcheck-$t.log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        PASSED=$((PASSED + 1)); note "memcheck $t: clean"
      elif [ $rc -eq 77 ]; then
        SKIPPED=$((SKIPPED + 1)); note "memcheck $t: skipped (no GPU)"
      else
        show_tail "$LOGS/memcheck-$t.log" 60
        fail_step "memcheck: $t (exit $rc)"
      fi
    done
  fi
fi

finish
