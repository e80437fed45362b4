#!/usr/bin/env bash
# Build time of one file that includes the library and evaluates 20 different expressions:
# kiln (build_time/kiln_20.cpp) against the same file written with xtensor + xsimd
# (build_time/xtensor_20.cpp). Each is compiled and linked 3 times with
# g++ -std=c++20 -O2 -march=native and the median wall (and CPU) time is printed; each
# program is then run once, so both really compile working code. The same files with -DINCLUDE_ONLY
# (the includes and an empty main) show how much of it is parsing the headers.
# Usage: bench/build_time.sh [compiler = g++]
set -euo pipefail
cxx=${1:-g++}
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/build_time"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

median_compile() { # file, extra flags... -> "wall_s cpu_s", each the median of 3
  local file=$1
  shift
  local walls=() cpus=() t
  for _ in 1 2 3; do
    t=$({ TIMEFORMAT='%R %U %S'; time "$cxx" -std=c++20 -O2 -march=native -I"$here/../include" \
      "$@" "$file" -o "$out/a.out" 2>"$out/log"; } 2>&1) || { cat "$out/log" >&2; exit 1; }
    walls+=("$(awk '{ print $1 }' <<<"$t")")
    cpus+=("$(awk '{ print $2 + $3 }' <<<"$t")")
  done
  "$out/a.out" || { echo "$file: the compiled program failed" >&2; exit 1; }
  echo "$(printf '%s\n' "${walls[@]}" | sort -g | sed -n 2p) $(printf '%s\n' "${cpus[@]}" | sort -g | sed -n 2p)"
}

read -r k kc <<<"$(median_compile kiln_20.cpp)"
read -r x xc <<<"$(median_compile xtensor_20.cpp)"
read -r ki kic <<<"$(median_compile kiln_20.cpp -DINCLUDE_ONLY)"
read -r xi xic <<<"$(median_compile xtensor_20.cpp -DINCLUDE_ONLY)"

echo "$("$cxx" --version | head -1), -std=c++20 -O2 -march=native; median of 3 compiles+links,"
echo "wall time (CPU time, user+sys, in parentheses: less sensitive to other load)"
echo
echo "| file | 20 expressions, s | includes only, s | the expressions alone, s |"
echo "|---|---|---|---|"
row() { awk -v f="$1" -v a="$2" -v ac="$3" -v b="$4" -v bc="$5" \
  'BEGIN { printf "| %s | %.2f (%.2f) | %.2f (%.2f) | %.2f (%.2f) |\n", f, a, ac, b, bc, a - b, ac - bc }'; }
row kiln "$k" "$kc" "$ki" "$kic"
row xtensor "$x" "$xc" "$xi" "$xic"
echo
awk -v k="$k" -v x="$x" -v ki="$ki" -v xi="$xi" 'BEGIN {
  printf "kiln / xtensor build time: %.2f (whole file), %.2f (the 20 expressions alone)\n",
         k / x, (k - ki) / (x - xi) }'
