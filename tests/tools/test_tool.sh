#!/usr/bin/env bash
# test_tool.sh - the `tpla` tool's own checks and refusals, on the host
# executor: sizes whose byte counts would overflow, flags a mode cannot honour,
# and `tpla ns -c 1` failing a result that is not the iteration's (a result
# scaled by 1 + f through TPLA_TOOL_NS_PERTURB) while passing the true one.
#   Run: tests/tools/test_tool.sh build/tpla       (CTest: test_tool, a few seconds)
set -uo pipefail
tpla=${1:?usage: test_tool.sh path/to/tpla}
passed=0
failed=0

# expect RC DESCRIPTION PATTERN COMMAND...: the command must exit with RC and
# print a line matching PATTERN (grep -E; "" matches anything).
expect() {
  local want=$1 what=$2 pattern=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $what: exit $rc, expected $want and /$pattern/: $*"
    echo "$out" | tail -n 5 | sed 's/^/    /'
  fi
}

h=(-x host -n 1 -w 0)
expect 2 "gemm refuses a 2^64-byte matrix" "more than 2\^40" "$tpla" gemm "${h[@]}" -g 1 4G 4G 4G
expect 2 "ns refuses a 2^63-element matrix" "more than 2\^40" "$tpla" ns "${h[@]}" -g 1 -c 0 4Gx2G
expect 2 "gemm-rs refuses a 2^64-byte matrix" "more than 2\^40" "$tpla" gemm-rs "${h[@]}" -g 1 4G 4G 4
expect 2 "ag-gemm refuses a 2^64-byte matrix" "more than 2\^40" "$tpla" ag-gemm "${h[@]}" -g 2 4G 4G 1
expect 2 "a sweep of more than 64 sizes" "more than 64 sizes" "$tpla" gemm "${h[@]}" -f 1.0000001 -b 64 -e 128
expect 2 "overlap modes take no -b/-e/-f" "-b/-e/-f" "$tpla" ag-gemm "${h[@]}" -b 1024
expect 2 "overlap modes take no op(A) T" "op\(A\) is N" "$tpla" gemm-rs "${h[@]}" -t TT 8 8 8
expect 2 "--accum without FP8" "for FP8 inputs" "$tpla" gemm-rs "${h[@]}" --accum=fast -d bf16 32 32 32
expect 2 "--cache-b without FP8" "--cache-b: for FP8" "$tpla" gemm-rs "${h[@]}" --cache-b -d bf16 32 32 32
expect 2 "--cache-b with op(B) T" "--cache-b: for FP8" "$tpla" gemm-rs "${h[@]}" --cache-b -d e4m3 -t NT 32 32 32
expect 2 "run with four sizes" "4 sizes" "$tpla" run "${h[@]}" 16 16 16 99
expect 2 "info with arguments" "takes no flags" "$tpla" info -g 7
expect 0 "FP8 gemm-rs with --cache-b" "wrong elements: 0 OK" "$tpla" gemm-rs "${h[@]}" -g 2 -d e4m3 --cache-b 64 32 16
expect 0 "gemm-ar (out-of-place baseline)" "wrong elements: 0 OK" "$tpla" gemm-ar "${h[@]}" -g 2 -d fp16 64 32 16

# The Newton-Schulz check: needs the float64 SVD (a build with LAPACK).
ns_out=$("$tpla" ns "${h[@]}" -g 1 -c 0 16 2>&1 || true) # no pipe: grep -q + pipefail
if grep -q "no LAPACK" <<<"$ns_out"; then
  echo "SKIP: this build has no LAPACK: tpla ns checks only NaN/Inf"
else
  for d in bf16 fp16 fp32; do
    expect 0 "ns $d, 2 ranks, true result" "tpla ns: OK" "$tpla" ns "${h[@]}" -g 2 -d $d -s 7 128x96 64x160
    expect 1 "ns $d, 2 ranks, result off by 10%" "above its bound" \
      env TPLA_TOOL_NS_PERTURB=0.1 "$tpla" ns "${h[@]}" -g 2 -d $d -s 7 128x96
  done
  expect 1 "ns bf16 Gram, result off by 10%" "above its bound" \
    env TPLA_TOOL_NS_PERTURB=0.1 "$tpla" ns "${h[@]}" -g 3 --gram=input --preset=polar 96x96
  expect 1 "ns fp32, result off by 0.1%" "above its bound" \
    env TPLA_TOOL_NS_PERTURB=0.001 "$tpla" ns "${h[@]}" -g 1 -d fp32 --preset=cubic 64x64
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
