#!/usr/bin/env bash
# bench/device_run44.sh - after run 42 (test_gpu_ns passed with pulled Gram sums, 920
# 2-rank cases; the suite passed 66/0/1; but the memcheck of the pulls hit its 120 s
# limit, and the compute-sanitizer target it left running slowed run 42's timings
# ~2.2x, so they are void). bench/device_lib.sh's `bounded` now kills the whole
# process group and prints gdb backtraces of every process on a timeout.
# 1. bench/run_ns.sh with TPLA_NS_GRAM_SUM=pull (issue #3's table with the pulls;
#    run 40 had NCCL sums: 16384x4096 0.6508); no float64 check;
# 2. `tpla ns -g 2` pulls vs NCCL on the four 2-GPU shapes, alternated twice;
# 3. run 43's timelines (bench/device_run43.sh's patched copy, 4 runs);
# 4. memcheck of `tpla ns -g 2` with pulls, one shape, under 150 s (backtraces if not).
# About 8 minutes.
set -u
. bench/device_lib.sh 44
ROOT=$PWD
gpu_build tpla_tool test_gpu_ns
TPLA_NS_GRAM_SUM=pull OUT=$L/ns BUILD=$PWD/build-gpu CHECK_SHAPE="" timeout 300 \
  bash bench/run_ns.sh > "$L/run_ns.log" 2>&1
say "run_ns.sh (pulls): exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/ns/compare.txt" >> "$S"
pack
SH2="16384x4096 14336x4096 4096x14336 8192x8192"
for rep in 1 2; do
  for sum in pull nccl; do
    log="$L/ns_2gpu_${sum}_$rep.log"
    TPLA_NS_GRAM_SUM=$sum bounded 90 "$log" build-gpu/tpla ns -g 2 -s 1234 -n 20 -w 5 \
      --gram=input --svd-max=0 $SH2
    say "ns -g 2 ($sum) #$rep: exit $? ($(el))"
    grep -E "^ *[0-9]+x[0-9]+ " "$log" | sed "s/^/$sum /" >> "$S"
  done
done
pack
patched_build /tmp/s44x "$ROOT/bench/run43_ns_trace_patch.py"
trace() { # name sum args...
  local name=$1 sum=$2; shift 2
  TPLA_NS_GRAM_SUM=$sum CUDA_VISIBLE_DEVICES=0,1 TPLA_TRACE_NS=8 \
    bounded 60 "$L/$name.log" build-exp/tpla ns -g 2 -s 1234 -n 20 -w 5 --gram=input \
    --svd-max=0 "$@"
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" >> "$S"
}
trace square_auto nccl 8192x8192
trace tall_sharded_gram nccl --algo=gram_sharded --iterate=gram 16384x4096
trace tall_auto_pull pull 16384x4096
trace square_auto_pull pull 8192x8192
pack
cd "$ROOT" || exit 1
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TPLA_NS_GRAM_SUM=pull bounded 150 "$L/memcheck_pull.log" "$SAN" --tool memcheck \
  --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 1 -w 0 -c 0 \
  --gram=input --algo=gram_allreduce --iterate=gram 96x1000
say "memcheck ns -g 2 pulls: exit $? ($(el)) $(grep 'ERROR SUMMARY' "$L/memcheck_pull.log")"
pack
cat "$S"
