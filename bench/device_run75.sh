#!/usr/bin/env bash
# bench/device_run75.sh - run 74's row-split products after the fix of Z_1's first half
# (it read G_1's columns, which cross the peer's rows, before they arrived: test_gpu_ns
# failed every uneven Gram-iteration case on 2 GPUs). The last ~200 s of the session's
# device time: test_gpu_ns on 2 GPUs, then main against rowsplit, two rounds. ~2 minutes.
# Prepare: git archive main -o snap/run75_main.tar && git archive HEAD -o snap/run75.tar;
# run (carry ["snap"]): mkdir -p /tmp/s75/snap && tar xf snap/run75.tar -C /tmp/s75 &&
#   cp snap/run75_main.tar /tmp/s75/snap/ && cd /tmp/s75 && bash bench/device_run75.sh
set -u
. bench/device_lib.sh 75
ROOT=$PWD
tar_build /tmp/s75main "$ROOT/snap/run75_main.tar" main tpla_tool &
gpu_build tpla_tool test_gpu_ns
wait
pack
CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns (rowsplit), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
grep -E "Gram iteration" "$L/test_gpu_ns.log" >> "$S"
pack
for rep in 1 2; do
  for b in main rowsplit; do
    tool=build-gpu/tpla; [ $b = main ] && tool=/tmp/s75main/build-gpu/tpla
    CUDA_VISIBLE_DEVICES=0,1 bounded 40 "$L/${b}_$rep.log" $tool ns -g 2 -s 1234 -n 20 -w 5 \
      --gram=input --svd-max=0 16384x4096 4096x14336 14336x4096
    say "${b}_$rep: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$L/${b}_$rep.log" | sed "s/^/${b}_$rep /" >> "$S"
    pack
  done
done
cat "$S"
