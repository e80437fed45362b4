#!/usr/bin/env bash
# One call on a lent NVIDIA machine (the `device` tool): the CUDA execution tests and the GPU
# benchmarks, from binaries built on the development machine and carried as one archive
# (the GPU machine has no Catch2, Hana or xsimd). Prepare here with bench/gpu_pack.sh, then
# run there from the repository root: bash bench/gpu_check.sh [tests|bench|layer|tiles|examples|peers|all] [test...]
# Test logs land in $OUT/tests.tar.gz; the last lines printed are the summary.
set -u
what=${1:-all}
shift || true
out=${OUT:-/tmp/kiln-gpu-out}
mkdir -p "$out" /tmp/kiln-gpu/logs
cd "$(dirname "$0")/.."
tar -xf .dev/gpu-bin.tar.xz -C /tmp/kiln-gpu
bin=/tmp/kiln-gpu/bin
rm -f /tmp/kiln-gpu/rc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}

if [[ $what == tests || $what == all ]]; then
  # kiln's own kernels under test (no provider; not the GLSL compile checks: the GPU machine
  # has no shaderc), then the cuBLAS provider's test alone.
  export KILN_REQUIRE_CUDA=1 KILN_TEST_DEVICES=cuda KILN_CUBLAS_LIBRARY=none
  tests=("$@")
  [[ ${#tests[@]} -gt 0 ]] || tests=($(cd $bin && ls test_*))
  printf '%s\n' "${tests[@]}" | xargs -P 8 -I{} bash -c \
    'timeout 120 '"$bin"'/{} "~[glsl]" > /tmp/kiln-gpu/logs/{}.log 2>&1; echo "{} rc=$?" >> /tmp/kiln-gpu/rc'
  unset KILN_CUBLAS_LIBRARY
  KILN_TEST_CUBLAS=1 timeout 60 $bin/test_matmul_device "[provider]" \
    > /tmp/kiln-gpu/logs/provider.log 2>&1
  echo "provider rc=$?" >> /tmp/kiln-gpu/rc
  tail -3 /tmp/kiln-gpu/logs/provider.log
  tests+=(provider)
  sort /tmp/kiln-gpu/rc
  tar -czf "$out/tests.tar.gz" -C /tmp/kiln-gpu logs
  for t in "${tests[@]}"; do # the details of each that failed
    grep -q "^$t rc=0" /tmp/kiln-gpu/rc ||
      { echo "== $t"; grep -E "^test cases|FAILED|REQUIRE|CHECK|with expansion|error" \
        /tmp/kiln-gpu/logs/$t.log | head -12; }
  done
fi

if [[ $what == bench || $what == all ]]; then
  unset KILN_REQUIRE_CUDA KILN_TEST_DEVICES KILN_CUBLAS_LIBRARY
  timeout 90 $bin/bench_cuda_jit 2>&1 | tee "$out/bench_cuda_jit.md"
  KILN_BENCH_DEVICE=cuda:0 timeout 150 $bin/bench_matmul_device --large 2>&1 |
    tee "$out/bench_matmul.md"
fi

# kiln's tile configurations at f32 4096^3 against cuBLAS in the same run, on cuda:0.
if [[ $what == tiles ]]; then
  KILN_BENCH_DEVICE=cuda:0 timeout 150 $bin/bench_matmul_device --tiles 2>&1 |
    tee "$out/bench_tiles.md"
fi

# A network layer's value and gradients against its forward product, on cuda:0.
if [[ $what == layer ]]; then
  KILN_BENCH_DEVICE=cuda:0 timeout 120 $bin/bench_matmul_device --layer 2>&1 |
    tee "$out/bench_layer.md"
fi

# The examples on cuda:0 as a user runs them (cuBLAS where it loads), each checking itself.
if [[ $what == examples || $what == all ]]; then
  unset KILN_REQUIRE_CUDA KILN_TEST_DEVICES KILN_CUBLAS_LIBRARY
  for e in $(cd $bin && ls example_*); do
    KILN_DEVICE=cuda:0 timeout 90 $bin/$e > /tmp/kiln-gpu/logs/$e.log 2>&1
    echo "== $e rc=$?"
    tail -4 /tmp/kiln-gpu/logs/$e.log
  done
fi

# The peers (PyTorch, CuPy) on the same rows.
if [[ $what == peers || $what == all ]]; then
  timeout 40 python3 bench/cuda_peers.py 26 2>&1 | tee "$out/cuda_peers.md"
  timeout 45 python3 bench/matmul_peers.py 2>&1 | tee "$out/matmul_peers.md"
fi
