#!/usr/bin/env bash
# Build time of one file that includes the library and evaluates 20 different
# expressions: kiln vs the same file written with xtensor. Median of 3 compiles each,
# g++ -O2 -march=native; each program is also run, so both really compile the work.
set -euo pipefail
cd "$(dirname "$0")/build_time"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
time_one() { # file, extra flags
  local ts=()
  for _ in 1 2 3; do
    local t0=$(date +%s.%N)
    g++ -std=c++20 -O2 -march=native -I../../include "$@" -o "$out/a.out"
    ts+=("$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { print a - b }')")
  done
  "$out/a.out"
  printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p
}
k=$(time_one kiln_20.cpp)
x=$(time_one xtensor_20.cpp)
printf '| file | median compile s |\n|---|---|\n| kiln, 20 expressions | %.2f |\n| xtensor, 20 expressions | %.2f |\n' "$k" "$x"
awk -v k="$k" -v x="$x" 'BEGIN { printf "kiln / xtensor build time: %.2f\n", k / x }'
