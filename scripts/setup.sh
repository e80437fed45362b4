#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine, run as root from a clone of the repository.
# Each mode installs the Debian packages it needs (apt-get, only what is missing), then
# configures, builds and runs with the CMake presets in CMakePresets.json:
#   bash scripts/setup.sh quickstart  build and run examples/quickstart       (preset quickstart)
#   bash scripts/setup.sh test        build the whole suite, run it with CTest: the tests of
#                                     memory-handling code under ASan + UBSan (preset asan),
#                                     the others and the examples plain (preset suite)
#   bash scripts/setup.sh asan        the memory-handling tests alone        (preset asan)
#   bash scripts/setup.sh clang       the same suite built with clang            (preset clang)
#   bash scripts/setup.sh bench       build and run the benchmarks (bench/run.sh)
# Parallelism: all cores (nproc), or JOBS=n.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quickstart}
jobs=${JOBS:-$(nproc)}

# What building anything needs: a compiler, CMake + Ninja, Boost (Hana), xsimd and xtl, and
# the Vulkan headers (the loader itself is opened at run time, never linked).
base=(g++ cmake ninja-build libboost-dev libxsimd-dev xtl-dev libvulkan-dev)
# The tests also need Catch2 (v2) and xtensor (a reference in some tests); lavapipe (Mesa's
# CPU Vulkan driver), the Vulkan loader, the Khronos validation layer and glslc are there
# for the GPU tests, which run on the CPU where no GPU is; spirv-val checks every kernel.
# Open MPI for kiln/mpi.hpp's tests and example (mpirun -np 2 over loopback); OpenBLAS, the
# BLAS provider that test_matmul_blas runs against kiln's own kernel (opened by dlopen).
tests=(catch2 xtensor-dev mesa-vulkan-drivers libvulkan1 vulkan-validationlayers glslc spirv-tools
  openmpi-bin libopenmpi-dev libopenblas0-pthread)
bench=(libeigen3-dev xtensor-dev time libopenblas0-pthread)

case "$mode" in
  quickstart) want=("${base[@]}") ;;
  test | asan) want=("${base[@]}" "${tests[@]}") ;;
  clang) want=("${base[@]}" "${tests[@]}" clang) ;;
  bench) want=("${base[@]}" "${bench[@]}") ;;
  *)
    echo "usage: bash scripts/setup.sh quickstart|test|asan|clang|bench" >&2
    exit 2
    ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}; run as root, or install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Runs one preset: configure, build, and (unless told not to) test. Prints the time taken.
# Returns non-zero at the first step that fails (callers may go on with another preset, where
# `set -e` does not apply).
run_preset() {
  local preset=$1 test=${2:-yes} start=$SECONDS
  echo "== $preset: configure + build"
  cmake --preset "$preset" || return
  cmake --build --preset "$preset" -j "$jobs" || return
  if [ "$test" = yes ]; then
    echo "== $preset: test"
    ctest --preset "$preset" -j "$jobs" || return
  fi
  echo "== $preset: done in $((SECONDS - start)) s"
}

case "$mode" in
  quickstart)
    run_preset quickstart no
    ./build/quickstart/examples/quickstart
    ;;
  test)
    # Each test file is built once with g++: the memory-handling ones with the sanitizers,
    # the rest plain. Both halves run even when the first fails, so one run reports both.
    rc=0
    run_preset suite || rc=1
    run_preset asan || rc=1
    exit $rc
    ;;
  asan) run_preset asan ;;
  clang) run_preset clang ;;
  bench) bash bench/run.sh ;;
esac
