#!/usr/bin/env bash
# bench/device_run29.sh - prepared, not yet run: why FP8 AG+GEMM op(B) T and a
# cached B^T lose ~60 us to op(B) N at the communication-bound (16384, 8192,
# 1024), and whether a prelude before the own rows' GEMM is a safe fix. Run 27:
# reading B (the amax kernel) just before the own rows' GEMM brought op T to
# 293 us and cached to 299 (op N: 296), but run 28: it cost op T 54 us at
# (8192, 8192, 4096), where B is 32 MiB. One patched build (not the library as
# committed), TPLA_RUN29 picks the prelude on compute lane 0: none; b (read
# B); a (read as many bytes of A); s5 / s20 (a 5 / 20 us spin on one warp, no
# memory traffic). b ~ a ~ s5 would name the delay, b alone L2. Shapes: the
# two above plus (32768, 8192, 4096) op T. About 5 minutes.
set -u
. bench/device_lib.sh 29
patched_build /tmp/s29x "$PWD/bench/run29_patch.py"
run() { # prelude name args...
  local v=$1 name=$2; shift 2
  [ $(( 560 - ($(date +%s) - t0) )) -gt 20 ] || return 0
  TPLA_RUN29=$v timeout 20 build-exp/tpla ag-gemm -g 2 -n 20 -w 5 -s 1234 -d e4m3 "$@" \
    > "$L/${v}_$name.log" 2>&1
  say "$v $name: exit $? $(grep -E '^  ag-gemm ' "$L/${v}_$name.log")"
}
for v in none b a s5 s20; do
  run $v comm_opT -t NT 16384 8192 1024
  run $v comm_cached --cache-b 16384 8192 1024
  run $v comm_opN 16384 8192 1024
  run $v gemm_opT -t NT 8192 8192 4096
  run $v gemm_cached --cache-b 8192 8192 4096
  run $v big_opT -t NT 32768 8192 4096
  pack
done
cat "$S"
