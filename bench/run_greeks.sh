#!/usr/bin/env bash
# Black-Scholes price + 4 Greeks of 2^22 options on one thread: kiln (price alone; price and
# Greeks from kiln::grad), the closed forms by hand, ADOL-C (taped and traceless) and JAX on
# the CPU; then the build time of the file that builds these gradients. Prints markdown ready
# for bench/RESULTS.md on stdout; exits non-zero if any method disagrees with the closed forms.
# Installs what is missing when run as root: libadolc-dev and libeigen3-dev (bench/ needs
# Eigen to configure) with apt-get, jax (CPU wheel) with pip.
# Takes about 10 minutes on a 2-core machine, most of it compiling: bench_greeks and each
# compile of bench/greeks_compile.cpp take about a minute (the gradient code at -O3).
# Usage: bench/run_greeks.sh [runs = 5 [log2_options = 22]]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
log2n=${2:-22}
core=1 # every timed process is pinned to this core (the other one keeps the rest of the machine)

if [[ $(id -u) == 0 ]]; then
  missing=()
  for p in libadolc-dev libeigen3-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
fi
if ! python3 -c 'import jax, scipy' 2>/dev/null; then
  python3 -m pip install -q jax >&2 || python3 -m pip install -q --break-system-packages jax >&2
fi

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-bench --target bench_greeks kiln_runtime >/dev/null
# greeks_compile.cpp links the device runtime built once (as a CMake program does), so its
# build time is that of the file alone.
runtime=$(find build-bench -name libkiln_runtime.a | head -1)

# shellcheck source=bench/busy.sh
source bench/busy.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

echo "## Greeks: $(date -u '+%Y-%m-%d %H:%M UTC') — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo
echo "- compiler: $(g++ --version | head -1), -O3 -march=native; ADOL-C $(dpkg-query -W -f='${Version}' libadolc-dev 2>/dev/null || echo 'not installed'); jax $(python3 -c 'import jax; print(jax.__version__)' 2>/dev/null || echo 'not installed')"
echo "- kiln: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- include jit kernels autodiff || echo ' + uncommitted changes in the library')"
echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg); CPU busy over 5 s: $(busy_pct 5)%"
echo "- every process pinned to core $core (taskset), KILN_NUM_THREADS=1; 2^$log2n options, f64; median of $runs runs after a warm-up"
echo

KILN_NUM_THREADS=1 taskset -c "$core" ./build-bench/bench/bench_greeks "$runs" "$log2n" \
  "$work/cpp.tsv" >"$work/cpp.out" 2>"$work/cpp.err" || status=$?
taskset -c "$core" python3 bench/greeks_jax.py "$runs" "$log2n" "$work/jax.tsv" \
  >"$work/jax.out" 2>"$work/jax.err" || status=$?
grep -v '^|\|^- \|^$' "$work/cpp.out" | sed 's/^/    /' || true # notes and mismatches, if any
# stderr, less ADOL-C's warning that adtl::setNumDir prints every time
grep -v 'Tapeless: Setting numDir\|derivatives in existing adoubles\|or memory corruption' \
  "$work/cpp.err" | sed 's/^/    /' || true
sed 's/^/    /' "$work/jax.out"
grep -i 'error\|mismatch' "$work/jax.err" | sed 's/^/    /' || true
echo

# One table for both programs: ratios to kiln's price alone and to the hand loop.
cat "$work/cpp.tsv" "$work/jax.tsv" 2>/dev/null | awk -F'\t' '
  { name[NR] = $1; wall[NR] = $2; cpu[NR] = $3; err[NR] = $4 }
  $1 ~ /^kiln, price alone/ { kp = $2 }
  $1 ~ /^kiln, price \+/ { kg = $2 }
  $1 ~ /^closed forms by hand/ { hand = $2 }
  END {
    print "| method | wall ms | CPU ms | / kiln price | / hand loop | max error |"
    print "|---|---:|---:|---:|---:|---:|"
    for (i = 1; i <= NR; ++i)
      printf "| %s | %.1f | %.1f | %.2f | %.2f | %.1e |\n", name[i], wall[i], cpu[i],
             wall[i] / kp, wall[i] / hand, err[i]
    print ""
    printf "- target kiln(price + Greeks) / hand loop <= 1.5: %.2f, %s\n", kg / hand,
           kg / hand <= 1.5 ? "met" : "NOT met"
    printf "- target kiln(price + Greeks) / kiln(price) <= 3: %.2f, %s\n", kg / kp,
           kg / kp <= 3 ? "met" : "NOT met"
  }'
echo "- error: max |got - want| / max(1, |want|) over the price and the 4 Greeks against the closed forms (long double for the C++ program, numpy + scipy.special.erfc for JAX); tolerance 1e-9 (1e-6 for JAX)"
echo "- load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# Build time of bench/greeks_compile.cpp (price + 4 Greeks from kiln::grad, one kiln::eval),
# median of 3 compiles+links; the same file evaluating the price alone, and its includes alone,
# compiled once each (for scale: each compile takes minutes on a busy 2-core machine).
inc=(-Iinclude -Ijit -Ikernels -Iautodiff)
median_compile() { # count flags... -> "wall_s cpu_s", each the median of count compiles
  local count=$1 walls=() cpus=() t
  shift
  for ((j = 0; j < count; ++j)); do
    t=$({ TIMEFORMAT='%R %U %S'; time g++ -std=c++20 -O3 -march=native "${inc[@]}" "$@" \
      bench/greeks_compile.cpp -o "$work/a.out" "$runtime" -ldl -pthread 2>"$work/log"; } 2>&1) || {
      cat "$work/log" >&2
      exit 1
    }
    walls+=("$(awk '{ print $1 }' <<<"$t")")
    cpus+=("$(awk '{ print $2 + $3 }' <<<"$t")")
  done
  "$work/a.out" >/dev/null || { echo "greeks_compile.cpp $*: the compiled program failed" >&2; exit 1; }
  local mid=$(((count + 1) / 2))
  printf '%.1f %.1f\n' "$(printf '%s\n' "${walls[@]}" | sort -g | sed -n ${mid}p)" \
    "$(printf '%s\n' "${cpus[@]}" | sort -g | sed -n ${mid}p)"
}
echo "### Build time of the gradient code"
echo
echo "bench/greeks_compile.cpp, $(g++ --version | head -1), -std=c++20 -O3 -march=native, compile+link (with libkiln_runtime.a, built once beforehand); wall time (CPU time, user+sys, in parentheses: less sensitive to other load)"
echo
echo "| greeks_compile.cpp | compiles | s |"
echo "|---|---:|---|"
r=$(median_compile 3) # an assignment, so that set -e sees a failure
read -r gw gc <<<"$r"
echo "| price + 4 Greeks (kiln::grad, one kiln::eval of 5 outputs) | median of 3 | $gw ($gc) |"
r=$(median_compile 1 -DPRICE_ONLY)
read -r pw pc <<<"$r"
echo "| price alone (-DPRICE_ONLY) | 1 | $pw ($pc) |"
r=$(median_compile 1 -DINCLUDE_ONLY)
read -r iw ic <<<"$r"
echo "| includes only (-DINCLUDE_ONLY) | 1 | $iw ($ic) |"
echo
awk -v g="$gc" -v p="$pc" -v i="$ic" 'BEGIN {
  printf "- CPU time beyond the includes: price + Greeks %.1f s, price alone %.1f s (%.1fx)\n",
         g - i, p - i, (g - i) / (p - i) }'
echo
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
