#!/usr/bin/env bash
# bench/device_run111.sh - two GPUs: the whole GPU suite (tests/gpu/run.sh) at the session's final
# library (tpla_ctx_abort, the watchdog with its 100 ms gate on the abort marks, the host
# executor's abort, check_call reporting a failed context first), test_gpu_abort included. About
# 5 minutes. The tree under test is snap/run111.tar (`git archive` of the commit).
# Run in the repository root of main with carry ["snap"]: bash bench/device_run111.sh
set -u
. bench/device_lib.sh 111
rm -rf /tmp/n111 && mkdir -p /tmp/n111 && tar xf snap/run111.tar -C /tmp/n111 && cd /tmp/n111
OUT=$L/gpu-tests timeout 480 bash tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
say "suite: exit $? ($(el)) $(tail -n 1 "$L/gpu_tests.log")"
grep -E "FAIL|HANG|Failed" "$L/gpu_tests.log" | head -20 >> "$S"
pack
cat "$S"
