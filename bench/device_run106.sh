#!/usr/bin/env bash
# bench/device_run106.sh - two GPUs: can test_gpu_overlap_groups fail? The same test built from a
# copy of the tree whose window groups never fence (ovl_run's fence_peers call removed: a call
# that follows another member's no longer waits for the peers' announcements). About 2 minutes.
# Run in the repository root: bash bench/device_run106.sh
set -u
. bench/device_lib.sh 106
rm -rf /tmp/s106 && cp -r "$PWD" /tmp/s106 && cd /tmp/s106 && rm -rf build-gpu || exit 1
sed -i 's/  if (st == TPLA_SUCCESS \&\& p->fence_peers)/  if (st == TPLA_SUCCESS \&\& p->fence_peers \&\& 0)/' src/core/overlap_exec.c
say "fence removed: $(grep -c 'p->fence_peers && 0' src/core/overlap_exec.c) place"
gpu_build test_gpu_overlap_groups
CUDA_VISIBLE_DEVICES=0,1 TPLA_TEST_HANG_S=15 bounded 60 "$L/groups_nofence.log" \
  build-gpu/tests/test_gpu_overlap_groups
say "test_gpu_overlap_groups without the fence: exit $? ($(el)) $(tail -n 1 "$L/groups_nofence.log")"
grep -E "error|FAIL|differs" "$L/groups_nofence.log" | head -8 >> "$S"
pack
cat "$S"
