#pragma once
// The disk-cache key of one compiled kernel: everything that can change the binary a
// compiler produces, so a stale binary is never loaded after a driver, compiler or kiln
// update (cupy #7391: keys without the driver version served stale cubins).
#include "kiln/jit/cache/hash.hpp"

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::jit {

// The library version that generates kernel sources (part of every disk-cache key).
inline constexpr std::string_view kiln_version = "kiln 0.1.0";

struct kernel_key_inputs {
  std::string_view source;           // the full generated kernel source
  std::string_view options;          // compiler options, as passed to the compiler
  std::string_view compiler_version; // e.g. "glslc shaderc v2022.4" or NVRTC's version
  // Device identity: Vulkan's VkPhysicalDeviceProperties (CUDA: vendor 0x10de, the
  // compute capability as device id, the driver version from cuDriverGetVersion).
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t driver_version = 0;
  std::array<std::uint8_t, 16> pipeline_cache_uuid{};
  std::string_view kiln_version; // the library version that generated the source
};

inline hash128 kernel_cache_key(const kernel_key_inputs& in) {
  hasher h;
  // A tag and a layout version first: a future change of what goes in here changes every key.
  h.add(std::string_view("kiln kernel key")).add(std::uint32_t{1});
  h.add(in.source).add(in.options).add(in.compiler_version);
  h.add(in.vendor_id).add(in.device_id).add(in.driver_version);
  for (const std::uint8_t b : in.pipeline_cache_uuid)
    h.add(b);
  h.add(in.kiln_version);
  return h.digest();
}

} // namespace kiln::jit
