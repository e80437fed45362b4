// Random expression trees on each GPU device there is against the host (device_trees.hpp):
// one binary for both backends, as with the device catalog.
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "cuda_support.hpp"
#include "device_trees.hpp"
#include "metal_support.hpp"

TEST_CASE("device: random expression trees against the host", "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()})
    if (dev) {
      INFO("on " << dev->str());
      run_trees(*dev);
    }
}
