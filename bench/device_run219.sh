#!/usr/bin/env bash
# bench/device_run219.sh - one GPU (nvidia-h200), session 34: the session's last library.
#  1. every CTest test with CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1;
#  2. the Python checks on one rank;
#  3. A/B: test_gpu_overlap_graph_bt against a copy whose FP8 B^T cache ignores graphs (the
#     stage_b of before review 93's fix), which should fail it.
# Run in the repository root (no carry): bash bench/device_run219.sh
set -u
. bench/device_lib.sh 219
export CUDA_VISIBLE_DEVICES=0 TPLA_TEST_REQUIRE_GPUS=1
gpu_build all
(cd build-gpu && bounded 330 "$L/ctest.log" ctest --output-on-failure --no-tests=error)
say "ctest: exit $? ($(el)) $(grep -E 'tests passed' "$L/ctest.log")"
grep -E "Failed|\*\*\*" "$L/ctest.log" >> "$S"
TPLA_LIBRARY=$PWD/build-gpu/libtpla.so bounded 120 "$L/python_1gpu.log" \
  torchrun --standalone --nproc_per_node=1 tests/python/gpu/run_checks.py
say "python checks, 1 rank: exit $? ($(el)) $(tail -n 1 "$L/python_1gpu.log")"
pack
ab=/tmp/run219-ab
rm -rf $ab && cp -r "$PWD" $ab && rm -rf $ab/build-gpu
python3 - "$ab/src/core/overlap_exec.c" > "$L/ab_patch.log" 2>&1 <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
n = s.count("bool captured = p->ops->capturing != NULL && p->ops->capturing(c->stream);")
s = s.replace("bool captured = p->ops->capturing != NULL && p->ops->capturing(c->stream);",
              "bool captured = false;")
s = s.replace("bool held = !captured && !ovl_group_in_graph(p) && c->b_version != 0 &&",
              "bool held = c->b_version != 0 &&")
open(p, "w").write(s)
print("patched", n)
PY
(cd $ab && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/ab_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target test_gpu_overlap_graph_bt > "$L/ab_build.log" 2>&1)
say "build with the old B^T cache: exit $? ($(el)) $(cat "$L/ab_patch.log")"
bounded 120 "$L/ab_graph_bt.log" $ab/build-gpu/tests/test_gpu_overlap_graph_bt
say "test_gpu_overlap_graph_bt with the old cache: exit $? (should fail) $(tail -n 1 "$L/ab_graph_bt.log")"
grep -E "want|FAIL" "$L/ab_graph_bt.log" | head -n 6 >> "$S"
pack
cat "$S"
