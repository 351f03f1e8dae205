#!/usr/bin/env bash
# bench/device_run166.sh - one GPU (nvidia-h200), session 25: groups normalize and store their
# members with one list launch each (normalize_list, store_list; before, a group made three
# launches per member). Tests: test_gpu_ops_batch (the list kernels against float64),
# test_gpu_ns_batch, test_gpu_ns, test_gpu_ops, and memcheck of the two batch tests; then
# bench/ns_batch_bench.py (run 165's, against PyTorch's batched reference), the Muon step at
# widths 1024 and 768 with and without groups (run 163's), and the Python checks on one rank.
# Run in the repository root (no carry): bash bench/device_run166.sh
set -u
. bench/device_lib.sh 166
gpu_build all
export CUDA_VISIBLE_DEVICES=0
for t in test_gpu_ops_batch test_gpu_ns_batch test_gpu_ns test_gpu_ops; do
  bounded 120 "$L/$t.log" build-gpu/tests/$t
  say "$t: exit $? ($(el)) $(grep -E '^(ok|FAIL)|rank\(s\)' "$L/$t.log" | tr '\n' ' ' | cut -c1-600)"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in test_gpu_ops_batch test_gpu_ns_batch; do
  TPLA_TEST_NO_WATCHDOG=1 bounded 120 "$L/memcheck_$t.log" "$SAN" --tool memcheck \
    --report-api-errors no --error-exitcode 99 build-gpu/tests/$t
  say "memcheck $t: exit $? ($(el)) $(grep -E 'ERROR SUMMARY|passed' "$L/memcheck_$t.log" | tr '\n' ' ')"
done
export TPLA_LIBRARY=$PWD/build-gpu/libtpla.so
bounded 200 "$L/ns_batch.log" python3 bench/ns_batch_bench.py
say "ns_batch_bench: exit $? ($(el))"
grep -vE "^#" "$L/ns_batch.log" >> "$S"
for spec in "1024 8" "768 12"; do
  set -- $spec
  for group in default 1; do
    log="$L/muon_${1}_group_$group.log"
    if [ $group = default ]; then
      bounded 120 "$log" python3 bench/muon_graph_bench.py --hidden $1 --layers $2
    else
      TPLA_NS_BATCH_GROUP=$group bounded 120 "$log" python3 bench/muon_graph_bench.py \
        --hidden $1 --layers $2
    fi
    say "muon width $1 x $2 layers, TPLA_NS_BATCH_GROUP=$group: exit $? ($(el))"
    grep -E "^  |tpla / torch" "$log" | sed 's/^/    /' >> "$S"
  done
done
bounded 120 "$L/python_1gpu.log" torchrun --standalone --nproc_per_node=1 \
  tests/python/gpu/run_checks.py
say "python checks (1 rank): exit $? ($(el)) $(grep -E 'passed|FAIL' "$L/python_1gpu.log" | tr '\n' ' ')"
pack
cat "$S"
