#!/usr/bin/env bash
# Builds what bench/gpu_check.sh runs on a lent GPU machine (the test binaries that execute on
# a CUDA device, the examples, bench_cuda_jit and bench_matmul_device) and packs them into
# .dev/gpu-bin.tar.xz, which the `device` tool carries (.dev/ is kept out of git by
# .git/info/exclude). Usage: bench/gpu_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(test_cuda_exec test_cuda_runtime test_custom_ops test_custom_reduce test_device_trees
  test_device_catalog_casts test_device_catalog_math test_device_catalog_ops test_einsum
  test_eval_groups test_launch_grid test_matmul test_matmul_device test_raw_ops
  test_reduce_subgroup test_tune_shapes test_errors test_device_timer)
examples=(quickstart black_scholes gpu_fusion greeks logistic_regression heat2d custom_ops mlp
  least_squares)
# Every test file: `setup.sh test` leaves build/release with only the unsanitized half.
cmake --preset release >/dev/null
ninja -C build/release "${tests[@]}" "${examples[@]}" >/dev/null
ninja -C build-bench bench_cuda_jit bench_matmul_device >/dev/null
rm -rf .dev/bin && mkdir -p .dev/bin
for t in "${tests[@]}"; do cp build/release/tests/$t .dev/bin/; done
for e in "${examples[@]}"; do cp build/release/examples/$e .dev/bin/example_$e; done
cp build-bench/bench/bench_cuda_jit build-bench/bench/bench_matmul_device .dev/bin/
strip .dev/bin/*
tar -C .dev -cJf .dev/gpu-bin.tar.xz bin
rm -rf .dev/bin
ls -l .dev/gpu-bin.tar.xz
