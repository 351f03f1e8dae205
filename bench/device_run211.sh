#!/usr/bin/env bash
# bench/device_run211.sh - one GPU (nvidia-h200), session 33: review 88's kernel fixes. Everything
# built; CTest (all; test_gpu_norm's two-stream sums and test_gpu_ops' fp32 axpby bit for bit
# are new); then an A/B: a copy of the tree with the two fixes undone (the partials unordered
# across streams, axpby's fmaf and the fold's contracted beta term back) builds and runs those two
# tests, which must fail there, or they show nothing.
# Run in the repository root (no carry): bash bench/device_run211.sh
set -u
. bench/device_lib.sh 211
export CUDA_VISIBLE_DEVICES=0
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" > "$L/build.log" 2>&1
say "build (all): exit $? ($(el)), warnings: $(grep -c 'warning:' "$L/build.log")"
(cd build-gpu && bounded 330 "$L/ctest.log" ctest --output-on-failure --no-tests=error)
say "ctest (1 GPU): exit $? ($(el)) $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
grep -E "Failed|\*\*\*Failed|Timeout|Not Run" "$L/ctest.log" | head -n 10 >> "$S"
pack
old=/tmp/run211-old
rm -rf $old && cp -r "$PWD" $old && rm -rf $old/build-gpu
python3 - $old > "$L/undo.log" 2>&1 << 'PY'
import sys
root = sys.argv[1]
def undo(path, pairs):
    s = open(root + "/" + path).read()
    for new, old in pairs:
        assert new in s, (path, new)
        s = s.replace(new, old)
    open(root + "/" + path, "w").write(s)
undo("src/cuda/cuda_ops.c", [("tpla_lt_ctx_enter(impl, (cudaStream_t)stream, fn)", "TPLA_SUCCESS"),
                             ("tpla_lt_ctx_leave(impl, (cudaStream_t)stream, fn)", "TPLA_SUCCESS")])
undo("src/cuda/ops_kernels.cu", [("__fadd_rn(__fmul_rn(alpha, xv[k]), __fmul_rn(beta, yv[k]))",
                                  "fmaf(alpha, xv[k], beta * yv[k])")])
undo("src/cuda/transport_kernels.cu", [("s[k] = __fadd_rn(s[k], __fmul_rn(a.beta, t[k]));",
                                        "s[k] += a.beta * t[k];")])
print("undone")
PY
say "undo the fixes in a copy: exit $? $(tail -n 1 "$L/undo.log")"
(cd $old && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/old_configure.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target test_gpu_norm test_gpu_ops > "$L/old_build.log" 2>&1)
say "build of the undone copy: exit $? ($(el))"
for t in test_gpu_norm test_gpu_ops; do
  bounded 120 "$L/old_$t.log" $old/build-gpu/tests/$t
  say "undone $t: exit $? (must fail) $(grep -E '^FAIL|passed, ' "$L/old_$t.log" | tr '\n' ' ')"
done
grep -E "read the other stream|the host 0x" "$L"/old_test_gpu_*.log | head -n 4 >> "$S"
pack
cat "$S"
