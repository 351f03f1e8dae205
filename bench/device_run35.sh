#!/usr/bin/env bash
# bench/device_run35.sh - run 34's memcheck again without NCCL's own API-error
# reports (--report-api-errors no, as runs 23-24: its 104 "errors" were all
# return codes inside libnccl), for FP8 AG+GEMM op(B) T and N, and a racecheck
# of op T: the schedule changed by 9f91276. ~2 minutes.
set -u
. bench/device_lib.sh 35
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
cmake --build build-gpu -j "$(nproc)" --target tpla_tool > "$L/build.log" 2>&1
say "build: exit $? ($(el))"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() { # log tool args...
  local log=$1 t=$2; shift 2
  bounded 45 "$L/$log.log" "$SAN" --tool "$t" --report-api-errors no --error-exitcode 99 \
    build-gpu/tpla ag-gemm -g 2 -n 2 -w 1 -d e4m3 "$@" 1024 512 256
  say "$t $*: exit $? ($(el)) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/$log.log" | tr '\n' ' ') $(grep -E '^  ag-gemm' "$L/$log.log" | awk '{print "wrong=" $NF}')"
}
san memcheck_opT memcheck -t NT
san memcheck_opN memcheck
san racecheck_opT racecheck -t NT
pack
cat "$S"
