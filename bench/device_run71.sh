#!/usr/bin/env bash
# bench/device_run71.sh - after run 70 (the chain main -> publish -> mapped -> home -> mirror
# -> gmirror: only `home`, the call on the transport's lane 0, gained; `mapped` and both
# row-by-row mirrors lost 2-5% on the Gram-iteration shapes). The lane-0 call alone, on main
# (homemain, this tree, exp-home-main) and on exp-gram-publish (homepub, exp-home-only):
# 1. test_gpu_ns (2 GPUs) and memcheck X/Gram iteration of this tree;
# 2. tpla ns -g 2 on the four 2-GPU shapes: main, publish, homemain, homepub, three rounds,
#    tpla ns -g 1 (8192^2, 16384x4096) before each; bench/run_ns.sh (the table of record,
#    PyTorch in the same run) in whichever of the four has the smallest sum of medians;
# 3. run 66's part 2 and 3: tpla gemm-ar against c9b6206 (the transport's publish-only steps,
#    8a7e482, never timed for GEMM+AR), and GEMM+AR bf16 / FP8 GEMM+RS (8192, 4096, 8192) at
#    2, 3, 4 chunks and 3, 4 with a tapered last chunk. About 7 minutes.
# Prepare (on exp-home-main): git archive main -o snap/run71_main.tar; git archive
#   exp-gram-publish -o snap/run71_publish.tar; git archive exp-home-only -o
#   snap/run71_homepub.tar; git archive c9b6206 -o snap/run71_base.tar; git archive HEAD -o
#   snap/run71.tar
# run (carry ["snap"]): mkdir -p /tmp/s71/snap && tar xf snap/run71.tar -C /tmp/s71 &&
#   cp snap/run71_*.tar /tmp/s71/snap/ && cd /tmp/s71 && bash bench/device_run71.sh
set -u
. bench/device_lib.sh 71
ROOT=$PWD
for b in main publish homepub base; do
  tar_build "/tmp/s71$b" "$ROOT/snap/run71_$b.tar" "$b" tpla_tool &
done
gpu_build tpla_tool test_gpu_ns
wait
pack
CUDA_VISIBLE_DEVICES=0,1 bounded 150 "$L/test_gpu_ns.log" build-gpu/tests/test_gpu_ns
say "test_gpu_ns (homemain), 2 GPUs: exit $? ($(el)) $(tail -n 1 "$L/test_gpu_ns.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for it in x gram; do
  CUDA_MODULE_LOADING=EAGER bounded 150 "$L/memcheck_$it.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tpla ns -g 2 -n 2 -w 0 -c 0 \
    --gram=both --algo=gram_sharded --iterate=$it 1024x512 96x1000
  say "memcheck (homemain) GRAM_SHARDED $it: exit $? $(grep 'ERROR SUMMARY' "$L/memcheck_$it.log")"
done
pack
dir_of() { [ "$1" = homemain ] && echo "$ROOT" || echo "/tmp/s71$1"; }
ns() { # name tree gpus shapes...
  local name=$1 tree=$2 g=$3; shift 3
  CUDA_VISIBLE_DEVICES=0,1 bounded 90 "$L/$name.log" "$(dir_of "$tree")/build-gpu/tpla" ns -g "$g" \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el))"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2 3; do
  ns "one_$rep" main 1 8192x8192 16384x4096
  for b in main publish homemain homepub; do
    ns "${b}_$rep" "$b" 2 8192x8192 16384x4096 4096x14336 14336x4096
  done
  pack
done
sum() { cat "$L"/"$1"_?.log | awk '/^ *[0-9]+x[0-9]+ +2 tpla/ {t += $4} END {print t}'; }
best=main best_t=$(sum main)
for b in publish homemain homepub; do
  t=$(sum $b)
  awk "BEGIN {exit !($t < $best_t)}" && best=$b best_t=$t
done
say "sums of medians: main $(sum main), publish $(sum publish), homemain $(sum homemain), homepub $(sum homepub) ms; run_ns in $best"
(cd "$(dir_of $best)" && OUT=$L/run_ns timeout 240 bash bench/run_ns.sh > "$L/run_ns.log" 2>&1)
say "run_ns ($best): exit $? ($(el))"
grep -E "^(16384x4096|14336x4096|4096x14336|8192x8192) " "$L/run_ns/compare.txt" >> "$S"
pack
ar() { # name tpla
  CUDA_VISIBLE_DEVICES=0,1 bounded 120 "$L/$1.log" "$2" gemm-ar -g 2 -d bf16 -n 20 -w 5 -s 1234
  say "$1: exit $? ($(el))"
  grep -E "^  gemm-ar " "$L/$1.log" | sed "s/^/$1 /" >> "$S"
}
for rep in 1 2; do
  ar "ar_base_$rep" /tmp/s71base/build-gpu/tpla
  ar "ar_main_$rep" /tmp/s71main/build-gpu/tpla
  pack
done
# chunk counts below the automatic minimum of 4 (see device_run66.sh)
sweep() { # name op args...
  local name=$1 op=$2; shift 2
  for ct in 2:1 3:1 4:1 3:2 4:2; do
    local c=${ct%%:*} t=${ct##*:}
    TPLA_OVERLAP_TAIL=$t CUDA_VISIBLE_DEVICES=0,1 bounded 60 "$L/${name}_c${c}t$t.log" \
      /tmp/s71main/build-gpu/tpla $op -g 2 -n 20 -w 5 -s 1234 --chunks=$c "$@" 8192 4096 8192
    say "${name} chunks $c tail $t: exit $? $(grep -E "^  $op " "$L/${name}_c${c}t$t.log")"
  done
}
sweep ar_bf16 gemm-ar -d bf16
sweep rs_e4m3_opT gemm-rs -d e4m3 -t NT
pack
cat "$S"
