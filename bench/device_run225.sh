#!/usr/bin/env bash
# bench/device_run225.sh - one GPU (nvidia-h200), session 36, the first GPU run of commit a7988c5
# (a failed CUDA IPC export no longer fails plan creation; the watchdog's slot reserved early)
# and of 2c62d92's A/B:
#  1. test_gpu_ipc_export (wraps cudaIpcGetMemHandle), also under compute-sanitizer memcheck;
#  2. every GPU CTest test (-L gpu) with CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1;
#  3. A/B: test_gpu_ipc_export against the transport before a7988c5 (snap/old_ipc_export.diff,
#     `git diff a7988c5 a7988c5^ -- src`): plan creation should fail there;
#     test_gpu_overlap_graph_bt against the window group before 2c62d92
#     (snap/old_group_graph.diff): the larger member is not refused there.
# Run in the repository root with carry ["snap"]: bash bench/device_run225.sh
set -u
. bench/device_lib.sh 225
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
bounded 120 "$L/ipc_export.log" build-gpu/tests/test_gpu_ipc_export
say "test_gpu_ipc_export: exit $? ($(el)) $(tail -n 1 "$L/ipc_export.log")"
grep -E "FAIL|AUTO|PEER" "$L/ipc_export.log" | head -n 6 >> "$S"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
bounded 200 "$L/ipc_export_memcheck.log" "$SAN" --tool memcheck --error-exitcode 9 \
  build-gpu/tests/test_gpu_ipc_export
say "test_gpu_ipc_export under memcheck: exit $? ($(el)) $(grep -E 'ERROR SUMMARY' "$L/ipc_export_memcheck.log")"
pack
ab_build() { # ab_build NAME DIFF TARGET: the tree with DIFF applied, TARGET built, in /tmp/run225-NAME
  local dir=/tmp/run225-$1
  rm -rf "$dir" && cp -r "$PWD" "$dir" && rm -rf "$dir/build-gpu"
  (cd "$dir" && patch -p1 < "$2" > "$L/ab_$1_patch.log" 2>&1 &&
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/ab_$1_configure.log" 2>&1 &&
    cmake --build build-gpu -j 8 --target "$3" > "$L/ab_$1_build.log" 2>&1)
  echo "build $1: exit $?" >> "$L/ab_builds.log"
}
(ab_build ipc snap/old_ipc_export.diff test_gpu_ipc_export; ab_build group snap/old_group_graph.diff test_gpu_overlap_graph_bt) &
ab=$!
(cd build-gpu && bounded 300 "$L/ctest_gpu.log" ctest -L gpu --output-on-failure --no-tests=error)
say "ctest -L gpu: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest_gpu.log")"
grep -E "Failed|\*\*\*" "$L/ctest_gpu.log" >> "$S"
pack
wait $ab
say "A/B builds ($(el)): $(tr '\n' ' ' < "$L/ab_builds.log")"
bounded 120 "$L/ab_ipc.log" /tmp/run225-ipc/build-gpu/tests/test_gpu_ipc_export
say "test_gpu_ipc_export on the old transport: exit $? (should fail) $(tail -n 1 "$L/ab_ipc.log")"
grep -E "AUTO|PEER|FAIL" "$L/ab_ipc.log" | head -n 4 >> "$S"
bounded 120 "$L/ab_group.log" /tmp/run225-group/build-gpu/tests/test_gpu_overlap_graph_bt
say "test_gpu_overlap_graph_bt on the old window group: exit $? (should fail) $(tail -n 1 "$L/ab_group.log")"
grep -E "FAIL|want" "$L/ab_group.log" | head -n 4 >> "$S"
pack
cat "$S"
