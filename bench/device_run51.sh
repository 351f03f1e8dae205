#!/usr/bin/env bash
# bench/device_run51.sh - (1) bench/run51_pull_push_probe.cu: copy-engine pulls (the
# Newton-Schulz exchanges) against pushes (the overlap schedules) between the two GPUs,
# dense and strided rows, idle and beside bf16 GEMMs on both GPUs (run 50's timelines:
# a 33.5 MB Gram row pulled in ~200 us beside the GEMMs); (2) the whole GPU suite under
# a sustained `tpla ns -g 2` load again: the no-growth checks now count only windows
# around which the device was quiet (run 50: test_gpu_ns_api failed under load).
# About 6 minutes.
set -u
. bench/device_lib.sh 51
gpu_build tpla_tool
nvcc -O2 -o "$L/probe" bench/run51_pull_push_probe.cu -lcublas > "$L/probe_build.log" 2>&1
say "probe build: exit $?"
bounded 120 "$L/probe.log" "$L/probe"
say "probe: exit $? ($(el))"
cat "$L/probe.log" >> "$S"
pack
( while [ ! -e "$L/suite.done" ]; do
    build-gpu/tpla ns -g 2 -n 300 -w 0 -c 0 4096x4096 8192x2048 >> "$L/load.log" 2>&1 ||
      echo "load: exit $?" >> "$L/load.log"
  done ) &
OUT=$L/gpu-tests timeout 420 bash tests/gpu/run.sh --no-clean > "$L/gpu_tests.log" 2>&1
say "suite under load: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
touch "$L/suite.done"
grep -E "FAIL|HANG|Failed|window|not checked" "$L/gpu_tests.log" | head -30 >> "$S"
wait
say "load: $(grep -c 'tpla ns: OK' "$L/load.log") loops OK, $(grep -c 'load: exit' "$L/load.log") failed"
pack
cat "$S"
