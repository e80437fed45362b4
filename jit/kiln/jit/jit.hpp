#pragma once
// The fusion JIT as a program sees it: GPU devices ("vulkan:N", "cuda:N") become available
// to kiln::device and the planner. The JIT itself (code generation, compilers, caches, the
// Vulkan and CUDA runtimes) is compiled once per program, not in every file: CMake's
// kiln::kiln links it (target kiln_runtime); without CMake, one file of the program
// includes <kiln/jit/src.hpp>.
#include <atomic>
#include <cstdint>

namespace kiln::jit {

// Registers the built-in backends with kiln's device registry (once; defined in src.hpp).
bool register_builtin_backends();

// Every file that includes kiln names the JIT, so a static library's object is linked
// and its backends registered before main.
inline const bool builtin_backends_registered = register_builtin_backends();

// Kernels compiled from source in this process, and kernels whose binary came from the
// disk cache instead (an evaluation that finds its kernels in memory adds to neither).
inline std::atomic<std::uint64_t>& compile_count() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}
inline std::atomic<std::uint64_t>& disk_hit_count() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

} // namespace kiln::jit
