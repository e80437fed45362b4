#pragma once
// The JIT's implementation, compiled once per program: include this in exactly one file
// (CMake's kiln::kiln does it for you, in the kiln_runtime library). Everything after the
// planner hands over a pass lowered to IR is here: the executors' shared body, code
// generation, compilers, caches, and the Vulkan, CUDA and Metal runtimes; and kiln's
// non-template functions, for programs that define KILN_COMPILED_CORE (kiln/linkage.hpp).
#include "kiln/backend.hpp"
#include "kiln/core_impl.hpp"
#include "kiln/jit/backend/run_contraction.hpp"
#include "kiln/jit/backend/run_pass.hpp"
#include "kiln/jit/backend/run_reduction.hpp"
#include "kiln/jit/cuda/backend.hpp"
#include "kiln/jit/jit.hpp"
#include "kiln/jit/metal/framework.hpp"
#include "kiln/jit/tune/host.hpp"
#include "kiln/jit/tune/host_gemm.hpp"
#include "kiln/jit/vulkan/backend.hpp"

namespace kiln::jit {

// Host passes take tuned settings from the database (tune/host.hpp) in every program that
// has the runtime, including those that never open a device.
const bool host_chooser_installed = tune::install_host_chooser();
const bool host_gemm_chooser_installed = tune::install_host_gemm_chooser();

bool register_builtin_backends() {
  static const bool done = [] {
    register_backend({device_kind::vulkan, vk::list_vulkan_devices, vk::open_vulkan});
    register_backend({device_kind::cuda, cuda::list_cuda_devices, cuda::open_cuda});
    register_backend({device_kind::metal, metal::list_metal_devices, metal::open_metal});
    return true;
  }();
  return done;
}

} // namespace kiln::jit
