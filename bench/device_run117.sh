#!/usr/bin/env bash
# bench/device_run117.sh - four GPUs (nvidia-h200-x4): why GEMM+AllReduce over PEER never
# finishes at 4 ranks (runs 115-116: `tpla gemm-ar -g 4` printed no row in 60 s, with tail 1
# and automatic; test_gpu_overlap's 4-rank GEMM+AR case 62 hung with rank 3 never announcing
# call 3 although every flag it waits for in call 2 had arrived). Small shape (2048 1024 2048),
# each invocation bounded:
#   control   -g 2 and -g 4 as the library is (auto chunks), and -g 4 --chunks=1
#   -g 3      three ranks: 2 copy streams, pushes and pulls on four distinct streams
#   CUDA_DEVICE_MAX_CONNECTIONS=32 -g 4   hardware queues no longer shared by the streams
#   XP_COPY_STREAMS=8 (bench/run117_copy_streams_patch.py) -g 4: pulls off the push streams
# Run in the repository root of main (no carry): bash bench/device_run117.sh
set -u
. bench/device_lib.sh 117
gpu_build tpla_tool
ar() { # ar NAME LIMIT [env...] -- tpla args
  local name=$1 limit=$2; shift 2
  bounded "$limit" "$L/$name.log" env "$@"
  say "$name: exit $? ($(el)) $(grep -E '^  gemm-ar ' "$L/$name.log" | tr -s ' ' | cut -c1-150)"
  pack
}
S1="-d bf16 -n 10 -w 3 -s 1234 2048 1024 2048"
ar g2 30 build-gpu/tpla gemm-ar -g 2 $S1
ar g4 30 build-gpu/tpla gemm-ar -g 4 $S1
ar g4_c1 30 build-gpu/tpla gemm-ar -g 4 --chunks=1 $S1
ar g3 30 build-gpu/tpla gemm-ar -g 3 $S1
ar g4_conn32 40 CUDA_DEVICE_MAX_CONNECTIONS=32 build-gpu/tpla gemm-ar -g 4 $S1
patched_build /tmp/x117 bench/run117_copy_streams_patch.py
ar g4_copy8 40 build-exp/tpla gemm-ar -g 4 $S1
ar g4_copy8_big 60 build-exp/tpla gemm-ar -g 4 -d bf16 -n 20 -w 5 -s 1234
pack
cat "$S"
