#!/usr/bin/env bash
# Builds bench_cuda_jit in build-bench/ and runs it, then the peers (CuPy, PyTorch eager,
# torch.compile) on the same chains; prints markdown ready for bench/RESULTS.md. Needs an
# NVIDIA GPU with its driver; without one bench_cuda_jit says why and the peers are skipped.
# Usage: bench/run_cuda.sh [log2_n = 26]
set -euo pipefail
cd "$(dirname "$0")/.."
log2=${1:-26}

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
  -DKILN_BENCH_GPU_ONLY=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-bench --target bench_cuda_jit >/dev/null

echo "## $(date -u '+%Y-%m-%d %H:%M UTC') — CUDA: $(nvidia-smi --query-gpu=name,driver_version \
  --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'), host $(lscpu | sed -n 's/^Model name: *//p')"
echo
out=$(build-bench/bench/bench_cuda_jit)
echo "$out"
echo
if [[ $out == cuda:0\ is\ unavailable* ]]; then
  echo "(no CUDA device: peers not run)"
  exit 0
fi
python3 bench/cuda_peers.py "$log2"
