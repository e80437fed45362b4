// Random expression trees on the CUDA device against the host (device_trees.hpp).
#include "cuda_support.hpp"

#include "device_trees.hpp"

TEST_CASE("cuda: random expression trees against the host", "[cuda]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  run_trees(*dev);
}
