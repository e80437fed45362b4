#!/usr/bin/env bash
# 1 rank against 2 ranks of examples/mpi_logistic_regression on this machine (issue 17): time
# per step and the share of it in the allreduce, the median of REPS runs of each (printed as
# markdown for bench/RESULTS.md). Builds the example in build-bench/ (needs Open MPI:
# openmpi-bin libopenmpi-dev). Each rank runs kiln's host pool with KILN_NUM_THREADS threads
# (default 1: ranks x threads = the 2 cores).
# Usage: bench/mpi_scaling.sh [rows = 400000] [dims = 32] [steps = 30] [reps = 3]
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-400000} dims=${2:-32} steps=${3:-30} reps=${4:-3}
export KILN_NUM_THREADS=${KILN_NUM_THREADS:-1}

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON >/dev/null
cmake --build build-bench --target mpi_logistic_regression >/dev/null
exe=build-bench/examples/mpi_logistic_regression

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "## $(date -u '+%Y-%m-%d %H:%M UTC') — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo
echo "- $(mpirun --version | head -1), loopback (shared memory), kiln $(git rev-parse --short HEAD)"
echo "- examples/mpi_logistic_regression: $rows rows x $dims features (f64), $steps Adam steps;" \
  "KILN_NUM_THREADS=$KILN_NUM_THREADS per rank; median of $reps runs"
echo
echo "| ranks | ms per step | ms per step in the allreduce | share in the allreduce | speed-up |"
echo "| ---: | ---: | ---: | ---: | ---: |"
one=""
for np in 1 2; do
  step=() red=()
  for ((r = 0; r < reps; r++)); do
    line=$(mpirun --allow-run-as-root --oversubscribe -x KILN_NUM_THREADS -n "$np" "$exe" \
      --rows "$rows" --dims "$dims" --steps "$steps" --no-reference | head -1)
    step+=("$(sed -E 's/.*: ([0-9.]+) ms per step.*/\1/' <<<"$line")")
    red+=("$(sed -E 's/.*step, ([0-9.]+) ms \(.*/\1/' <<<"$line")")
  done
  s=$(printf '%s\n' "${step[@]}" | median)
  a=$(printf '%s\n' "${red[@]}" | median)
  [[ -z $one ]] && one=$s
  awk -v np="$np" -v s="$s" -v a="$a" -v one="$one" \
    'BEGIN {printf "| %d | %.1f | %.3f | %.1f%% | %.2fx |\n", np, s, a, 100 * a / s, one / s}'
done
