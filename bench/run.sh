#!/usr/bin/env bash
# Builds and runs every benchmark; prints markdown for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/bench -j "$(nproc)"
echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(g++ --version | head -1)"
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "### Elementwise (f32)"
./build/bench/bench/bench_elementwise
echo
echo "### Build time"
bash bench/build_time.sh
echo
echo "### Black-Scholes example (10^7 options)"
for t in 1 2; do KILN_NUM_THREADS=$t ./build/bench/examples/black_scholes | head -1; done
