#!/usr/bin/env bash
# bench/device_lib.sh - what every bench/device_runN.sh (11 on) shares; source it
# with the run's number: `. bench/device_lib.sh 15`. Sets NVLink multicast off,
# OUT (what the device tool brings back), L (/tmp/runN-logs, packed into
# $OUT/logs.tgz by `pack`) and S (the summary, opened with `nvidia-smi -L`'s GPU UUIDs,
# also in $L/gpus.txt), and defines:
#   say TEXT          print and append to the summary
#   el                seconds since sourcing
#   bounded LIMIT LOG cmd...   run cmd (output to LOG) for at most LIMIT s; on a
#                     timeout, append every thread's kernel wait channel and stack
#                     (a GPU wait in the driver vs a host futex) of every process in
#                     its group, with gdb's backtraces where gdb exists, kill the
#                     group, return 124
#   patched_build DIR PATCH.py   copy the tree to DIR, apply PATCH.py to the copy, cd there,
#                     build tpla_tool into DIR/build-exp (an experiment, not the library);
#                     with REUSE_BUILD=1 an existing DIR/build-exp/tpla is used as it is
#   gpu_build TARGET...          configure build-gpu (Release, TPLA_CUDA=ON), build the targets
#   tar_build DIR TAR NAME TARGET...  unpack TAR (another commit's `git archive`, for an A/B)
#                     into a fresh DIR and build the targets in DIR/build-gpu (logs *_NAME.log)
#   ns_trace NAME ARGS...  tpla ns -g 2 of a patched_build's copy (build-exp) with the run 37
#                     timeline on (TPLA_TRACE_NS=8: call 8 of each rank), bf16 Gram, into
#                     $L/NAME.log; its table lines go to the summary
#   load_start CMD...  a neighbour load: CMD run again and again in its own process group,
#                     each invocation bounded to 60 s (stacks kept on a timeout), exits in
#                     $L/load.log; load_stop ends it (at most 65 s, then killed) and says
#                     how many invocations ended well (run 52's pattern; run 51 lost its logs
#                     waiting unbounded for such a loop)
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/bench/out}; mkdir -p "$OUT"
L=/tmp/run$1-logs; mkdir -p "$L"
S=$L/summary.txt; : > "$S"
t0=$(date +%s)
# which machine: GPU names and UUIDs (runs 81-86 could not tell whether they shared one)
timeout 10 nvidia-smi -L > "$L/gpus.txt" 2>&1 && sed 's/^/# /' "$L/gpus.txt" >> "$S"
pack() { tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")"; }
el() { echo "$(( $(date +%s) - t0 )) s"; }
say() { echo "$*" | tee -a "$S"; }
bounded() {
  local limit=$1 log=$2; shift 2
  setsid "$@" > "$log" 2>&1 & # its own process group: a timeout kills its children too
  local pid=$! n=0 p t
  while kill -0 $pid 2> /dev/null && [ $n -lt $((limit * 5)) ]; do sleep 0.2; n=$((n + 1)); done
  if kill -0 $pid 2> /dev/null; then
    echo "# TIMEOUT after $limit s; threads of every process in its group:" >> "$log"
    for p in $(pgrep -g $pid); do
      echo "# process $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-120)"
      for t in /proc/$p/task/*; do
        echo "#  $(basename "$t") $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)"
        sed 's/^/#    /' "$t/stack" 2>/dev/null | head -n 8
      done
      command -v gdb > /dev/null && timeout 40 gdb -p $p -batch -nx \
        -ex "thread apply all bt 14" 2>&1 | grep -E "^(Thread|#)" | sed 's/^/#  gdb /' | head -n 1500
    done >> "$log"
    kill -9 -- -$pid; wait $pid 2> /dev/null; return 124
  fi
  wait $pid
}

patched_build() {
  local dir=$1 patch=$2 tag
  tag=$(basename "$dir")
  if [ "${REUSE_BUILD:-0}" = 1 ] && [ -x "$dir/build-exp/tpla" ]; then
    say "build: reusing $dir/build-exp (built by an earlier script on this machine)"
    cd "$dir" || return 1
    return 0
  fi
  rm -rf "$dir" && cp -r "$PWD" "$dir"
  python3 "$patch" "$dir" > "$L/$tag-patch.log" 2>&1
  local rc=$?
  say "patch $tag: exit $rc $(tail -n 1 "$L/$tag-patch.log")"
  [ $rc = 0 ] || return 1 # nothing measured on an unpatched copy
  cd "$dir" || return 1
  cmake -S . -B build-exp -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/$tag-configure.log" 2>&1
  cmake --build build-exp -j "$(nproc)" --target tpla_tool > "$L/$tag-build.log" 2>&1
  say "build $tag: exit $? ($(el)), warnings: $(grep -c warning "$L/$tag-build.log")"
}

gpu_build() {
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON > "$L/configure.log" 2>&1
  cmake --build build-gpu -j "$(nproc)" --target "$@" > "$L/build.log" 2>&1
  say "build: exit $? ($(el)), warnings: $(grep -c warning "$L/build.log")"
}

tar_build() {
  local dir=$1 tar=$2 name=$3; shift 3
  rm -rf "$dir" && mkdir -p "$dir" && tar xf "$tar" -C "$dir"
  (cd "$dir" && cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTPLA_CUDA=ON \
    > "$L/configure_$name.log" 2>&1 && cmake --build build-gpu -j "$(nproc)" --target "$@" \
    > "$L/build_$name.log" 2>&1)
  say "build $name: exit $? ($(el)), warnings: $(grep -c warning "$L/build_$name.log")"
}

ns_trace() {
  local name=$1; shift
  CUDA_VISIBLE_DEVICES=0,1 TPLA_TRACE_NS=8 bounded 60 "$L/$name.log" build-exp/tpla ns -g 2 \
    -s 1234 -n 20 -w 5 --gram=input --svd-max=0 "$@"
  say "$name: exit $? ($(el)) $(grep -cE '^TRACE_NS' "$L/$name.log") trace lines"
  grep -E "^ *[0-9]+x[0-9]+ " "$L/$name.log" >> "$S"
}

load_start() {
  rm -f "$L/load.done"; : > "$L/load.log"
  setsid bash -c '. bench/device_lib.sh "$0" > /dev/null; L=$1; shift; i=0
    while [ ! -e "$L/load.done" ]; do i=$((i + 1))
      bounded 60 "$L/load_$i.log" "$@"; rc=$?
      echo "load $i: exit $rc" >> "$L/load.log"
      [ $rc = 0 ] && rm -f "$L/load_$i.log"
    done' "${L##*/run}-load" "$L" "$@" > /dev/null 2>&1 &
  LOAD_PID=$!
}

load_stop() {
  touch "$L/load.done"
  for _ in $(seq 1 65); do kill -0 "$LOAD_PID" 2> /dev/null || break; sleep 1; done
  kill -0 "$LOAD_PID" 2> /dev/null && { say "load still running after 65 s: killed"; kill -9 -- -"$LOAD_PID"; }
  say "load: $(grep -c 'exit 0' "$L/load.log") invocations ended well; others: $(grep -v 'exit 0' "$L/load.log" | tr '\n' ' ')"
}
