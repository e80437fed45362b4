#pragma once
// Whether a device is one of the CPU stand-ins (cuda-on-cpu, msl-on-cpu): there every new
// kernel is a host compile (~1-2 s), so the device tests draw fewer cases on them.
#include "cuda_support.hpp"
#include "metal_support.hpp"

namespace test {
inline bool stand_in(const kiln::device& dev) {
  return (dev.kind() == kiln::device_kind::cuda && cuda_test::on_cpu()) ||
         (dev.kind() == kiln::device_kind::metal && metal_test::on_cpu());
}
} // namespace test
