#!/usr/bin/env bash
# bench/device_run37.sh - prepared, not yet run: where Newton-Schulz loses the
# time its cost model does not count (2 GPUs, 16384x4096 bf16 Gram: 4.11-4.30 ms
# measured against 3.85 predicted; the speed-up over 1 GPU 1.33 / 1.58 against
# 1.8). A patched copy (bench/run37_ns_trace_patch.py, compile-checked on the
# CPU; not the library as committed) records CUDA events around the
# normalization, every op, every Gram block row's GEMM and all-reduce, for the
# 8th execute of each rank, and prints TRACE_NS lines. About 2 minutes.
set -u
. bench/device_lib.sh 37
patched_build /tmp/s37x "$PWD/bench/run37_ns_trace_patch.py"
run() { # name gpus args...
  local name=$1 g=$2; shift 2
  CUDA_VISIBLE_DEVICES=$([ "$g" = 1 ] && echo 0 || echo 0,1) TPLA_TRACE_NS=8 \
    bounded 60 "$L/$name.log" build-exp/tpla ns -g "$g" -s 1234 -n 20 -w 5 --gram=input \
    --svd-max=0 "$@"
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" >> "$S"
}
run tall_2gpu_auto 2 16384x4096
run tall_2gpu_sharded_gram 2 --algo=sharded --iterate=gram 16384x4096
run tall_1gpu_auto 1 16384x4096
run square_2gpu_auto 2 8192x8192
run square_1gpu_auto 1 8192x8192
pack
cat "$S"
