#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root):
#   bash scripts/setup.sh quickstart   install what is missing, build, run examples/quickstart
#   bash scripts/setup.sh test         install what the tests need, build and run the whole
#                                      suite (release build with g++, clang build, ASan+UBSan)
#   bash scripts/setup.sh bench        install the peers (Eigen, xtensor), build and run bench/
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quickstart}

base=(g++ cmake ninja-build libboost-dev xtl-dev libxsimd-dev)
# The tests also need Catch2 and xtensor (a reference), clang (the second compiler), and
# lavapipe with the Khronos validation layer for the GPU tests that run on the CPU.
tests=(catch2 xtensor-dev clang mesa-vulkan-drivers libvulkan1 vulkan-validationlayers glslc
       spirv-tools)
bench=(libeigen3-dev xtensor-dev)

case "$mode" in
  quickstart) want=("${base[@]}") ;;
  test) want=("${base[@]}" "${tests[@]}") ;;
  bench) want=("${base[@]}" "${bench[@]}") ;;
  *) echo "usage: $0 quickstart|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
case "$mode" in
  quickstart)
    cmake --preset release -DKILN_BUILD_TESTS=OFF
    cmake --build --preset release --target quickstart -j "$jobs"
    ./build/release/examples/quickstart
    ;;
  test)
    for preset in release clang asan; do
      echo "== $preset: build"
      cmake --preset "$preset" -DKILN_BUILD_TESTS=ON
      cmake --build --preset "$preset" -j "$jobs"
      if [ "$preset" != clang ]; then # clang: the same suite, built warning-free, is enough
        echo "== $preset: test"
        ctest --preset "$preset" -j "$jobs"
      fi
    done
    ;;
  bench)
    bash bench/run.sh
    ;;
esac
