#!/usr/bin/env bash
# bench/device_run38.sh - after run 37's Newton-Schulz timelines (2026-11-30):
# the 4096^2 bf16 mirror took 28 us (a quarter of HBM bandwidth; 14 of them per
# 16384x4096 call) and the distributed Gram's block-row all-reduces ran 2-5x
# slower beside the GEMMs than alone. This run checks the chunked mirror kernel
# (ops_kernels.cu) and measures a serial Gram all-reduce (patched, env switch):
# 1. the whole GPU suite (tests/gpu/run.sh, 1 GPU and both; test_gpu_ops has new
#    mirror cases) while the patched tool (run 37's timeline + run 38's switch)
#    builds in the background;
# 2. compute-sanitizer memcheck and racecheck of `tpla ns` on small shapes (the
#    mirror's chunk kernel for bf16 and fp32, whole and partial tiles);
# 3. timelines: 16384x4096 and 8192^2 on 1 GPU and on 2 GPUs, the 2-GPU ones with
#    the per-block-row overlapped all-reduce and with RUN38_GRAM_AR_SERIAL=1;
# 4. 2 GPUs, 16384x4096 14336x4096 8192x8192 bf16 Gram, AUTO, overlapped vs serial
#    all-reduce, alternated twice. About 5 minutes.
set -u
. bench/device_lib.sh 38
(patched_build /tmp/s38x "$PWD/bench/run38_gram_ar_patch.py") &
OUT=$L/gpu-tests timeout 320 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "mirror|FAIL" "$L/gpu_tests.log" | head -20 >> "$S"
wait
pack
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  shapes="1024x512 96x1000 200x136"
  [ $tool = racecheck ] && shapes="256x128 96x1000 200x136"
  CUDA_VISIBLE_DEVICES=0 bounded 120 "$L/$tool.log" "$SAN" --tool $tool --error-exitcode 99 \
    build-gpu/tpla ns -g 1 -n 1 -w 0 -c 0 --gram=both $shapes
  say "$tool ns (mirror kernels): exit $? ($(el)) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/$tool.log")"
done
cd /tmp/s38x || exit 1
run() { # name gpus serial args...
  local name=$1 g=$2 serial=$3; shift 3
  (
    [ "$serial" = 1 ] && export RUN38_GRAM_AR_SERIAL=1
    CUDA_VISIBLE_DEVICES=$([ "$g" = 1 ] && echo 0 || echo 0,1) TPLA_TRACE_NS=8 \
      bounded 90 "$L/$name.log" build-exp/tpla ns -g "$g" -s 1234 -n 20 -w 5 --gram=input \
      --svd-max=0 "$@"
  )
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
run tall_1gpu 1 0 16384x4096
run square_1gpu 1 0 8192x8192
run tall_2gpu_overlap 2 0 16384x4096
run tall_2gpu_serial 2 1 16384x4096
run square_2gpu_overlap 2 0 8192x8192
run square_2gpu_serial 2 1 8192x8192
pack
for rep in 1 2; do
  run shapes_overlap_$rep 2 0 16384x4096 14336x4096 8192x8192
  run shapes_serial_$rep 2 1 16384x4096 14336x4096 8192x8192
done
pack
cat "$S"
