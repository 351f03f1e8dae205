#!/usr/bin/env bash
# tests/gpu/run.sh - the whole test suite on a GPU machine, from a fresh tree.
#
#   bash tests/gpu/run.sh [--memcheck | --sanitizers-only] [--no-clean]
#
# 1. configures and builds (Release, -DTPLA_CUDA=ON) into build-gpu;
# 2. runs every CTest test (unit + gpu) with CUDA_VISIBLE_DEVICES=0, then
#    again with all the GPUs the machine gives us;
# 3. runs the MPI test under `mpirun -np 2` (if MPI was found);
# 4. with --memcheck, runs MEMCHECK_TESTS (GEMM, ops, NS, FP8 and the overlap
#    tests, TPLA_TEST_QUICK=1) under compute-sanitizer memcheck, and
#    RACECHECK_TESTS (the kernels with shared memory) under racecheck, on one
#    GPU; a test of the lists that was not built fails the step.
#    --sanitizers-only builds and runs step 4 alone (steps 2-4 together
#    take more than 10 minutes on one H200).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends). Logs go to
# $OUT if set, else ./gpu-logs. Needs only cmake, a C compiler, the CUDA
# toolkit and NCCL (and mpirun for step 3); installs nothing. The last line
# is "N passed, N failed[, N skipped]", counting every test of every step.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$ROOT/build-gpu"
LOGS="${OUT:-$PWD/gpu-logs}"
MEMCHECK=0
CTEST=1
MEMCHECK_TESTS=${MEMCHECK_TESTS:-"test_gpu_gemm test_gpu_ops test_gpu_norm test_gpu_alltoallv
  test_gpu_ns test_gpu_ns_batch test_gpu_ops_batch test_gpu_fp8 test_gpu_fp8_edges test_gpu_overlap
  test_gpu_overlap_groups test_gpu_overlap_mlp test_gpu_overlap_graph_bt"}
RACECHECK_TESTS=${RACECHECK_TESTS:-"test_gpu_norm test_gpu_ops_batch test_gpu_fp8_kernels"}
CLEAN=1
for arg in "$@"; do
  case "$arg" in
    --memcheck) MEMCHECK=1 ;;
    --sanitizers-only) MEMCHECK=1 CTEST=0 ;;
    --no-clean) CLEAN=0 ;;
    *) echo "usage: $0 [--memcheck | --sanitizers-only] [--no-clean]" >&2; exit 2 ;;
  esac
done
mkdir -p "$LOGS"

export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# Keep whatever device list the machine imposes for the "all GPUs" runs.
ALL_GPUS_SET=${CUDA_VISIBLE_DEVICES+x}
ALL_GPUS=${CUDA_VISIBLE_DEVICES-}
# The one-GPU steps: the first GPU the machine gives us, not physical GPU 0.
FIRST_GPU=0
[ -n "$ALL_GPUS" ] && FIRST_GPU=${ALL_GPUS%%,*}
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
LISTED=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
# The GPUs the "all GPUs" steps may use: those listed, or CUDA_VISIBLE_DEVICES's if it names
# fewer. A test that needs no more than that and finds fewer fails instead of skipping
# (TPLA_TEST_REQUIRE_GPUS, tests/gpu/gpu_util.h): a machine that hides a GPU must not pass
# with the 2-GPU cases skipped.
USABLE=$LISTED
if [ -n "$ALL_GPUS_SET" ]; then
  named=$(echo "$ALL_GPUS" | tr ',' '\n' | grep -c . || true)
  [ "$named" -lt "$USABLE" ] && USABLE=$named
fi
ONE=$(( LISTED > 0 ? 1 : 0 ))
note "machine: $LISTED GPU(s) listed, $USABLE usable by the all-GPUs steps; details in machine.log"

# ---- configure and build ----------------------------------------------------------
[ "$CLEAN" -eq 1 ] && rm -rf "$BUILD"
note "configure (Release, TPLA_CUDA=ON) into $BUILD"
if ! cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
    > "$LOGS/configure.log" 2>&1; then
  show_tail "$LOGS/configure.log"
  fail_step "configure"
  finish
fi
if grep -q "no LAPACK found" "$LOGS/configure.log"; then
  fail_step "configure: no LAPACK, so the GPU tests' SVD checks would be left out"
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

if [ "$CTEST" -eq 1 ]; then
  note "ctest, CUDA_VISIBLE_DEVICES=$FIRST_GPU"
  (cd "$BUILD" && CUDA_VISIBLE_DEVICES=$FIRST_GPU TPLA_TEST_REQUIRE_GPUS=$ONE \
    ctest --output-on-failure --no-tests=error) > "$LOGS/ctest-1gpu.log" 2>&1
  count_ctest "$LOGS/ctest-1gpu.log" "ctest 1 GPU"

  note "ctest, all GPUs (${ALL_GPUS:-unrestricted})"
  (cd "$BUILD" && TPLA_TEST_REQUIRE_GPUS=$USABLE with_all_gpus ctest --output-on-failure \
    --no-tests=error) \
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
      if [ "$USABLE" -ge 2 ]; then
        show_tail "$LOGS/mpi.log" 20
        fail_step "mpi: test_gpu_mpi skipped with $USABLE GPUs usable"
      else
        SKIPPED=$((SKIPPED + 1)); note "mpi: skipped ($(grep -m1 '^skip' "$LOGS/mpi.log"))"
      fi
    else
      show_tail "$LOGS/mpi.log" 60
      fail_step "mpi: test_gpu_mpi under mpirun -np 2 (exit $rc)"
    fi
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
    for tool in memcheck racecheck; do
      list=$MEMCHECK_TESTS
      [ "$tool" = racecheck ] && list=$RACECHECK_TESTS
      for t in $list; do
        if [ ! -x "$BUILD/tests/$t" ]; then
          fail_step "$tool: $t was not built"
          continue
        fi
        note "$tool: compute-sanitizer --tool $tool $t (slow)"
        CUDA_VISIBLE_DEVICES=$FIRST_GPU TPLA_TEST_NO_WATCHDOG=1 TPLA_TEST_SANITIZER=1 \
          TPLA_TEST_QUICK=1 TPLA_TEST_REQUIRE_GPUS=$ONE timeout 1800 "$SAN" --tool "$tool" \
          --report-api-errors no --error-exitcode 99 "$BUILD/tests/$t" \
          > "$LOGS/$tool-$t.log" 2>&1
        rc=$?
        if [ $rc -eq 0 ]; then
          PASSED=$((PASSED + 1)); note "$tool $t: clean"
        elif [ $rc -eq 77 ]; then
          SKIPPED=$((SKIPPED + 1)); note "$tool $t: skipped (no GPU)"
        else
          show_tail "$LOGS/$tool-$t.log" 60
          fail_step "$tool: $t (exit $rc)"
        fi
      done
    done
  fi
fi

finish
