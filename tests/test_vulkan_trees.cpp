// Random expression trees on the Vulkan device against the host (device_trees.hpp).
#include "vulkan_support.hpp"

#include "device_trees.hpp"

TEST_CASE("vulkan: random expression trees against the host", "[vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  run_trees(*dev);
}
