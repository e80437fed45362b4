#!/usr/bin/env bash
# Builds the benchmarks in build-bench/ (-O3 -march=native) and runs all of them; prints
# markdown ready for bench/RESULTS.md on stdout. About 5 minutes on 2 cores.
# Usage: bench/run.sh [max_log2 = 24]   (a smaller max_log2 makes a quick sanity run)
set -euo pipefail
cd "$(dirname "$0")/.."
max_log2=${1:-24}

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON >/dev/null
cmake --build build-bench --target bench_elementwise bench_heat2d bench_pool_wake black_scholes \
  >/dev/null

# Other work on this machine disturbs the timings: with KILN_BENCH_WAIT_IDLE=<seconds>,
# wait up to that long for both cores to be idle (under 10% busy over 5 s) before running.
# shellcheck source=bench/busy.sh
source bench/busy.sh
if [[ -n ${KILN_BENCH_WAIT_IDLE:-} ]]; then
  deadline=$((SECONDS + KILN_BENCH_WAIT_IDLE))
  while (($(busy_pct 5) >= 10 && SECONDS < deadline)); do :; done
fi

echo "## $(date -u '+%Y-%m-%d %H:%M UTC') — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo
echo "- compiler: $(g++ --version | head -1), -O3 -march=native"
# -march=native: the kernels use the widest of these the CPU has (xsimd picks it).
echo "- instruction set: $(grep -m1 -o -w -E 'sse4_2|avx|avx2|fma|avx512f|avx512bw|avx512dq|avx512vl' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "- kiln: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- include || echo ' + uncommitted changes in include/')"
echo "- load average before the run: $(cut -d' ' -f1-3 /proc/loadavg); CPU busy over 5 s: $(busy_pct 5)%"
echo
echo "### Elementwise (f32)"
echo
# CPU time that other processes took during the run = all busy time - the benchmark's own.
read -r -a s0 </proc/stat
times_file=$(mktemp)
TIMEFORMAT='%R %U %S'
{ time ./build-bench/bench/bench_elementwise "$max_log2" 2>&3; } 3>&2 2>"$times_file"
read -r -a s1 </proc/stat
read -r wall user sys <"$times_file"
rm -f "$times_file"
busy_ticks=$(((s1[1] + s1[2] + s1[3] + s1[6] + s1[7] + s1[8] - s0[1] - s0[2] - s0[3] - s0[6] - s0[7] - s0[8])))
other_pct() {
  awk -v b="$busy_ticks" -v hz="$(getconf CLK_TCK)" -v u="$user" -v s="$sys" -v w="$wall" \
    -v n="$(nproc)" 'BEGIN { o = b / hz - u - s; if (o < 0) o = 0;
      printf "%.0f%% of the machine (%.1f of %.1f core-seconds)", 100 * o / (w * n), o, w * n }'
}
echo
echo "- load average after the elementwise run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- CPU time taken by other processes (and VM steal) during it: $(other_pct)"
echo
echo "### Black-Scholes example (10^7 options, call and put in one kiln::eval pass)"
echo
for t in 1 2; do
  KILN_NUM_THREADS=$t ./build-bench/examples/black_scholes | sed 's/^/    /'
done
echo
echo "### 2-D heat equation (f64 2048^2, 20 steps, narrow views)"
echo
./build-bench/bench/bench_heat2d
echo
echo "### Thread pool: cost of a pass of two tasks"
echo
./build-bench/bench/bench_pool_wake
echo
echo "### Build time"
echo
# The growth tables (chains, gradients) take most of build_time.sh's time: run them apart.
bash bench/build_time.sh --no-growth
echo
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
