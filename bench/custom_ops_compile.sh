#!/usr/bin/env bash
# Compile time of a program with ten custom ops (issue 14, point 7): custom10.cpp (ten
# user-defined ops, each in a fused statement and a gradient) against the same formulas in
# built-in ops (builtin10.cpp: they share one expression type) and against ten different
# built-in math functions (distinct10.cpp: ten types, as the custom ops are); each also with
# one formula only (-DKILN_BENCH_ONE), so that the cost of each further op is
# (ten - one) / 9. Each program is compiled and linked REPS times (default 3, alternating)
# with $CXX -std=c++20 -O2 -march=native against the runtime library of build/bench (built
# first if missing); prints the median wall and CPU seconds, then runs each: custom10's and
# builtin10's checksums must agree to 1e-5.
#
# Usage: bench/custom_ops_compile.sh [--reps N] [compiler = g++]
set -euo pipefail
reps=3 cxx=g++
while (($#)); do
  case $1 in
    --reps) reps=${2:?--reps needs a count} && shift ;;
    *) cxx=$1 ;;
  esac
  shift
done
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="$repo/build/bench"
[[ -f $build/libkiln_runtime.a ]] || {
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON >/dev/null
  ninja -C "$build" kiln_runtime >/dev/null
}
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
flags=(-std=c++20 -O2 -march=native -DKILN_COMPILED_CORE -I"$repo/include" -I"$repo/autodiff"
  -I"$repo/jit" -I"$repo/kernels" -I"$here/custom_ops_compile")
declare -A wall cpu
for ((r = 0; r < reps; r++)); do
  for prog in custom10 custom1 builtin10 builtin1 distinct10 distinct1; do
    if [[ $prog == *10 ]]; then src=$prog def=(); else src=${prog%1}10 def=(-DKILN_BENCH_ONE); fi
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$out/$prog.time" \
      "$cxx" "${flags[@]}" "${def[@]}" "$here/custom_ops_compile/$src.cpp" -o "$out/$prog" \
      "$build/libkiln_runtime.a" -ldl -pthread
    t1=$(date +%s.%N)
    wall[$prog]+="$(echo "$t1 - $t0" | bc) "
    cpu[$prog]+="$(awk '{print $1 + $2}' "$out/$prog.time") "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| program | median wall s | median CPU s | checksum |"
echo "|---|---|---|---|"
for prog in custom10 custom1 builtin10 builtin1 distinct10 distinct1; do
  echo "| $prog | $(median "${wall[$prog]}") | $(median "${cpu[$prog]}") | $("$out/$prog") |"
done
for kind in custom builtin distinct; do
  echo "$kind: $(echo "($(median "${cpu[${kind}10]}") - $(median "${cpu[${kind}1]}")) / 9" | bc -l | cut -c1-5) CPU s per further formula"
done
a=$("$out/custom10") b=$("$out/builtin10")
echo "checksums: custom10 $a, builtin10 $b"
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * (1 + (a < 0 ? -a : a))) }' ||
  { echo "checksums differ" >&2; exit 1; }
